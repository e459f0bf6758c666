"""PersistentResource and its Operations -> Vertex AI v1 JSON. Extension data (machines
provisioned and free per pool, cost) lives under `trainhubStatus`, which Google's clients ignore."""

from __future__ import annotations

import datetime as dt
from typing import Any

from trainhub.common.wire import format_timestamp
from trainhub.jobs.costs import render_cost_breakdown
from trainhub.resources import selectors
from trainhub.resources.models import OperationKind, PersistentResource, ResourceOperation, State
from trainhub.resources.spec import render_pool

TYPE_PREFIX = "type.googleapis.com/google.cloud.aiplatform.v1."
METADATA_TYPES = {
    OperationKind.CREATE: "CreatePersistentResourceOperationMetadata",
    OperationKind.UPDATE: "UpdatePersistentResourceOperationMetadata",
    OperationKind.REBOOT: "RebootPersistentResourceOperationMetadata",
    OperationKind.DELETE: "DeleteOperationMetadata",
}
NO_USAGE = selectors.NO_USAGE


def render_persistent_resource(resource: PersistentResource, usage: dict[int, selectors.PoolUsage],
                               now: dt.datetime) -> dict[str, Any]:
    """``usage``: selectors.pool_usage for (at least) this resource."""
    pools = list(resource.pools.all())
    body: dict[str, Any] = {
        "name": resource.resource_name,
        "displayName": resource.display_name,
        "resourcePools": [
            {**render_pool(spec), "usedReplicaCount": str(usage.get(pool.pk, NO_USAGE).used)}
            for pool, spec in zip(pools, selectors.pool_specs(resource))
        ],
        "state": resource.state,
        "createTime": format_timestamp(resource.create_time),
        "updateTime": format_timestamp(resource.update_time),
    }
    if resource.start_time:
        body["startTime"] = format_timestamp(resource.start_time)
    if resource.error and resource.state in (State.ERROR, State.STOPPING):
        body["error"] = resource.error
    if resource.labels:
        body["labels"] = resource.labels
    body.update(resource.options)
    cost = selectors.resource_cost(resource, usage, now)
    body["trainhubStatus"] = {
        "resourcePools": [{"id": pool.pool_id,
                           "provisionedReplicaCount": str(usage.get(pool.pk, NO_USAGE).provisioned),
                           "usedReplicaCount": str(usage.get(pool.pk, NO_USAGE).used),
                           "freeReplicaCount": str(usage.get(pool.pk, NO_USAGE).free)} for pool in pools],
        "cost": {"accrued": render_cost_breakdown(cost.accrued), "perHour": render_cost_breakdown(cost.hourly)},
    }
    return body


def render_operation(operation: ResourceOperation, now: dt.datetime) -> dict[str, Any]:
    """A google.longrunning.Operation; when done, its error or its response (the resource as it
    is now, or Empty for a delete)."""
    metadata: dict[str, Any] = {
        "@type": TYPE_PREFIX + METADATA_TYPES[operation.kind],
        "genericMetadata": {"createTime": format_timestamp(operation.create_time),
                            "updateTime": format_timestamp(operation.update_time)},
    }
    if operation.kind != OperationKind.DELETE and operation.progress_message:
        metadata["progressMessage"] = operation.progress_message
    body: dict[str, Any] = {"name": operation.name, "metadata": metadata, "done": operation.done}
    if not operation.done:
        return body
    if operation.error:
        body["error"] = operation.error
    elif operation.kind == OperationKind.DELETE or operation.resource_id is None:
        body["response"] = {"@type": "type.googleapis.com/google.protobuf.Empty"}
    else:
        resource = selectors.resource_with_pools(pk=operation.resource_id)
        usage = selectors.pool_usage(resources=[resource], now=now)
        body["response"] = {"@type": TYPE_PREFIX + "PersistentResource",
                            **render_persistent_resource(resource, usage, now)}
    return body
