"""Reads of the dashboards. Time series come back bucketed by the database (a handful of rows per
bucket whatever the range); everything else is a fixed number of queries."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from django.db.models import Count, Exists, F, Max, Min, OuterRef, Q, QuerySet, Sum

from trainhub.dashboards.models import CapacitySample, QueueSample
from trainhub.dashboards.sources import ActiveGroup, job_sources
from trainhub.dashboards.timeseries import WAIT_BUCKETS, TimeRange, minute_of, minute_start
from trainhub.iam.models import Project
from trainhub.inventory.models import Node
from trainhub.jobs import states
from trainhub.jobs.models import ACTIVE_JOBS, CustomJob, Replica
from trainhub.scheduling.selectors import wait_explanations
from trainhub.scheduling.working_memory import WaitExplanation


def _bucketed(samples: QuerySet, time_range: TimeRange, now: dt.datetime) -> QuerySet:
    """The range's samples at its resolution, annotated with their bucket (minute // bucket size,
    computed by the database). The block still filling is not rolled up yet: its raw minutes
    stand in for it, so the newest samples show at every range (a new cluster is not blank for
    its first hour)."""
    last = minute_of(now)
    filling = last // time_range.resolution * time_range.resolution
    return (samples.filter(Q(resolution=time_range.resolution) | Q(resolution=1, minute__gte=filling),
                           minute__gte=time_range.first_minute(last), minute__lte=last)
            .annotate(bucket=F("minute") / time_range.bucket_minutes))


def _bucket_time(bucket: int, time_range: TimeRange) -> dt.datetime:
    return minute_start(bucket * time_range.bucket_minutes)


@dataclass(frozen=True)
class CapacityPoint:
    time: dt.datetime
    source: str
    scope: str
    accelerator_type: str
    gpus_total: float
    gpus_allocated: float
    gpus_dedicated: float


def capacity_series(*, time_range: TimeRange, now: dt.datetime) -> list[CapacityPoint]:
    """GPUs per scope, averaged over the minutes sampled in each bucket, oldest first: one query."""
    rows = (_bucketed(CapacitySample.objects.all(), time_range, now)
            .values("bucket", "source", "scope", "accelerator_type")
            .annotate(minutes=Sum("minutes"), total=Sum("gpus_total"), allocated=Sum("gpus_allocated"),
                      dedicated=Sum("gpus_dedicated"))
            .order_by("bucket", "accelerator_type", "source", "scope"))
    return [CapacityPoint(_bucket_time(row["bucket"], time_range), row["source"], row["scope"],
                          row["accelerator_type"], row["total"] / row["minutes"], row["allocated"] / row["minutes"],
                          row["dedicated"] / row["minutes"]) for row in rows]


_QUEUE_LEVELS = ("queued_jobs", "pending_jobs", "running_jobs", "waiting_gpus", "running_gpus")
_QUEUE_FLOWS = ("started_jobs", "started_wait_seconds", "ended_succeeded", "ended_failed", "ended_cancelled",
                *(bucket.column for bucket in WAIT_BUCKETS))


@dataclass(frozen=True)
class QueuePoint:
    """One bucket of one GPU type: levels averaged over the bucket's sampled minutes, flows summed,
    and the worst minute's p90 wait and oldest waiting job."""

    time: dt.datetime
    accelerator_type: str
    levels: dict[str, float]
    flows: dict[str, int]
    worst_p90_seconds: int
    oldest_wait_seconds: int


def queue_series(*, time_range: TimeRange, now: dt.datetime) -> list[QueuePoint]:
    """The queue per GPU type and bucket, oldest first: one query."""
    sums = {name: Sum(name) for name in ("minutes", *_QUEUE_LEVELS, *_QUEUE_FLOWS)}
    rows = list(_bucketed(QueueSample.objects.all(), time_range, now).values("bucket", "accelerator_type")
                .annotate(**sums, worst_p90=Max("wait_p90_seconds"), oldest=Max("oldest_wait_seconds"))
                .order_by("bucket", "accelerator_type"))
    # Every sampled minute has a CPU-only row, so the most minutes of any type is the bucket's.
    minutes: dict[int, int] = {}
    for row in rows:
        minutes[row["bucket"]] = max(minutes.get(row["bucket"], 0), row["minutes"])
    return [QueuePoint(_bucket_time(row["bucket"], time_range), row["accelerator_type"],
                       {name: row[name] / minutes[row["bucket"]] for name in _QUEUE_LEVELS},
                       {name: row[name] for name in _QUEUE_FLOWS}, row["worst_p90"], row["oldest"])
            for row in rows]


def active_jobs() -> list[ActiveGroup]:
    """Every active job of the cluster, grouped: one query over the active CustomJobs' index, and
    the registered job sources' groups (Slurm's pending and running jobs)."""
    allocated = Exists(Replica.objects.filter(job=OuterRef("pk"), active=True))
    rows = (CustomJob.objects.filter(ACTIVE_JOBS).annotate(allocated=allocated)
            .values("state", "accelerator_type", "allocated")
            .annotate(jobs=Count("pk"), gpus=Sum("gpu_count"), oldest=Min("create_time")).order_by())
    groups = [ActiveGroup(row["state"], row["accelerator_type"], bool(row["allocated"]), row["jobs"], row["gpus"] or 0,
                          row["oldest"]) for row in rows]
    return groups + [group for source in job_sources() for group in source.active()]


def node_states() -> dict[str, int]:
    """Nodes per state (UP, DOWN, DRAIN): one query."""
    return dict(Node.objects.values("state").annotate(nodes=Count("pk")).values_list("state", "nodes"))


@dataclass(frozen=True)
class WaitingJob:
    job: CustomJob
    explanation: WaitExplanation

    def waited_seconds(self, now: dt.datetime) -> float:
        return (now - self.job.create_time).total_seconds()


def waiting_jobs_explained(*, projects: list[Project], limit: int) -> list[WaitingJob]:
    """The ``limit`` longest-waiting jobs of ``projects`` (not yet placed), queue order, with the
    last pass's explanation of each: one query and one Redis read."""
    allocated = Exists(Replica.objects.filter(job=OuterRef("pk"), active=True))
    jobs = list(CustomJob.objects.filter(ACTIVE_JOBS, ~allocated, project__in=projects, state__in=states.WAITING)
                .select_related("project").order_by("create_time", "id")
                .only("pk", "job_id", "display_name", "location", "state", "strategy", "accelerator_type",
                      "gpu_count", "create_time", "max_wait_seconds", "project__project_id")[:limit])
    explanations = wait_explanations(job_pks=[job.pk for job in jobs])
    return [WaitingJob(job, explanations.get(job.pk, WaitExplanation.empty())) for job in jobs]


def recent_wait_summary(*, now: dt.datetime, minutes: int = 60) -> tuple[int, float]:
    """(jobs started, mean seconds they waited) over the last ``minutes`` of samples."""
    totals = QueueSample.objects.filter(resolution=1, minute__gt=minute_of(now) - minutes).aggregate(
        started=Sum("started_jobs"), waited=Sum("started_wait_seconds"))
    started = totals["started"] or 0
    return started, (totals["waited"] or 0) / started if started else 0.0
