"""Writes of the dashboards: one set of samples a minute (beat), their rollups, and pruning."""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from dataclasses import dataclass, field

from django.conf import settings
from django.db import transaction
from django.db.models import Count, F, Max, Min, Q, Sum

from trainhub.catalog.machines import NO_ACCELERATOR
from trainhub.dashboards.models import RESOLUTIONS, CapacitySample, QueueSample, Sample
from trainhub.dashboards.selectors import active_jobs
from trainhub.dashboards.sources import capacity_readings, job_sources
from trainhub.dashboards.timeseries import WAIT_BUCKETS, minute_of, minute_start, percentile, wait_bucket_counts
from trainhub.jobs import states
from trainhub.jobs.models import CustomJob

#: Flows are counted since the previous sample, but never further back than this (a sampler
#: that was stopped for a week does not attribute a week of starts to one minute).
MAX_CATCH_UP_MINUTES = 60
#: Raw minutes are kept this long (the charts read them for ranges up to 6 hours); rollups for
#: TRAINHUB_DASHBOARD_RETENTION_DAYS.
RAW_KEEP = dt.timedelta(days=2)
_QUEUE_HIGHEST = ("oldest_wait_seconds", "wait_p90_seconds")
_QUEUE_SUMMED = ("minutes", "queued_jobs", "pending_jobs", "running_jobs", "waiting_gpus", "running_gpus",
                 "started_jobs", "started_wait_seconds", "ended_succeeded", "ended_failed", "ended_cancelled",
                 *(bucket.column for bucket in WAIT_BUCKETS))
_CAPACITY_SUMMED = ("minutes", "gpus_total", "gpus_allocated", "gpus_dedicated")
_ENDED_COLUMN = {states.SUCCEEDED: "ended_succeeded", states.FAILED: "ended_failed",
                 states.CANCELLED: "ended_cancelled"}
_LEVEL_COLUMN = {states.QUEUED: "queued_jobs", states.PENDING: "pending_jobs"}


@dataclass
class _QueueRow:
    values: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    waits: list[float] = field(default_factory=list)


def _queue_levels(rows: dict[str, _QueueRow], now: dt.datetime) -> None:
    """Jobs waiting (not placed yet) and running or starting now, per GPU type."""
    for group in active_jobs():
        row = rows[group.accelerator_type].values
        if group.waiting:
            row[_LEVEL_COLUMN[group.state]] += group.jobs
            row["waiting_gpus"] += group.gpus
            row["oldest_wait_seconds"] = max(row["oldest_wait_seconds"], int((now - group.oldest).total_seconds()))
        elif group.running:
            row["running_jobs"] += group.jobs
            row["running_gpus"] += group.gpus


def _queue_flows(rows: dict[str, _QueueRow], since: dt.datetime, until: dt.datetime) -> None:
    """Jobs that started (with their waits) and ended in [since, until), per GPU type: CustomJobs
    and the registered job sources' jobs."""
    started = CustomJob.objects.filter(start_time__gte=since, start_time__lt=until).values_list(
        "accelerator_type", "create_time", "start_time")
    for kind, created, began in started:
        rows[kind].waits.append((began - created).total_seconds())
    ended = (CustomJob.objects.filter(end_time__gte=since, end_time__lt=until).values("accelerator_type", "state")
             .annotate(jobs=Count("pk")))
    for row in ended:
        rows[row["accelerator_type"]].values[_ENDED_COLUMN[row["state"]]] += row["jobs"]
    for source in job_sources():  # Slurm's jobs
        for kind, waited in source.started(since, until):
            rows[kind].waits.append(waited)
        for kind, state, jobs in source.ended(since, until):
            rows[kind].values[_ENDED_COLUMN[state]] += jobs


def _queue_sample(minute: int, kind: str, row: _QueueRow) -> QueueSample:
    waits = row.waits
    return QueueSample(minute=minute, accelerator_type=kind, **row.values, **wait_bucket_counts(waits),
                       started_jobs=len(waits), started_wait_seconds=int(sum(waits)),
                       wait_p90_seconds=int(percentile(waits, 0.9)))


def _roll_up(model: type[Sample], resolution: int, keys: tuple[str, ...], summed: tuple[str, ...],
             highest: tuple[str, ...], before_minute: int) -> int:
    """Roll every complete block of ``resolution`` raw minutes not rolled up yet, up to the block
    holding ``before_minute`` (still filling), into one row per block and ``keys``: one query."""
    last = model.objects.filter(resolution=resolution).aggregate(last=Max("minute"))["last"]
    if last is None:
        last = model.objects.filter(resolution=1).aggregate(first=Min("minute"))["first"]
        if last is None:
            return 0
        last = last // resolution * resolution - resolution
    first, end = last + resolution, before_minute // resolution * resolution
    if first >= end:
        return 0
    blocks = (model.objects.filter(resolution=1, minute__gte=first, minute__lt=end)
              .annotate(block=F("minute") / resolution).values("block", *keys)
              .annotate(**{name: Sum(name) for name in summed}, **{name: Max(name) for name in highest})
              .order_by())
    rows = []
    for block in blocks:
        first_minute = block.pop("block") * resolution
        rows.append(model(resolution=resolution, minute=first_minute, **block))
    model.objects.bulk_create(rows, batch_size=1000, ignore_conflicts=True)
    return len(rows)


def samples_roll_up(*, now: dt.datetime) -> int:
    """Roll the complete 15-minute and hourly blocks of raw samples up; returns the rows written."""
    minute = minute_of(now)
    written = 0
    for resolution in RESOLUTIONS[1:]:
        written += _roll_up(QueueSample, resolution, ("accelerator_type",), _QUEUE_SUMMED, _QUEUE_HIGHEST, minute)
        written += _roll_up(CapacitySample, resolution, ("source", "scope", "accelerator_type"), _CAPACITY_SUMMED,
                            (), minute)
    return written


def samples_record(*, now: dt.datetime) -> int:
    """Record this minute's samples: capacity per scope, and the queue per GPU type; then roll up
    the blocks this minute completes.

    Idempotent within a minute (a second call writes nothing). Flows count the jobs that started
    or ended in the whole minutes from the previous sample's minute up to this one, so each is
    counted once, by the first sample after its minute. Returns the number of rows written.
    """
    minute = minute_of(now)
    previous = QueueSample.objects.filter(resolution=1).aggregate(last=Max("minute"))["last"]
    if previous is not None and previous >= minute:
        return 0
    since = max(previous if previous is not None else minute - 1, minute - MAX_CATCH_UP_MINUTES)
    rows: dict[str, _QueueRow] = defaultdict(_QueueRow)
    rows[NO_ACCELERATOR]  # every sampled minute has a row, even with no job at all
    _queue_levels(rows, now)
    _queue_flows(rows, since=minute_start(since), until=minute_start(minute))
    queue = [_queue_sample(minute, kind, row) for kind, row in rows.items()]
    capacity = [CapacitySample(minute=minute, source=r.source, scope=r.scope, accelerator_type=r.accelerator_type,
                               gpus_total=r.gpus_total, gpus_allocated=r.gpus_allocated,
                               gpus_dedicated=r.gpus_dedicated) for r in capacity_readings(now)]
    with transaction.atomic():
        QueueSample.objects.bulk_create(queue, ignore_conflicts=True)
        CapacitySample.objects.bulk_create(capacity, ignore_conflicts=True)
        rolled = samples_roll_up(now=now)
    return len(queue) + len(capacity) + rolled


def samples_prune(*, now: dt.datetime, keep_days: int | None = None) -> int:
    """Delete raw samples older than RAW_KEEP and rollups older than ``keep_days``
    (TRAINHUB_DASHBOARD_RETENTION_DAYS); returns how many rows went."""
    keep_days = settings.TRAINHUB_DASHBOARD_RETENTION_DAYS if keep_days is None else keep_days
    raw_cutoff = minute_of(now - RAW_KEEP)
    rollup_cutoff = minute_of(now - dt.timedelta(days=keep_days))
    deleted = 0
    for model in (QueueSample, CapacitySample):
        old = Q(resolution=1, minute__lt=raw_cutoff) | Q(resolution__gt=1, minute__lt=rollup_cutoff)
        deleted += model.objects.filter(old).delete()[0]
    return deleted
