"""JSON schemas of the PersistentResource REST resource and its operations (Vertex AI v1) for
/api/schema/. The parser (resources.spec) stays the judge of what a request may hold."""

from __future__ import annotations

from trainhub.common.openapi import TIMESTAMP, Schema, int64, obj
from trainhub.jobs.openapi import LABELS, MACHINE_SPEC
from trainhub.jobs.spec import DISK_TYPES
from trainhub.resources.models import State
from trainhub.resources.spec import MAX_RESOURCE_POOLS

_STATUS = obj({"code": {"type": "integer"}, "message": {"type": "string"}}, extra=True)

RESOURCE_POOL = obj({
    "id": {"type": "string"},
    "machineSpec": MACHINE_SPEC,
    "replicaCount": int64(minimum=1, maximum=1000),
    "diskSpec": obj({"bootDiskType": {"type": "string", "enum": list(DISK_TYPES)},
                     "bootDiskSizeGb": int64(minimum=100, maximum=64000)}),
    "autoscalingSpec": obj({"minReplicaCount": int64(minimum=1, maximum=1000),
                            "maxReplicaCount": int64(minimum=1, maximum=1000)}),
    "usedReplicaCount": {**int64(minimum=0), "readOnly": True},
}, required=("machineSpec",))

PERSISTENT_RESOURCE_REQUEST = {**obj({
    "displayName": {"type": "string", "maxLength": 128},
    "resourcePools": {"type": "array", "minItems": 1, "maxItems": MAX_RESOURCE_POOLS, "items": RESOURCE_POOL},
    "labels": LABELS,
}, required=("resourcePools",), extra=True), "example": {
    "displayName": "my-persistent-resource",
    "resourcePools": [{"machineSpec": {"machineType": "n1-standard-4", "acceleratorType": "NVIDIA_TESLA_T4",
                                       "acceleratorCount": 1}, "replicaCount": 1}],
}}

PERSISTENT_RESOURCE = obj({
    "name": {"type": "string", "example": "projects/demo/locations/us-central1/persistentResources/demo-pool"},
    "displayName": {"type": "string"},
    "resourcePools": {"type": "array", "items": {**RESOURCE_POOL, "additionalProperties": True}},
    "state": {"type": "string", "enum": [state.value for state in State]},
    "error": _STATUS,
    "createTime": TIMESTAMP, "updateTime": TIMESTAMP, "startTime": TIMESTAMP,
    "labels": LABELS,
    "trainhubStatus": {"type": "object", "description": "trainhub extension: replicas provisioned, used and "
                                                        "free per pool, and the resource's cost."},
}, required=("name", "resourcePools", "state", "createTime", "updateTime"), extra=True)

PERSISTENT_RESOURCE_LIST = obj({"persistentResources": {"type": "array", "items": PERSISTENT_RESOURCE},
                                "nextPageToken": {"type": "string"}}, required=("persistentResources",))

OPERATION: Schema = obj({
    "name": {"type": "string"},
    "metadata": {"type": "object"},
    "done": {"type": "boolean"},
    "error": _STATUS,
    "response": {"type": "object"},
}, required=("name", "metadata", "done"))
