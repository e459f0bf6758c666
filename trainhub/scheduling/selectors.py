"""Reads of scheduler state: quota limits and usage."""

from __future__ import annotations

import datetime as dt
import logging
from collections import defaultdict
from dataclasses import dataclass

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import Count
from redis.exceptions import RedisError

from trainhub.common.compiled import CompiledQuery
from trainhub.common.redis import RedisNotConfigured, get_redis
from trainhub.iam.models import Project
from trainhub.jobs.models import CustomJob, Replica
from trainhub.resources.models import PoolNode
from trainhub.scheduling import working_memory
from trainhub.scheduling.models import Quota
from trainhub.inventory.models import NodePool
from trainhub.jobs.spec import PoolRequest
from trainhub.scheduling.placement import CapacityIndex, FreeNode, Shortfall, gang_demand
from trainhub.scheduling.quota import ON_DEMAND, QuotaBook, quota_metric

QuotaKey = tuple[int, str, str]
logger = logging.getLogger(__name__)


# Read by every FLEX_START submission: compiled once (see trainhub.common.compiled); building it with
# the ORM each time cost more CPU than the rest of the check.
_LOCATION_POOL_SIZES = CompiledQuery(
    lambda location: NodePool.objects.filter(location=location).annotate(size=Count("nodes")).order_by().values_list(
        "name", "machine_type", "accelerator_type", "accelerator_count", "size"), "\x00location")


def gang_beyond_inventory(*, location: str, pools: tuple[PoolRequest, ...]) -> tuple[Shortfall, list[str]] | None:
    """What a gang lacks even if every node of the location (idle, busy or down) were free - it
    could then never start there - and the names of the location's node pools of the missing
    kind; None if the whole inventory could hold it. One query, a row per node pool."""
    rows = _LOCATION_POOL_SIZES.rows(location)
    # No gang takes more nodes from a pool than it has replicas: the index needs no more of them.
    replicas = sum(pool.replica_count for pool in pools)
    index = CapacityIndex(FreeNode(gpus, (position, number), machine, accel, location)
                          for position, (_, machine, accel, gpus, size) in enumerate(rows)
                          for number in range(min(size, replicas)))
    shortfall = index.shortfall(gang_demand(pools))
    if shortfall is None:
        return None
    shape = shortfall.shape
    names = sorted(name for name, machine, accel, gpus, _ in rows if machine == shape.machine_type
                   and gpus >= shape.accelerator_count
                   and (not shape.accelerator_count or accel == shape.accelerator_type))
    return shortfall, names


def wait_explanations(*, job_pks: list[int]) -> dict[int, working_memory.WaitExplanation]:
    """Why each waiting job waits, as the last scheduler pass wrote it to Redis.

    Ephemeral by design: if Redis is unreachable or was just flushed, jobs show no explanation
    until the next pass recomputes it, and pages and the API keep working.
    """
    try:
        return working_memory.waits_read(get_redis(), job_pks)
    except (RedisError, RedisNotConfigured):
        logger.warning("wait explanations unavailable: Redis did not answer", exc_info=True)
        return {}


def wait_explanation(*, job_pk: int) -> working_memory.WaitExplanation:
    return wait_explanations(job_pks=[job_pk]).get(job_pk, working_memory.WaitExplanation.empty())


def flex_reservations() -> list[working_memory.Reservation]:
    """The idle nodes the last pass held for starving FLEX_START gangs, oldest hold first; ephemeral
    like the wait explanations (none shown while Redis does not answer)."""
    try:
        held = working_memory.reservations_read(get_redis())
    except (RedisError, RedisNotConfigured):
        logger.warning("reservations unavailable: Redis did not answer", exc_info=True)
        return []
    return sorted(held.values(), key=lambda reservation: (reservation.since, reservation.job_pk))


def scheduler_snapshot() -> dict:
    """The last pass's view (free nodes, queue length, quota usage) for live status pages."""
    try:
        return working_memory.snapshot_read(get_redis())
    except (RedisError, RedisNotConfigured):
        return {}


def quota_limits(*, project_ids: list[int] | None = None) -> dict[QuotaKey, int]:
    quotas = Quota.objects.all()
    if project_ids is not None:
        quotas = quotas.filter(project_id__in=project_ids)
    return {(q.project_id, q.location, q.metric): q.limit for q in quotas}


# Read by every job submission: compiled once (see trainhub.common.compiled).
_PROJECT_QUOTAS = CompiledQuery(
    lambda project_pk: Quota.objects.filter(project_id=project_pk).order_by().values_list("location", "metric", "limit"), -1)


def project_quota_limits(*, project_pk: int) -> dict[QuotaKey, int]:
    """``quota_limits`` of one project."""
    return {(project_pk, location, metric): limit for location, metric, limit in _PROJECT_QUOTAS.rows(project_pk)}


def quota_usage(*, project_ids: list[int] | None = None) -> dict[QuotaKey, int]:
    """GPUs held per quota: the requests of every job that currently holds an allocation, plus the
    GPUs of every machine a persistent resource holds, against the on-demand quota (Vertex counts a
    persistent resource against the project's training quota for as long as it holds the machines;
    the jobs running on it then consume none)."""
    # From the active replicas (at most one per node) to their jobs, never through every job ever run.
    allocated = CustomJob.objects.filter(pk__in=Replica.objects.filter(active=True).values("job_id"))
    if project_ids is not None:
        allocated = allocated.filter(project_id__in=project_ids)
    usage: dict[QuotaKey, int] = defaultdict(int)
    # Jobs asking for the same GPUs are counted together by the database: a few rows to decode.
    groups = allocated.values("project_id", "location", "quota_demand").annotate(jobs=Count("pk")).order_by()
    for group in groups:
        for metric, gpus in (group["quota_demand"] or {}).items():
            usage[(group["project_id"], group["location"], metric)] += gpus * group["jobs"]
    held = PoolNode.objects.filter(pool__accelerator_count__gt=0)
    if project_ids is not None:
        held = held.filter(pool__resource__project_id__in=project_ids)
    pools = held.values("pool__resource__project_id", "pool__resource__location", "pool__accelerator_type",
                        "pool__accelerator_count").annotate(machines=Count("pk")).order_by()
    for pool in pools:
        metric = quota_metric(pool["pool__accelerator_type"], ON_DEMAND)
        if metric:
            key = (pool["pool__resource__project_id"], pool["pool__resource__location"], metric)
            usage[key] += pool["pool__accelerator_count"] * pool["machines"]
    return dict(usage)


def quota_releases(*, project_ids: list[int], now: dt.datetime) -> dict[QuotaKey, list[tuple[dt.datetime, int]]]:
    """When the jobs holding each quota of these projects release it, and how many GPUs: at their
    start + scheduling.timeout (Vertex's maximum running time; a placed job not yet started counts
    from ``now``). Jobs asking for the same GPUs with the same timeout and start are one row."""
    allocated = CustomJob.objects.filter(pk__in=Replica.objects.filter(active=True).values("job_id"),
                                         project_id__in=project_ids)
    releases: dict[QuotaKey, list[tuple[dt.datetime, int]]] = defaultdict(list)
    groups = allocated.values("project_id", "location", "quota_demand", "start_time", "timeout_seconds").annotate(
        jobs=Count("pk")).order_by()
    for group in groups:
        end = (group["start_time"] or now) + dt.timedelta(seconds=group["timeout_seconds"])
        for metric, gpus in (group["quota_demand"] or {}).items():
            releases[(group["project_id"], group["location"], metric)].append((end, gpus * group["jobs"]))
    return dict(releases)


def quota_book(*, project_ids: list[int] | None = None) -> QuotaBook:
    return QuotaBook(limits=quota_limits(project_ids=project_ids), usage=quota_usage(project_ids=project_ids))


@dataclass(frozen=True)
class QuotaRow:
    quota: Quota
    in_use: int

    @property
    def percent(self) -> int:
        return min(100, round(100 * self.in_use / self.quota.limit)) if self.quota.limit else 100


def quota_rows_for_user(*, user: AbstractBaseUser) -> list[QuotaRow]:
    """Every quota of the user's projects (all projects for staff) with its current usage."""
    projects = Project.objects.all() if user.is_staff else Project.objects.filter(memberships__user=user)
    project_ids = list(projects.values_list("pk", flat=True))
    usage = quota_usage(project_ids=project_ids)
    quotas = Quota.objects.filter(project_id__in=project_ids).select_related("project")
    return [QuotaRow(q, usage.get((q.project_id, q.location, q.metric), 0)) for q in quotas]
