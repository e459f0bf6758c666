"""Every write to a persistent resource, its pools, nodes, operations, billing and samples.

Requests (create, update, reboot, delete) validate, record a long-running operation and change
the state; ``persistent_resources_advance`` (a Celery task under the scheduler's leader lock, so
node reservations never race a scheduler pass) carries each operation to its end:

- PROVISIONING: reserve idle inventory nodes for every pool at once, all or nothing (a shortage
  ends the operation with RESOURCE_EXHAUSTED and the resource in ERROR), then wait until every
  reserved node's agent heart-beats -> RUNNING; silent past the provisioning timeout -> ERROR.
- UPDATING: grow pools with live idle nodes (all or nothing; a shortage fails the operation and
  the resource keeps its size), give back idle surplus nodes -> RUNNING.
- REBOOTING: the replicas on its nodes were settled as lost when the reboot began (their jobs
  fail, or go back to the queue with restartJobOnWorkerRestart); missing nodes are reserved
  again; RUNNING once every node has heart-beaten since the reboot began.
- STOPPING: its jobs were cancelled when the delete began; once no replica runs on its nodes they
  go back to the shared pool and the resource is deleted.
- RUNNING <-> ERROR: a node whose agent stops answering puts the resource in ERROR naming it;
  once every pool has its machines and all answer again it is RUNNING.
Autoscaling pools give back a machine idle for TRAINHUB_RESOURCE_SCALE_DOWN_AFTER_SECONDS, down to
minReplicaCount (the scheduler step grows them, see resources.pass_step).

Billing settles GPU-seconds into ``gpu_seconds`` before every change of state or size, so the
accrued cost is exact however often the size changes.
"""

from __future__ import annotations

import datetime as dt
import logging
import secrets
from typing import Iterable

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, transaction
from django.db.models import Exists, OuterRef
from django.utils import timezone

from trainhub.common.enqueue import enqueue_after_commit
from trainhub.common.errors import ApiError, FieldViolation, invalid_argument
from trainhub.common.locations import location_check
from trainhub.iam.models import Project
from trainhub.inventory.models import Node, NodeState
from trainhub.inventory.services import NodesUnavailable, nodes_dedicate, nodes_release
from trainhub.jobs import services as job_services
from trainhub.jobs.models import Replica
from trainhub.resources import selectors
from trainhub.resources.models import (
    OperationKind,
    PersistentResource,
    PoolNode,
    ResourceOperation,
    ResourcePool,
    State,
    UtilisationSample,
)
from trainhub.resources.spec import (
    PoolSpec,
    SpecError,
    parse_persistent_resource,
    parse_update,
    validate_resource_id,
)
from trainhub.jobs.spec import ReplicaShape
from trainhub.scheduling.placement import CapacityIndex, FreeNode, Shortfall
from trainhub.scheduling.quota import ON_DEMAND, QuotaBook, quota_demand, quota_metric
from trainhub.scheduling.selectors import quota_book

logger = logging.getLogger(__name__)

# google.rpc.Code values used in operation and resource errors.
CODE_CANCELLED = 1
CODE_DEADLINE_EXCEEDED = 4
CODE_RESOURCE_EXHAUSTED = 8
CODE_UNAVAILABLE = 14
SAMPLE_RETENTION = dt.timedelta(days=7)


def _request_advance() -> None:
    enqueue_after_commit("trainhub.resources.tasks.persistent_resources_advance")


def _failed_precondition(message: str) -> ApiError:
    return ApiError(400, message, "FAILED_PRECONDITION")


# Inventory ------------------------------------------------------------------------------------


def _idle_nodes(location: str, *, live_since: dt.datetime | None) -> list[FreeNode]:
    """Shared, idle, UP nodes of the location (alive since ``live_since`` when given)."""
    nodes = (Node.objects.filter(state=NodeState.UP, dedicated_to="", pool__location=location)
             .exclude(Exists(Replica.objects.filter(node=OuterRef("pk"), active=True))))
    if live_since is not None:
        nodes = nodes.filter(last_heartbeat__gte=live_since)
    rows = nodes.values_list("pk", "pool__machine_type", "pool__accelerator_type", "pool__accelerator_count")
    return [FreeNode(gpus, pk, machine, accel) for pk, machine, accel, gpus in rows]


def _describe_shortfall(shortfall: Shortfall, location: str, whose: str) -> str:
    shape = shortfall.shape
    gpus = f" with {shape.accelerator_count} x {shape.accelerator_type}" if shape.accelerator_count else ""
    return (f"{whose} needs {shortfall.needed} {shape.machine_type} node(s){gpus} in {location}; "
            f"{shortfall.free} available")


def _largest_first(wants: list[tuple[ResourcePool, int]]) -> list[tuple[ResourcePool, int]]:
    """The pools that want nodes, the most demanding first (as the scheduler orders shapes), so a
    small pool cannot take the only big node."""
    return sorted((item for item in wants if item[1] > 0), key=lambda item: -item[0].accelerator_count)


def _machines_within_quota(book: QuotaBook, resource: PersistentResource, shape: ReplicaShape, count: int) -> int:
    """How many of ``count`` machines of ``shape`` the project's on-demand quota still admits."""
    metric = quota_metric(shape.accelerator_type, ON_DEMAND) if shape.accelerator_count else None
    headroom = book.headroom(resource.project_id, resource.location, metric) if metric else None
    return count if headroom is None else min(count, headroom // shape.accelerator_count)


def _quota_shortfalls(book: QuotaBook, project: Project, location: str,
                      wants: Iterable[tuple[ReplicaShape, int]]) -> list[str]:
    demand = quota_demand(((count, shape) for shape, count in wants), ON_DEMAND)
    return [shortfall.describe_usage() for shortfall in book.shortfalls(project.pk, location, demand)]


def _refuse_beyond_quota(project: Project, location: str, wants: Iterable[tuple[ReplicaShape, int]]) -> None:
    """429 RESOURCE_EXHAUSTED when the machines asked for do not fit the project's on-demand GPU quota
    beside what its jobs and other persistent resources already hold (Vertex counts a persistent
    resource against the training quota)."""
    shortfalls = _quota_shortfalls(quota_book(project_ids=[project.pk]), project, location, wants)
    if shortfalls:
        raise ApiError(429, "The following quota metrics exceed quota limits: " + ", ".join(shortfalls),
                       "RESOURCE_EXHAUSTED")


def _reserve(resource: PersistentResource, wants: list[tuple[ResourcePool, int]], now: dt.datetime, *,
             live_only: bool, partial: bool = False) -> tuple[int, str | None]:
    """Dedicate ``count`` more nodes to each pool: all or nothing, or with ``partial`` as many as
    there are and the quota admits. Returns how many nodes were dedicated and the shortage (None:
    none). Checked again here, under the leader lock, because usage may have grown since the request."""
    index = CapacityIndex(_idle_nodes(resource.location, live_since=selectors.live_after(now) if live_only else None))
    book = quota_book(project_ids=[resource.project_id])
    chosen: list[tuple[ResourcePool, list[FreeNode]]] = []
    shortage = None
    for pool, count in _largest_first(wants):  # a shortage drops the index: nothing to give back
        admitted = _machines_within_quota(book, resource, pool.shape, count)
        if admitted < count:
            shortage = (f"Resource pool {pool.pool_id!r}: quota "
                        + "; ".join(_quota_shortfalls(book, resource.project, resource.location, [(pool.shape, count)])))
            if not partial:
                return 0, shortage
            count = admitted
        taken = index.take([(pool.shape, count)]) if count else [[]]
        if isinstance(taken, Shortfall):
            shortage = _describe_shortfall(taken, resource.location, f"resource pool {pool.pool_id!r}")
            if not partial:
                return 0, shortage
            taken = index.take([(pool.shape, taken.free)]) if taken.free else [[]]
        chosen.append((pool, taken[0]))
        book.charge(resource.project_id, resource.location, quota_demand([(len(taken[0]), pool.shape)], ON_DEMAND))
    node_ids = [node.node_id for _, nodes in chosen for node in nodes]
    if not node_ids:
        return 0, shortage
    try:
        with transaction.atomic():
            _settle_billing(resource, now)
            nodes_dedicate(nodes=list(Node.objects.filter(pk__in=node_ids)), owner=resource.owner)
            PoolNode.objects.bulk_create(PoolNode(pool=pool, node_id=node.node_id, added_at=now)
                                         for pool, nodes in chosen for node in nodes)
    except NodesUnavailable as exc:  # taken between the read and the write; the next run retries
        return 0, str(exc)
    return len(node_ids), shortage


def _release(resource: PersistentResource, members: Iterable[selectors.Member], now: dt.datetime) -> int:
    members = list(members)
    if not members:
        return 0
    _settle_billing(resource, now)
    nodes_release(owner=resource.owner, nodes=[member.node for member in members])
    PoolNode.objects.filter(pk__in=[member.membership.pk for member in members]).delete()
    return len(members)


def resource_pool_grow(*, resource: PersistentResource, pool: ResourcePool, count: int, now: dt.datetime) -> int:
    """Autoscale up: dedicate up to ``count`` more live idle nodes to ``pool``; how many it got."""
    grown, _ = _reserve(resource, [(pool, count)], now, live_only=True, partial=True)
    if grown:
        logger.info("persistent resource %s: pool %s grew by %d", resource, pool.pool_id, grown)
    return grown


# Billing and state ----------------------------------------------------------------------------


def _settle_billing(resource: PersistentResource, now: dt.datetime) -> None:
    """Add the GPU-seconds since ``billed_until`` at the current size; call before any change."""
    usage = selectors.pool_usage(resources=[resource], now=now)
    hours = selectors.accrued_gpu_hours(resource, selectors.held_gpus(resource, usage), now)
    resource.gpu_seconds = {accel: value * 3600 for accel, value in hours.items()}
    resource.billed_until = now
    resource.save(update_fields=["gpu_seconds", "billed_until"])


def _set_state(resource: PersistentResource, state: str, now: dt.datetime, *, error: dict | None = None) -> None:
    _settle_billing(resource, now)
    resource.state = state
    resource.state_time = now
    resource.update_time = now
    resource.error = error
    if state == State.RUNNING and resource.start_time is None:
        resource.start_time = now
    resource.save(update_fields=["state", "state_time", "update_time", "error", "start_time"])


def _operation_start(resource: PersistentResource, kind: str, now: dt.datetime, *, request: dict | None = None,
                     progress: str = "") -> ResourceOperation:
    return ResourceOperation.objects.create(
        project=resource.project, location=resource.location, resource=resource, target_id=resource.resource_id,
        kind=kind, request=request or {}, operation_id=str(secrets.randbelow(9 * 10**17) + 10**17),
        progress_message=progress, create_time=now, update_time=now)


def _operation_finish(operation: ResourceOperation | None, now: dt.datetime, *, error: dict | None = None) -> None:
    if operation is None or operation.done:
        return
    operation.done = True
    operation.error = error
    operation.update_time = now
    operation.progress_message = "Failed." if error else "Done."
    operation.save(update_fields=["done", "error", "update_time", "progress_message"])


def _progress(operation: ResourceOperation | None, message: str, now: dt.datetime) -> None:
    if operation is not None and operation.progress_message != message:
        operation.progress_message = message
        operation.update_time = now
        operation.save(update_fields=["progress_message", "update_time"])


def _fail(resource: PersistentResource, operation: ResourceOperation | None, now: dt.datetime, code: int,
          message: str) -> None:
    error = {"code": code, "message": message}
    _set_state(resource, State.ERROR, now, error=error)
    _operation_finish(operation, now, error=error)


def _locked(resource: PersistentResource) -> PersistentResource:
    """The resource re-read under a row lock, so a request and the operation never interleave."""
    return (PersistentResource.objects.select_for_update(of=("self",)).select_related("project")
            .prefetch_related("pools").get(pk=resource.pk))


# Requests -------------------------------------------------------------------------------------


def _refuse_beyond_inventory(location: str, pools: tuple[PoolSpec, ...]) -> None:
    """400 when the location's whole inventory (idle or not) could never supply a pool."""
    everything = Node.objects.filter(pool__location=location).values_list(
        "pk", "pool__machine_type", "pool__accelerator_type", "pool__accelerator_count")
    index = CapacityIndex(FreeNode(gpus, pk, machine, accel) for pk, machine, accel, gpus in everything)
    violations = []
    for position, pool in sorted(enumerate(pools), key=lambda item: -item[1].shape.accelerator_count):
        taken = index.take([(pool.shape, pool.replica_count)])
        if isinstance(taken, Shortfall):
            violations.append(FieldViolation(
                f"resourcePools[{position}].replicaCount",
                _describe_shortfall(taken, location, f"resource pool {pool.pool_id!r}")
                + " in the whole inventory (idle or not), so it can never be provisioned"))
    if violations:
        raise invalid_argument(sorted(violations, key=lambda v: v.field))


def persistent_resource_create(*, project: Project, location: str, resource_id: str, body: object,
                               user: AbstractBaseUser | None, now: dt.datetime | None = None) -> ResourceOperation:
    """Validate and record a resource in PROVISIONING; its nodes are reserved by the operation.

    400 for an invalid document or a pool larger than the location's whole inventory; 409 when a
    live resource already has the id.
    """
    location_check(location)
    try:
        resource_id = validate_resource_id(resource_id)
        parsed = parse_persistent_resource(body)
    except SpecError as exc:
        raise invalid_argument(exc.violations) from exc
    name = f"projects/{project.project_id}/locations/{location}/persistentResources/{resource_id}"
    conflict = ApiError(409, f"PersistentResource {name} already exists.", "ALREADY_EXISTS")
    if selectors.resource_find(project=project, location=location, resource_id=resource_id):
        raise conflict
    _refuse_beyond_inventory(location, parsed.pools)
    _refuse_beyond_quota(project, location, [(pool.shape, pool.replica_count) for pool in parsed.pools])
    now = now or timezone.now()
    try:
        with transaction.atomic():
            resource = PersistentResource.objects.create(
                project=project, location=location, resource_id=resource_id, display_name=parsed.display_name,
                labels=parsed.labels, options=parsed.options, state=State.PROVISIONING,
                created_by=user if user is not None and user.is_authenticated else None,
                create_time=now, update_time=now, state_time=now)
            ResourcePool.objects.bulk_create(
                ResourcePool(resource=resource, position=position, pool_id=pool.pool_id,
                             machine_type=pool.shape.machine_type, accelerator_type=pool.shape.accelerator_type,
                             accelerator_count=pool.shape.accelerator_count,
                             disk_type=pool.disk_spec["bootDiskType"], disk_size_gb=pool.disk_spec["bootDiskSizeGb"],
                             replica_count=pool.replica_count, min_replica_count=pool.min_replica_count,
                             max_replica_count=pool.max_replica_count)
                for position, pool in enumerate(parsed.pools))
            operation = _operation_start(resource, OperationKind.CREATE, now, progress="Reserving nodes.")
            _request_advance()
    except IntegrityError as exc:
        raise conflict from exc
    return operation


def _target_size(pool: PoolSpec, current: PoolSpec, provisioned: int) -> int:
    """Machines a pool should hold after an update: its replicaCount, or for an autoscaling pool
    its current size moved inside the new range (a new replicaCount is taken as the new size)."""
    if not pool.autoscaling or pool.replica_count != current.replica_count:
        return pool.replica_count
    return min(max(provisioned, pool.min_replica_count), pool.max_replica_count)


def persistent_resource_update(*, resource: PersistentResource, update_mask: object, body: object,
                               now: dt.datetime | None = None) -> ResourceOperation:
    """PATCH with updateMask. Names and labels change at once; a new pool size is applied by the
    operation (UPDATING). Refused unless RUNNING, or when a pool would shrink below the machines
    its jobs use."""
    now = now or timezone.now()
    with transaction.atomic():
        resource = _locked(resource)
        if resource.state != State.RUNNING:
            raise _failed_precondition(f"PersistentResource {resource.resource_name} is {resource.state}; it can "
                                       "be updated only when RUNNING.")
        current = selectors.pool_specs(resource)
        try:
            parsed = parse_update(update_mask, body, current)
        except SpecError as exc:
            raise invalid_argument(exc.violations) from exc
        targets = _resize_targets(resource, parsed.pools or (), current, now)
        if parsed.display_name is not None:
            resource.display_name = parsed.display_name
        if parsed.labels is not None:
            resource.labels = parsed.labels
        resource.update_time = now
        resource.save(update_fields=["display_name", "labels", "update_time"])
        operation = _operation_start(resource, OperationKind.UPDATE, now, request={"pools": targets})
        if targets:
            _set_state(resource, State.UPDATING, now)
            _progress(operation, "Resizing resource pools.", now)
            _request_advance()
        else:
            _operation_finish(operation, now)
    return operation


def _resize_targets(resource: PersistentResource, pools: tuple[PoolSpec, ...], current: list[PoolSpec],
                    now: dt.datetime) -> list[dict]:
    """Each updated pool's new counts and the machines it should hold; 400 below its jobs' use."""
    usage = selectors.pool_usage(resources=[resource], now=now)
    pk_of = {pool.pool_id: pool.pk for pool in resource.pools.all()}
    targets = []
    growth = []
    for pool, before in zip(pools, current):
        held = usage.get(pk_of[pool.pool_id], selectors.NO_USAGE)
        target = _target_size(pool, before, held.provisioned)
        if target < held.used:
            raise _failed_precondition(f"Resource pool {pool.pool_id!r} has {held.used} machine(s) running jobs; "
                                       f"it cannot shrink to {target}. Wait for the jobs or cancel them.")
        growth.append((pool.shape, max(0, target - held.provisioned)))
        targets.append({"id": pool.pool_id, "replicaCount": pool.replica_count, "target": target,
                        "minReplicaCount": pool.min_replica_count, "maxReplicaCount": pool.max_replica_count})
    _refuse_beyond_quota(resource.project, resource.location, growth)
    return targets


def persistent_resource_reboot(*, resource: PersistentResource, now: dt.datetime | None = None) -> ResourceOperation:
    """Restart the resource's machines: every replica on them is lost (its job fails, or is
    requeued per restartJobOnWorkerRestart). Allowed only when RUNNING or ERROR."""
    now = now or timezone.now()
    with transaction.atomic():
        resource = _locked(resource)
        if resource.state not in (State.RUNNING, State.ERROR):
            raise _failed_precondition(f"PersistentResource {resource.resource_name} is {resource.state}; only a "
                                       "RUNNING or ERROR resource can be rebooted.")
        _set_state(resource, State.REBOOTING, now)
        operation = _operation_start(resource, OperationKind.REBOOT, now, progress="Restarting the nodes' agents.")
        lost = f"persistent resource {resource.resource_id} was rebooted"
        for replica in Replica.objects.filter(active=True, node__resource_membership__pool__resource=resource):
            job_services.replica_exited(replica=replica, exit_code=None, now=now, lost_reason=lost)
        _request_advance()
    return operation


def persistent_resource_delete(*, resource: PersistentResource, now: dt.datetime | None = None) -> ResourceOperation:
    """STOPPING: cancel every job on the resource; the operation gives its nodes back once the
    jobs' replicas have stopped. An operation still running on it ends CANCELLED."""
    now = now or timezone.now()
    with transaction.atomic():
        resource = _locked(resource)
        if resource.state == State.STOPPING:
            raise _failed_precondition(f"PersistentResource {resource.resource_name} is already being deleted.")
        _operation_finish(selectors.operation_in_flight(resource=resource), now,
                          error={"code": CODE_CANCELLED, "message": "The persistent resource is being deleted."})
        _set_state(resource, State.STOPPING, now, error=resource.error)
        operation = _operation_start(resource, OperationKind.DELETE, now, progress="Cancelling its jobs.")
        for job in selectors.jobs_on_resource(resource=resource):
            job_services.job_cancel(job=job, now=now)
        _request_advance()
    return operation


# Advancing operations -------------------------------------------------------------------------


def persistent_resources_advance(*, now: dt.datetime) -> int:
    """Carry every resource one step (see the module docstring); returns how many changed state."""
    changed = 0
    for resource in PersistentResource.objects.filter(deleted_time__isnull=True).only("pk"):
        with transaction.atomic():
            resource = _locked(resource)
            before = resource.state
            members = selectors.resource_members(resource_pks=[resource.pk], now=now).get(resource.pk, [])
            _STEPS[resource.state](resource, members, now)
            if resource.deleted_time is None:
                _sample(resource, now)
        changed += resource.state != before or resource.deleted_time is not None
    return changed


def _expected(pool: ResourcePool, provisioned: int, *, initial: bool) -> int:
    if initial or not pool.autoscaling:
        return pool.replica_count
    return max(provisioned, pool.floor)


def _missing(resource: PersistentResource, members: list[selectors.Member], *,
             initial: bool) -> list[tuple[ResourcePool, int]]:
    held: dict[int, int] = {}
    for member in members:
        held[member.pool_pk] = held.get(member.pool_pk, 0) + 1
    return [(pool, _expected(pool, held.get(pool.pk, 0), initial=initial) - held.get(pool.pk, 0))
            for pool in resource.pools.all()]


def _silent(members: list[selectors.Member], since: dt.datetime | None = None) -> list[str]:
    return sorted(m.node.name for m in members
                  if not m.live or (since is not None and m.node.last_heartbeat < since))


def _wait_for_agents(resource: PersistentResource, members: list[selectors.Member], now: dt.datetime, *,
                     since: dt.datetime | None = None) -> None:
    """RUNNING once every node answers (since ``since``); ERROR past the provisioning timeout."""
    operation = selectors.operation_in_flight(resource=resource)
    silent = _silent(members, since)
    if not silent:
        _set_state(resource, State.RUNNING, now)
        _operation_finish(operation, now)
        return
    timeout = settings.TRAINHUB_RESOURCE_PROVISIONING_TIMEOUT_SECONDS
    if (now - resource.state_time).total_seconds() >= timeout:
        _fail(resource, operation, now, CODE_DEADLINE_EXCEEDED,
              f"Node(s) {', '.join(silent)} did not report a heartbeat within {timeout}s.")
    else:
        _progress(operation, f"Waiting for the agents of {len(silent)} node(s) to report: {', '.join(silent)}.", now)


def _provision(resource: PersistentResource, members: list[selectors.Member], now: dt.datetime, *,
               initial: bool) -> list[selectors.Member] | None:
    """Reserve what the pools lack; the members after, or None when the inventory fell short."""
    missing = _missing(resource, members, initial=initial)
    if not any(count > 0 for _, count in missing):
        return members
    _, shortage = _reserve(resource, missing, now, live_only=False)
    if shortage is not None:
        _fail(resource, selectors.operation_in_flight(resource=resource), now, CODE_RESOURCE_EXHAUSTED,
              f"Resources are insufficient in region: {resource.location}. {shortage}.")
        return None
    return selectors.resource_members(resource_pks=[resource.pk], now=now).get(resource.pk, [])


def _advance_provisioning(resource: PersistentResource, members: list[selectors.Member], now: dt.datetime) -> None:
    members = _provision(resource, members, now, initial=not members)
    if members is not None:
        _wait_for_agents(resource, members, now)


def _advance_rebooting(resource: PersistentResource, members: list[selectors.Member], now: dt.datetime) -> None:
    members = _provision(resource, members, now, initial=False)
    if members is not None:
        _wait_for_agents(resource, members, now, since=resource.state_time)


def _advance_updating(resource: PersistentResource, members: list[selectors.Member], now: dt.datetime) -> None:
    operation = selectors.operation_in_flight(resource=resource)
    targets = {item["id"]: item for item in (operation.request.get("pools", []) if operation else [])}
    pools = {pool.pool_id: pool for pool in resource.pools.all()}
    held = {pool_id: [m for m in members if m.pool_pk == pool.pk] for pool_id, pool in pools.items()}
    grow = [(pools[pool_id], item["target"] - len(held[pool_id])) for pool_id, item in targets.items()]
    _, shortage = _reserve(resource, grow, now, live_only=True)
    if shortage is not None:
        _set_state(resource, State.RUNNING, now)
        _operation_finish(operation, now, error={"code": CODE_RESOURCE_EXHAUSTED,
                                                 "message": f"{shortage}; the resource keeps its previous size."})
        return
    for pool_id, item in targets.items():
        pool = pools[pool_id]
        pool.replica_count = item["replicaCount"]
        pool.min_replica_count = item["minReplicaCount"]
        pool.max_replica_count = item["maxReplicaCount"]
        pool.save(update_fields=["replica_count", "min_replica_count", "max_replica_count"])
        _trim(resource, held[pool_id], item["target"], now)
    _set_state(resource, State.RUNNING, now)
    _operation_finish(operation, now)


def _trim(resource: PersistentResource, members: list[selectors.Member], target: int, now: dt.datetime, *,
          idle_before: dt.datetime | None = None) -> int:
    """Give back idle machines beyond ``target`` (those idle since before ``idle_before``), the
    longest idle first."""
    idle = sorted((m for m in members if not m.busy and (idle_before is None or m.idle_since <= idle_before)),
                  key=lambda m: m.idle_since)
    return _release(resource, idle[:max(0, len(members) - target)], now)


def _advance_running(resource: PersistentResource, members: list[selectors.Member], now: dt.datetime) -> None:
    silent = _silent(members)
    if silent:
        _set_state(resource, State.ERROR, now, error={
            "code": CODE_UNAVAILABLE, "message": f"Node(s) {', '.join(silent)} stopped responding; the resource "
                                                 "is RUNNING again once they answer, or reboot it."})
        return
    idle_before = now - dt.timedelta(seconds=settings.TRAINHUB_RESOURCE_SCALE_DOWN_AFTER_SECONDS)
    for pool in resource.pools.all():
        held = [m for m in members if m.pool_pk == pool.pk]
        if pool.autoscaling:
            _trim(resource, held, pool.floor, now, idle_before=idle_before)
        else:
            _trim(resource, held, pool.replica_count, now)


def _advance_error(resource: PersistentResource, members: list[selectors.Member], now: dt.datetime) -> None:
    """Recover by itself once every pool has its machines and every machine answers."""
    short = any(count > 0 for _, count in _missing(resource, members, initial=False))
    if members and not short and not _silent(members):
        _set_state(resource, State.RUNNING, now)


def _advance_stopping(resource: PersistentResource, members: list[selectors.Member], now: dt.datetime) -> None:
    operation = selectors.operation_in_flight(resource=resource)
    busy = [m.node.name for m in members if m.busy]
    if busy:
        _progress(operation, f"Waiting for the replicas on {len(busy)} node(s) to stop.", now)
        return
    _release(resource, members, now)
    resource.deleted_time = now
    resource.update_time = now
    resource.save(update_fields=["deleted_time", "update_time"])
    _operation_finish(operation, now)


_STEPS = {
    State.PROVISIONING: _advance_provisioning,
    State.UPDATING: _advance_updating,
    State.REBOOTING: _advance_rebooting,
    State.STOPPING: _advance_stopping,
    State.RUNNING: _advance_running,
    State.ERROR: _advance_error,
}


# Utilisation samples --------------------------------------------------------------------------


def _sample(resource: PersistentResource, now: dt.datetime) -> None:
    """One sample per pool every TRAINHUB_RESOURCE_SAMPLE_SECONDS; older than a week is dropped."""
    pools = list(resource.pools.all())
    latest = UtilisationSample.objects.filter(pool__in=pools).order_by("-time").values_list("time", flat=True).first()
    if latest is not None and (now - latest).total_seconds() < settings.TRAINHUB_RESOURCE_SAMPLE_SECONDS:
        return
    usage = selectors.pool_usage(resources=[resource], now=now)
    UtilisationSample.objects.bulk_create(
        UtilisationSample(pool=pool, time=now, provisioned=usage.get(pool.pk, selectors.NO_USAGE).provisioned,
                          used=usage.get(pool.pk, selectors.NO_USAGE).used) for pool in pools)
    UtilisationSample.objects.filter(pool__in=pools, time__lt=now - SAMPLE_RETENTION).delete()
