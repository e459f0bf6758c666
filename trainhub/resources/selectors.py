"""Reads of persistent resources for the API, the pages, the scheduler step and the services.
Every lookup for a user also checks the project permission (404 outside the user's projects)."""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from dataclasses import dataclass

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db.models import Exists, Max, OuterRef, Prefetch, QuerySet

from trainhub.catalog.pricing import Cost, cost_of_gpu_hours
from trainhub.common.errors import ApiError, FieldViolation
from trainhub.iam.models import Project
from trainhub.iam.selectors import project_get_for_user
from trainhub.inventory.models import NodeState
from trainhub.jobs import states
from trainhub.jobs.costs import prices
from trainhub.jobs.models import CustomJob, Replica
from trainhub.jobs.selectors import NEWEST_FIRST, keyset_page
from trainhub.resources.matching import ResourcePoolView, match_worker_pools
from trainhub.resources.models import (
    BILLABLE_STATES,
    PersistentResource,
    PoolNode,
    ResourceOperation,
    ResourcePool,
    State,
    UtilisationSample,
)
from trainhub.resources.spec import PoolSpec

DEFAULT_PAGE_SIZE = 50
MAX_PAGE_SIZE = 500


def live_after(now: dt.datetime) -> dt.datetime:
    """Nodes whose agent has heart-beaten since this moment are alive."""
    return now - dt.timedelta(seconds=settings.TRAINHUB_NODE_HEARTBEAT_TTL_SECONDS)


def _with_pools(resources: QuerySet[PersistentResource]) -> QuerySet[PersistentResource]:
    return resources.select_related("project").prefetch_related(Prefetch("pools", ResourcePool.objects.order_by("position")))


def resource_find(*, project: Project, location: str, resource_id: str) -> PersistentResource | None:
    """The live (not deleted) resource with this id, its pools prefetched."""
    return _with_pools(PersistentResource.objects.filter(project=project, location=location, resource_id=resource_id,
                                                         deleted_time__isnull=True)).first()


def resource_get_for_user(*, user: AbstractBaseUser, project_id: str, location: str, resource_id: str,
                          permission: str) -> PersistentResource:
    project = project_get_for_user(user=user, project_id=project_id, permission=permission)
    resource = resource_find(project=project, location=location, resource_id=resource_id)
    if resource is None:
        raise ApiError(404, f"PersistentResource projects/{project_id}/locations/{location}/persistentResources/"
                            f"{resource_id} not found.")
    return resource


def resources_list(*, project: Project, location: str, page_size: int | None = None,
                   page_token: str = "") -> tuple[list[PersistentResource], str]:
    """Newest first, keyset-paginated on (create_time, id) like customJobs.list."""
    size = DEFAULT_PAGE_SIZE if not page_size else min(page_size, MAX_PAGE_SIZE)
    resources = PersistentResource.objects.filter(project=project, location=location, deleted_time__isnull=True)
    cursor = NEWEST_FIRST.decode(page_token) if page_token else None
    return keyset_page(_with_pools(resources), cursor=cursor, size=size)


def resources_of_projects(*, projects: list[Project]) -> list[PersistentResource]:
    return list(_with_pools(PersistentResource.objects.filter(project__in=projects, deleted_time__isnull=True))
                .order_by("project__project_id", "location", "resource_id"))


def operation_get_for_user(*, user: AbstractBaseUser, project_id: str, location: str, operation_id: str,
                           permission: str, resource_id: str | None = None) -> ResourceOperation:
    """An operation of the project; ``resource_id`` (when the path names one) must be its resource's."""
    project = project_get_for_user(user=user, project_id=project_id, permission=permission)
    operations = ResourceOperation.objects.select_related("project").filter(
        project=project, location=location, operation_id=operation_id)
    if resource_id is not None:
        operations = operations.filter(target_id=resource_id)
    operation = operations.first()
    if operation is None:
        raise ApiError(404, f"Operation {operation_id} not found in projects/{project_id}/locations/{location}.")
    return operation


def operations_of(*, resource: PersistentResource, limit: int = 10) -> list[ResourceOperation]:
    return list(resource.operations.select_related("project").order_by("-create_time", "-id")[:limit])


def operation_in_flight(*, resource: PersistentResource) -> ResourceOperation | None:
    return resource.operations.select_related("project").filter(done=False).order_by("-create_time", "-id").first()


def pool_specs(resource: PersistentResource) -> list[PoolSpec]:
    """The resource's pools in the spec module's form (prefetched pools are reused)."""
    return [PoolSpec(pool.pool_id, pool.machine_spec, pool.shape, pool.disk_spec, pool.replica_count,
                     pool.min_replica_count, pool.max_replica_count) for pool in resource.pools.all()]


def pool_views(resource: PersistentResource) -> list[ResourcePoolView]:
    return [ResourcePoolView(pool.pool_id, {"machineSpec": pool.machine_spec, "diskSpec": pool.disk_spec},
                             pool.capacity, pool.autoscaling) for pool in resource.pools.all()]


def jobs_on_resource(*, resource: PersistentResource, job_states=states.ACTIVE) -> QuerySet[CustomJob]:
    return CustomJob.objects.filter(persistent_resource_id=resource.resource_id, state__in=job_states,
                                    project_id=resource.project_id, location=resource.location)


@dataclass(frozen=True)
class Member:
    """A node a resource pool holds, as the services and the scheduler step see it."""

    membership: PoolNode
    live: bool
    busy: bool
    #: When it last stopped running a replica (or joined the pool): the autoscaler's idle clock.
    idle_since: dt.datetime

    @property
    def pool_pk(self) -> int:
        return self.membership.pool_id

    @property
    def node(self):
        return self.membership.node


def resource_members(*, resource_pks: list[int], now: dt.datetime) -> dict[int, list[Member]]:
    """Resource pk -> its nodes with liveness, occupancy and idle time; one query."""
    active = Replica.objects.filter(node=OuterRef("node"), active=True)
    rows = (PoolNode.objects.filter(pool__resource_id__in=resource_pks).select_related("node__pool", "pool")
            .annotate(busy=Exists(active), last_end=Max("node__replicas__ended_at")).order_by("pool_id", "node__name"))
    fresh = live_after(now)
    result: dict[int, list[Member]] = defaultdict(list)
    for row in rows:
        node = row.node
        live = node.state == NodeState.UP and node.last_heartbeat is not None and node.last_heartbeat >= fresh
        idle_since = max(row.added_at, row.last_end) if row.last_end else row.added_at
        result[row.pool.resource_id].append(Member(row, live, row.busy, idle_since))
    return dict(result)


@dataclass(frozen=True)
class PoolUsage:
    #: Machines the pool holds.
    provisioned: int
    #: Machines running a replica (usedReplicaCount).
    used: int
    #: Idle machines whose agent is alive: what a job can start on now.
    free: int


def pool_usage(*, resources: list[PersistentResource], now: dt.datetime) -> dict[int, PoolUsage]:
    """Pool pk -> machines provisioned, in use by jobs and free; pools without machines are absent."""
    members = resource_members(resource_pks=[r.pk for r in resources], now=now)
    usage: dict[int, list[int]] = defaultdict(lambda: [0, 0, 0])
    for member in (m for resource_members_ in members.values() for m in resource_members_):
        counts = usage[member.pool_pk]
        counts[0] += 1
        counts[1] += member.busy
        counts[2] += member.live and not member.busy
    return {pk: PoolUsage(*counts) for pk, counts in usage.items()}


NO_USAGE = PoolUsage(0, 0, 0)


def held_gpus(resource: PersistentResource, usage: dict[int, PoolUsage]) -> dict[str, int]:
    """GPUs the resource holds now, by accelerator type, from its provisioned machines."""
    gpus: dict[str, int] = defaultdict(int)
    for pool in resource.pools.all():
        provisioned = usage.get(pool.pk, NO_USAGE).provisioned
        if pool.accelerator_count and provisioned:
            gpus[pool.accelerator_type] += pool.accelerator_count * provisioned
    return dict(gpus)


def accrued_gpu_hours(resource: PersistentResource, gpus: dict[str, int], now: dt.datetime) -> dict[str, float]:
    """GPU-hours billed so far: the settled GPU-seconds plus the running stretch since."""
    seconds = defaultdict(float, resource.gpu_seconds)
    if resource.billed_until is not None and resource.state in BILLABLE_STATES and resource.deleted_time is None:
        elapsed = max(0.0, (now - resource.billed_until).total_seconds())
        for accel, count in gpus.items():
            seconds[accel] += count * elapsed
    return {accel: value / 3600 for accel, value in seconds.items()}


@dataclass(frozen=True)
class ResourceCost:
    accrued: Cost
    #: What one more hour costs at the current size (0 unless billed now).
    hourly: Cost


def resource_cost(resource: PersistentResource, usage: dict[int, PoolUsage], now: dt.datetime) -> ResourceCost:
    """Billed for every provisioned machine while RUNNING (also UPDATING, REBOOTING), used or not,
    at the on-demand GPU price plus the management fee (jobs on it are not charged)."""
    table = prices()
    gpus = held_gpus(resource, usage)
    billed_now = resource.state in BILLABLE_STATES and resource.deleted_time is None
    return ResourceCost(
        accrued=cost_of_gpu_hours(accrued_gpu_hours(resource, gpus, now), "STANDARD", table),
        hourly=cost_of_gpu_hours({accel: float(count) for accel, count in gpus.items()} if billed_now else {},
                                 "STANDARD", table),
    )


@dataclass(frozen=True)
class ProjectResourceCost:
    project_id: str
    resources: int
    gpu_hours: float
    total: float


def project_resource_costs(*, project_ids: list[int], now: dt.datetime) -> list[ProjectResourceCost]:
    """Accrued cost of every persistent resource per project, deleted ones included."""
    resources = list(_with_pools(PersistentResource.objects.filter(project_id__in=project_ids))
                     .exclude(gpu_seconds={}, billed_until__isnull=True))
    usage = pool_usage(resources=[r for r in resources if r.deleted_time is None], now=now)
    totals: dict[str, list[float]] = defaultdict(lambda: [0, 0.0, 0.0])
    for resource in resources:
        cost = resource_cost(resource, usage, now).accrued
        row = totals[resource.project.project_id]
        row[0] += 1
        row[1] += sum(cost.gpu_hours.values())
        row[2] += cost.total
    return [ProjectResourceCost(pid, int(r[0]), r[1], r[2]) for pid, r in sorted(totals.items())]


def pool_jobs(*, resource: PersistentResource) -> tuple[dict[int, list[CustomJob]], list[CustomJob]]:
    """Running jobs per pool pk (those holding a replica on its nodes) and the jobs waiting for it."""
    replicas = list(Replica.objects.filter(active=True, node__resource_membership__pool__resource=resource)
                    .values_list("node__resource_membership__pool_id", "job_id"))
    job_pks = {job_pk for _, job_pk in replicas}
    jobs = {job.pk: job for job in CustomJob.objects.filter(pk__in=job_pks).select_related("project")}
    by_pool: dict[int, dict[int, CustomJob]] = defaultdict(dict)
    for pool_pk, job_pk in replicas:
        by_pool[pool_pk][job_pk] = jobs[job_pk]
    waiting = list(jobs_on_resource(resource=resource, job_states=states.WAITING).exclude(pk__in=job_pks)
                   .select_related("project").order_by("create_time", "pk"))
    return {pool_pk: list(pool_jobs.values()) for pool_pk, pool_jobs in by_pool.items()}, waiting


def utilisation_series(*, resource: PersistentResource, since: dt.datetime) -> dict[int, list[UtilisationSample]]:
    """Pool pk -> its samples since ``since``, oldest first."""
    series: dict[int, list[UtilisationSample]] = defaultdict(list)
    for sample in UtilisationSample.objects.filter(pool__resource=resource, time__gte=since).order_by("time", "id"):
        series[sample.pool_id].append(sample)
    return dict(series)


def job_resource_check(*, project: Project, location: str, job_spec: dict) -> list[FieldViolation]:
    """Why a CustomJob cannot run on the persistent resource its jobSpec names (empty: it can).

    404 when no such resource exists in the job's project and location; 400 FAILED_PRECONDITION
    when it is being deleted or in ERROR; field violations when a worker pool does not match a
    resource pool exactly or asks for more replicas than the pool can ever hold.
    """
    resource_id = job_spec["persistentResourceId"]
    resource = resource_find(project=project, location=location, resource_id=resource_id)
    if resource is None:
        raise ApiError(404, f"PersistentResource projects/{project.project_id}/locations/{location}/"
                            f"persistentResources/{resource_id} not found; jobSpec.persistentResourceId must name a "
                            "persistent resource of the job's project and location.")
    if resource.state in (State.STOPPING, State.ERROR):
        detail = f" ({resource.error['message']})" if resource.error else ""
        raise ApiError(400, f"PersistentResource {resource.resource_name} is {resource.state}{detail}; jobs cannot "
                            "be submitted to it.", "FAILED_PRECONDITION")
    _, violations = match_worker_pools(job_spec["workerPoolSpecs"], pool_views(resource), resource.resource_name)
    return violations


def resource_with_pools(*, pk: int) -> PersistentResource:
    return _with_pools(PersistentResource.objects.filter(pk=pk)).get()


@dataclass(frozen=True)
class PoolView:
    """One pool on the pool page: its size, usage, machines and the jobs running on them."""

    pool: ResourcePool
    usage: PoolUsage
    members: list[Member]
    jobs: list[CustomJob]


def resource_page(*, resource: PersistentResource, now: dt.datetime) -> dict:
    """Everything the pool page shows of a resource, in a fixed number of queries."""
    members = resource_members(resource_pks=[resource.pk], now=now).get(resource.pk, [])
    usage = pool_usage(resources=[resource], now=now)
    running, waiting = pool_jobs(resource=resource)
    pools = [PoolView(pool, usage.get(pool.pk, NO_USAGE), [m for m in members if m.pool_pk == pool.pk],
                      running.get(pool.pk, [])) for pool in resource.pools.all()]
    return {"pools": pools, "waiting_jobs": waiting, "cost": resource_cost(resource, usage, now),
            "operations": operations_of(resource=resource)}


@dataclass(frozen=True)
class ResourceRow:
    resource: PersistentResource
    pools: list[tuple[ResourcePool, PoolUsage]]
    cost: ResourceCost


def resource_rows(*, projects: list[Project], now: dt.datetime) -> list[ResourceRow]:
    """The list page: every live resource of ``projects`` with its pools' usage and its cost."""
    resources = resources_of_projects(projects=projects)
    usage = pool_usage(resources=resources, now=now)
    return [ResourceRow(resource, [(pool, usage.get(pool.pk, NO_USAGE)) for pool in resource.pools.all()],
                        resource_cost(resource, usage, now)) for resource in resources]
