"""Job arrays in a scheduling pass: an array's pending record offers the scheduler one entry per task
that may start now, and each task that starts is split off its record (trainhub.slurm.arrays).

slurmctld tests an array's pending record like any job and, when it fits, splits one task off it
(job_mgr.c ``job_array_split``): the task takes the cluster's next job id, the record keeps the other
pending tasks, and the last task to start runs under the record's own id. The scheduler keeps going
down the same record while tasks fit, so a pass can start many tasks of one array; ``%N`` caps the
array's running tasks, and the rest wait with ``JobArrayTaskLimit``.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Mapping

from django.db import transaction
from django.db.models import Count

from trainhub.slurm import arrays, scheduler, snapshot
from trainhub.slurm.models import JobState, SlurmCluster, SlurmJob
from trainhub.slurm.services.clusters import take_job_ids


def _eligible_from_start(task: SlurmJob, now: dt.datetime) -> None:
    """A throttled array's task as it starts (array_split)."""
    if task.array_max_running:
        task.begin_time, task.accrue_time = now, None


def throttle_changes(plan: scheduler.SchedulePlan, jobs: Mapping[int, snapshot.QueuedJob],
                     ) -> tuple[list[int], list[int]]:
    """The pks of the array records the plan holds back at their ``%N`` limit (JobArrayTaskLimit), which
    lose their accrue time (fixtures/22.05/array/scontrol-1: the record's AccrueTime=Unknown once its
    tasks run; its EligibleTime=Unknown, as job_array_start_test zeroes its begin time), and of those
    it no longer holds back, which are eligible again from now (job_independent sets a zero begin time
    to now) and so accrue from now."""
    held = [job.pk for job_id, waiting in plan.waiting.items() if waiting.reason == arrays.TASK_LIMIT
            and (job := jobs[job_id]).accrue_time is not None]
    released = [job.pk for job_id, job in jobs.items()
                if job.state == JobState.PENDING and job.reason == arrays.TASK_LIMIT
                and getattr(plan.waiting.get(job_id), "reason", None) != arrays.TASK_LIMIT]
    return held, released


def running_tasks(cluster: SlurmCluster) -> dict[int, int]:
    """Array job id -> its tasks running now."""
    return dict(SlurmJob.objects.filter(cluster=cluster, state=JobState.RUNNING, array_job_id__isnull=False)
                .values_list("array_job_id").annotate(count=Count("pk")).values_list("array_job_id", "count"))


_FIRST_COPY_ID = 2**62


@dataclasses.dataclass
class ArrayEntries:
    """The scheduler's pending list with arrays spread out; ``copies`` maps each extra entry's id to
    its array record's job id. Copies' ids are above every job id, so that on equal priority the
    record comes first in the queue and the first reason an array waits for is the record's."""

    pending: list[scheduler.PendingJob]
    copies: dict[int, int]


def spread(jobs: list[snapshot.QueuedJob], entries: list[scheduler.PendingJob], running: Mapping[int, int],
           cluster_cpus: int) -> ArrayEntries:
    """One entry per pending task that may start in this pass: no more than the ``%`` limit leaves
    room for, nor than the cluster has CPUs for (each task needs one at least). An array at its limit
    waits with JobArrayTaskLimit."""
    spread_out: list[scheduler.PendingJob] = []
    copies: dict[int, int] = {}
    for job, entry in zip(jobs, entries, strict=True):
        if not job.array_pending or entry.hold_reason or entry.blocked_reason:  # none of its tasks starts now
            spread_out.append(entry)
            continue
        room = len(arrays.expand(job.array_pending))
        if job.array_max_running:
            room = min(room, job.array_max_running - running.get(job.array_job_id, 0))
        if room <= 0:
            spread_out.append(dataclasses.replace(entry, blocked_reason=entry.blocked_reason or arrays.TASK_LIMIT))
            continue
        spread_out.append(entry)
        for _ in range(min(room, cluster_cpus // max(job.num_tasks * job.cpus_per_task, 1)) - 1):
            copy_id = _FIRST_COPY_ID + len(copies)
            copies[copy_id] = job.job_id
            spread_out.append(dataclasses.replace(entry, job_id=copy_id))
    return ArrayEntries(spread_out, copies)


def fold(plan: scheduler.SchedulePlan, entries: ArrayEntries, jobs: Mapping[int, snapshot.QueuedJob],
         running: Mapping[int, int]) -> dict[int, int]:
    """The plan in terms of the array records: each record's starts counted (job id -> tasks to
    start, the copies' starts among them), and a record with tasks left waits with a copy's reason,
    or JobArrayTaskLimit once its limit is reached."""
    starts: dict[int, int] = {}
    kept = []
    for start in plan.starts:
        record = entries.copies.get(start.job_id, start.job_id)
        starts[record] = starts.get(record, 0) + 1
        kept.append(dataclasses.replace(start, job_id=record))
    plan.starts[:] = kept
    for copy_id, record in entries.copies.items():
        waiting = plan.waiting.pop(copy_id, None)
        if waiting is not None and record not in plan.waiting:
            plan.waiting[record] = waiting
    for record, started in starts.items():
        job = jobs[record]
        if not job.array_pending or record in plan.waiting or started >= len(arrays.expand(job.array_pending)):
            continue
        at_limit = job.array_max_running and running.get(job.array_job_id, 0) + started >= job.array_max_running
        plan.waiting[record] = scheduler.Waiting(arrays.TASK_LIMIT if at_limit else "Resources")
    return starts


@transaction.atomic
def array_split(*, record_pk: int, count: int, now: dt.datetime) -> list[int]:
    """Split ``count`` tasks (lowest indices first) off a pending array record; returns the pks of
    the records to start, in task order. Each task takes the cluster's next job id, but the last
    pending task runs under the record itself.

    A throttled array's (``%N``) tasks start eligible from their start and accrue no age
    (fixtures/22.05/array/scontrol-2, scontrol-3: EligibleTime=StartTime, AccrueTime=Unknown): the
    record's begin time goes to 0 whenever its limit holds it back (job_mgr.c job_array_start_test)
    and is set again as the scheduler finds it runnable (job_independent), and its accrue time is
    gone (throttle_changes)."""
    record = SlurmJob.objects.select_for_update().get(pk=record_pk)
    if record.state != JobState.PENDING or not record.array_pending:
        return [record.pk] if record.state == JobState.PENDING else []
    pending = arrays.expand(record.array_pending)
    taken, left = pending[:count], pending[count:]
    split_off = taken if left else taken[:-1]
    first_id = take_job_ids(record.cluster, len(split_off)) if split_off else 0
    tasks = []
    for offset, task_id in enumerate(split_off):
        task = SlurmJob.objects.get(pk=record.pk)
        task.pk = None
        task._state.adding = True
        task.job_id, task.array_task_id, task.array_pending = first_id + offset, task_id, ""
        _eligible_from_start(task, now)
        tasks.append(task)
    created = SlurmJob.objects.bulk_create(tasks)
    record.array_pending = arrays.compress(left)
    if not left:
        record.array_task_id = taken[-1]
        _eligible_from_start(record, now)
    record.save(update_fields=["array_pending", "array_task_id", "begin_time", "accrue_time"])
    return [task.pk for task in created] + ([] if left else [record.pk])
