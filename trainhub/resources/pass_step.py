"""The scheduler pass's step for CustomJobs that name a persistent resource
(jobSpec.persistentResourceId). Called by scheduling.services.scheduler_pass with those jobs.

Such a job runs only on its resource's nodes, never on the shared pool, placed by the same pure
gang placement as every job (scheduling.placement.plan_pass) over the resource's nodes, each
resource pool a node kind of its own. Rules:
- No provisioning and no stockout window: a job starts in the first pass in which its whole gang
  fits. Jobs of a resource are served oldest first; one that does not fit does not block smaller
  ones behind it.
- The free replicas of a pool are its machines whose agent is alive and that run no replica; so
  concurrent jobs share a pool replica by replica. A job that fits the pool's size but not its
  free replicas waits QUEUED, saying how many it needs, how many are free and how many other jobs
  hold.
- Autoscaling: when the waiting jobs need more replicas than a pool has free, it grows toward
  maxReplicaCount with live idle inventory nodes of its machine spec (resources.services gives
  idle machines back, down to minReplicaCount).
- A job whose resource is gone or being deleted, or that no longer fits its pool after a resize,
  fails with FAILED_PRECONDITION saying why; jobs on a resource that is not RUNNING wait, saying
  its state.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from dataclasses import dataclass

from trainhub.common.wire import format_timestamp
from trainhub.jobs import services as job_services
from trainhub.jobs.models import CustomJob, Replica
from trainhub.jobs.spec import ReplicaShape
from trainhub.resources import selectors
from trainhub.resources.matching import match_worker_pools
from trainhub.resources.models import PersistentResource, ResourcePool, State
from trainhub.resources.services import resource_pool_grow
from trainhub.scheduling import working_memory
from trainhub.scheduling.estimate import estimate_waits
from trainhub.scheduling.placement import FreeNode, GangRequest, plan_pass

CODE_FAILED_PRECONDITION = 9


@dataclass(frozen=True)
class ResourcePassResult:
    placed: int
    failed: int


def _shape(pool: ResourcePool) -> ReplicaShape:
    """What plan_pass sees of a replica routed to ``pool``; the pool's machines are a node kind of
    their own (the machine type slot names the pool), so only replicas routed to it match them."""
    return ReplicaShape(f"persistentResources/{pool.resource_id}/{pool.pool_id}", pool.accelerator_type,
                        pool.accelerator_count)


@dataclass
class _Routed:
    job: CustomJob
    resource: PersistentResource
    #: (worker pool index, replica count, resource pool, its shape for plan_pass)
    pools: list[tuple[int, int, ResourcePool, ReplicaShape]]


def _resources_of(jobs: list[CustomJob]) -> dict[tuple[int, str, str], PersistentResource]:
    projects = {job.project_id for job in jobs}
    resources = (PersistentResource.objects.filter(project_id__in=projects, deleted_time__isnull=True)
                 .select_related("project").prefetch_related("pools"))
    return {(r.project_id, r.location, r.resource_id): r for r in resources}


def _route(jobs: list[CustomJob], now: dt.datetime) -> tuple[list[_Routed], list[int], dict[int, list[str]]]:
    """Jobs that may be placed now, jobs failed, and the reasons of those waiting for their resource."""
    resources = _resources_of(jobs)
    views = {resource.pk: selectors.pool_views(resource) for resource in resources.values()}
    pools_of = {resource.pk: {pool.pool_id: (pool, _shape(pool)) for pool in resource.pools.all()}
                for resource in resources.values()}
    routed: list[_Routed] = []
    failed: list[int] = []
    waiting: dict[int, list[str]] = {}
    for job in jobs:
        resource_id = job.spec["jobSpec"]["persistentResourceId"]
        resource = resources.get((job.project_id, job.location, resource_id))
        worker_pools = job.spec["jobSpec"]["workerPoolSpecs"]
        problem = None
        if resource is None or resource.state == State.STOPPING:
            problem = f"The persistent resource {resource_id} no longer exists or is being deleted."
        else:
            mapping, violations = match_worker_pools(worker_pools, views[resource.pk], resource.resource_name)
            if violations:
                problem = "The job no longer fits its persistent resource: " + "; ".join(
                    f"{v.field}: {v.description}" for v in violations)
        if problem is not None:
            job_services.job_fail(job=job, now=now, code=CODE_FAILED_PRECONDITION, message=problem)
            failed.append(job.pk)
            continue
        if resource.state != State.RUNNING:
            detail = f" ({resource.error['message']})" if resource.error else ""
            waiting[job.pk] = [f"Persistent resource {resource.resource_id} is {resource.state}{detail}; jobs "
                               "start on it once it is RUNNING."]
            continue
        pools = pools_of[resource.pk]
        routed.append(_Routed(job, resource, [(index, worker_pools[index]["replicaCount"], *pools[pool_id])
                                              for index, pool_id in sorted(mapping.items())]))
    return routed, failed, waiting


def _autoscale(routed: list[_Routed], members: dict[int, list[selectors.Member]], now: dt.datetime) -> bool:
    """Grow autoscaling pools whose waiting jobs need more than their free replicas; True if any grew."""
    demand: dict[int, int] = defaultdict(int)
    pools: dict[int, tuple[PersistentResource, ResourcePool]] = {}
    for item in routed:
        for _, count, pool, _ in item.pools:
            demand[pool.pk] += count
            pools[pool.pk] = (item.resource, pool)
    grew = False
    for pool_pk, wanted in demand.items():
        resource, pool = pools[pool_pk]
        held = [m for m in members.get(resource.pk, []) if m.pool_pk == pool_pk]
        free = sum(1 for m in held if m.live and not m.busy)
        room = (pool.max_replica_count or 0) - len(held)
        if pool.autoscaling and wanted > free and room > 0:
            grew |= resource_pool_grow(resource=resource, pool=pool, count=min(wanted - free, room), now=now) > 0
    return grew


def resource_jobs_pass(*, client, jobs: list[CustomJob], now: dt.datetime) -> ResourcePassResult:
    """Place, fail or explain every waiting job that names a persistent resource (oldest first)."""
    if not jobs:
        return ResourcePassResult(0, 0)
    routed, failed, explanations = _route(jobs, now)
    resource_pks = list({item.resource.pk for item in routed})
    members = selectors.resource_members(resource_pks=resource_pks, now=now)
    if _autoscale(routed, members, now):
        members = selectors.resource_members(resource_pks=resource_pks, now=now)
    kinds = {pool.pk: shape.machine_type for item in routed for _, _, pool, shape in item.pools}
    pools_by_kind = {shape.machine_type: pool for item in routed for _, _, pool, shape in item.pools}
    free_nodes = [FreeNode(m.node.pool.accelerator_count, m.node.pk, kinds[m.pool_pk], m.node.pool.accelerator_type)
                  for resource_members in members.values() for m in resource_members
                  if m.live and not m.busy and m.pool_pk in kinds]
    requests = [GangRequest.from_pools(item.job.pk, [(index, count, shape) for index, count, _, shape in item.pools])
                for item in routed]
    plan = plan_pass(requests, free_nodes)
    counts = {item.job.pk: {index: pool.accelerator_count for index, _, pool, _ in item.pools} for item in routed}
    placed = job_services.jobs_place(assignments={
        pk: {key: (node_id, list(range(counts[pk][key[0]]))) for key, node_id in assignment.items()}
        for pk, assignment in plan.placements.items()}, now=now)
    taken = {node_id for assignment in plan.placements.values() for node_id in assignment.values()}
    after = _pool_counts(members, taken)
    for pk, shortfalls in plan.shortfalls.items():
        explanations[pk] = [
            f"Waiting for free replicas in resource pool {pool.pool_id!r} of persistent resource "
            f"{pool.resource.resource_id}: needs {s.needed}, {free} free, {in_use} in use by other jobs."
            for s in shortfalls for pool in (pools_by_kind[s.shape.machine_type],)
            for free, in_use in (after.get(pool.pk, (0, 0)),)]
    estimates = _estimates([item for item in routed if item.job.pk not in plan.placements],
                           [node for node in free_nodes if node.node_id not in taken], pools_by_kind, now)
    working_memory.pending_remove(client, list(placed) + failed)
    working_memory.waits_write(client, {
        pk: working_memory.WaitExplanation(reasons, *estimates.get(pk, (None, None)), format_timestamp(now))
        for pk, reasons in explanations.items() if pk not in placed})
    return ResourcePassResult(placed=len(placed), failed=len(failed))


def _pool_counts(members: dict[int, list[selectors.Member]], taken: set[int]) -> dict[int, tuple[int, int]]:
    """Pool pk -> (free, in use) once this pass's placements (nodes ``taken``) are counted."""
    counts: dict[int, list[int]] = defaultdict(lambda: [0, 0])
    for member in (m for resource_members in members.values() for m in resource_members):
        in_use = member.busy or member.node.pk in taken
        counts[member.pool_pk][0] += member.live and not in_use
        counts[member.pool_pk][1] += in_use
    return {pk: (free, used) for pk, (free, used) in counts.items()}


def _estimates(waiting: list[_Routed], free_nodes: list[FreeNode], pools_by_kind: dict[str, ResourcePool],
               now: dt.datetime) -> dict[int, tuple[int, str | None]]:
    """Queue position among the jobs waiting for the same pools, and an estimated start from the
    running jobs' scheduling.timeout (an upper bound), as the serverless queue estimates them."""
    free_now: dict[tuple[str, str], int] = defaultdict(int)
    for node in free_nodes:
        free_now[(node.machine_type, "")] += 1
    kind_of_pool = {pool.pk: kind for kind, pool in pools_by_kind.items()}
    busy_until: dict[tuple[str, str], list[dt.datetime]] = defaultdict(list)
    rows = Replica.objects.filter(active=True, node__resource_membership__pool_id__in=list(kind_of_pool)).values_list(
        "node__resource_membership__pool_id", "job__start_time", "assigned_at", "job__timeout_seconds")
    for pool_pk, started, assigned, timeout in rows:
        busy_until[(kind_of_pool[pool_pk], "")].append(max(now, (started or assigned) + dt.timedelta(seconds=timeout)))
    needs = []
    for item in waiting:
        need: dict[tuple[str, str], int] = defaultdict(int)
        for _, count, _, shape in item.pools:
            need[(shape.machine_type, "")] += count
        needs.append((item.job.pk, need))
    return {pk: (estimate.position, format_timestamp(estimate.estimated_start))
            for pk, estimate in estimate_waits(needs, free_now, busy_until, now).items()}
