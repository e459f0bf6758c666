"""A Slurm job's life after allocation: prolog on every node, the batch script on the batch host,
the epilog on every node; requeue, cancellation and time limits end it as slurmctld does.

The agent reports through ``job_node_prolog_finished``, ``job_batch_finished`` and
``job_node_epilog_finished``; a report about an older run of a requeued job (``run_index`` below
the job's restart count) only moves that node on to its epilog.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass

from django.db import IntegrityError, transaction

from trainhub.common.compiled import CompiledInsert
from trainhub.inventory.models import Node, NodeState
from trainhub.inventory.services import node_set_state
from trainhub.inventory.wake import nodes_wake
from trainhub.slurm.conf import SlurmConfig
from trainhub.slurm.models import (
    GpuAllocation,
    Hold,
    JobEvent,
    JobLogLine,
    JobNode,
    JobRun,
    JobState,
    NodePhase,
    SlurmCluster,
    SlurmJob,
)
from trainhub.slurm.hostlist import compress
from trainhub.slurm.services.clusters import request_pass
from trainhub.slurm.services.mail import mail_job_ended, mail_job_requeued, mail_job_started
from trainhub.slurm.services.steps import SIGTERM, steps_cancel
from trainhub.slurm.services.usage import run_ended_charge
from trainhub.slurm.steps import TIME_LIMIT

#: batch_requeue_fini: begin_time = now + requeue_delay (cred_expire, 120 s) + 1.
REQUEUE_DELAY = dt.timedelta(seconds=121)
PROLOG_ERROR = "Prolog error"
EPILOG_ERROR = "Epilog error"
#: How long an salloc may stay silent when InactiveLimit is 0 (trainhub's salloc calls every 10 s).
KEEPALIVE_TIMEOUT_SECONDS = 60
#: slurmctld's reason for an allocation whose salloc stopped answering (FAIL_INACTIVE_LIMIT).
INACTIVE_LIMIT = "InactiveLimit"
#: slurmctld's reason for a job ended at its time limit (FAIL_TIMEOUT; scontrol show job's
#: ``Reason=TimeLimit``: fixtures/22.05/srun-timeout/scontrol-*.txt).
TIME_LIMIT_REASON = "TimeLimit"


#: The event's INSERT, built once per process: every sbatch writes one (common.compiled).
EVENT_INSERT = CompiledInsert(JobEvent)


def job_event(job: SlurmJob, now: dt.datetime, message: str) -> None:
    EVENT_INSERT.save(JobEvent(job=job, time=now, message=message))


def _locked_job(job_pk: int) -> SlurmJob:
    return SlurmJob.objects.select_for_update().select_related("cluster").get(pk=job_pk)


def _current_nodes(job: SlurmJob):
    return JobNode.objects.filter(job=job, run_index=job.restart_count)


def _close_run(job: SlurmJob, state: str, now: dt.datetime, *, exit_code: int | None, signal: int,
               desc: str = "") -> None:
    run = JobRun.objects.select_for_update().filter(job=job, index=job.restart_count).first()
    if run is None or run.end_time is not None:
        return
    steps_cancel(job=job, run_index=run.index, now=now)
    if run.batch_state == JobState.RUNNING:  # the batch script is killed under it
        run.batch_state, run.batch_exit_code, run.batch_exit_signal = JobState.CANCELLED, 0, SIGTERM
    run.state = state
    run.end_time = now
    run.exit_code = exit_code
    run.exit_signal = signal
    run.state_desc = desc
    run.save(update_fields=["state", "end_time", "exit_code", "exit_signal", "state_desc", "batch_state",
                            "batch_exit_code", "batch_exit_signal"])
    run_ended_charge(job=job, run=run)


def _leave_nodes(job: SlurmJob) -> None:
    """Free the job's GPUs and send every node of its current run to the epilog; a batch script
    still running is stopped first (the agent moves its node on when it has exited)."""
    GpuAllocation.objects.filter(job=job, active=True).update(active=False)
    nodes = _current_nodes(job).exclude(phase__in=[NodePhase.EPILOG, NodePhase.DONE])
    nodes_wake(nodes.values_list("node_id", flat=True))
    nodes.filter(phase=NodePhase.RUNNING, batch_host=True).update(stop_requested=True, kill_at=None)
    nodes.exclude(phase=NodePhase.RUNNING, batch_host=True).update(phase=NodePhase.EPILOG, kill_at=None)


#: The reason slurmctld gives a job whose script or command exited non-zero (FAIL_EXIT_CODE).
NON_ZERO_EXIT_CODE = "NonZeroExitCode"


def _end(job: SlurmJob, state: str, now: dt.datetime, *, exit_code: int | None, signal: int = 0,
         desc: str = "", reason: str = "None") -> None:
    if state == JobState.TIMEOUT and desc == TIME_LIMIT:
        reason = TIME_LIMIT_REASON
    elif state == JobState.FAILED and reason == "None":
        # job_mgr.c job_complete: a non-zero exit is FAIL_EXIT_CODE (fixtures/22.05/finished-jobs/scontrol-2:
        # exit 3), a death by a signal FAIL_LAUNCH (a batch script or salloc's command killed by signal 9:
        # Reason=JobLaunchFailure ExitCode=0:9 on 22.05.8)
        reason = JOB_LAUNCH_FAILURE if signal else NON_ZERO_EXIT_CODE
    _close_run(job, state, now, exit_code=exit_code, signal=signal, desc=desc)
    _leave_nodes(job)
    job.state = state
    job.end_time = now
    job.exit_code = exit_code
    job.exit_signal = signal
    job.ending_state = ""
    job.state_desc = desc
    job.reason = reason
    job.expected_start = None
    job.save(update_fields=["state", "end_time", "exit_code", "exit_signal", "ending_state", "state_desc",
                            "reason", "expected_start"])
    job_event(job, now, f"Job ended {state}" + (f" ({desc})" if desc else "") +
              (f", exit code {exit_code}:{signal}" if exit_code is not None else "") + ".")
    mail_job_ended(job=job, now=now)
    request_pass(job.cluster)  # its GPUs are free: the queue may move now rather than at the next beat


@transaction.atomic
def job_requeue(*, job: SlurmJob, now: dt.datetime, record_state: str, desc: str, hold: str = Hold.NONE) -> None:
    """Requeue a RUNNING job (preemption, prolog failure, node failure, scontrol requeue) at ``now``.

    As batch_requeue_fini: the run's record closes as ``record_state`` (PREEMPTED, REQUEUED,
    NODE_FAIL); the job returns to PENDING with the same id, restart count + 1, a new submit time,
    begin time ~121 s ahead (reason BeginTime) and no accrued age. It keeps its priority until the
    next PriorityCalcPeriod recalculation, as squeue shows on real Slurm; a requeue-and-hold sets it to 0.
    """
    mail_job_requeued(job=job, now=now)
    _close_run(job, record_state, now, exit_code=0, signal=0, desc=desc)
    _leave_nodes(job)
    job.state = JobState.PENDING
    job.restart_count += 1
    job.submit_time = now
    job.begin_time = now + REQUEUE_DELAY
    job.accrue_time = None
    job.start_time = None
    job.end_time = None
    job.node_list = ""
    job.ending_state = ""
    job.hold = hold
    job.state_desc = desc
    job.reason = {Hold.USER: "JobHeldUser", Hold.ADMIN: "JobHeldAdmin"}.get(hold, "BeginTime")
    if job.tasks_from_nodes:
        # a node range without -n asks again for a task on each of MIN nodes, as at submission: its run's
        # count (a task a node it got) would make it wait for that many CPUs on the nodes it gets next
        job.num_tasks = job.min_nodes
    if hold:
        job.priority = 0
        job.priority_time = job.sched_eval_time = None
    job.save()
    job_event(job, now, f"Requeued ({record_state}: {desc}); restart count {job.restart_count}.")
    request_pass(job.cluster)


def _running_batch(job: SlurmJob) -> JobNode | None:
    """The node of the job's current run whose batch script runs (None: still in its prolog, or salloc's)."""
    return _current_nodes(job).filter(batch_host=True, phase=NodePhase.RUNNING).first()


@transaction.atomic
def job_preempt(*, job: SlurmJob, requeue: bool, now: dt.datetime, desc: str, kill_at: dt.datetime) -> None:
    """A RUNNING job chosen by a preemption now (its PreemptTime), whose GraceTime ends at ``kill_at``.

    As 22.05 (fixtures/22.05/mail: REQUEUE-squeue.txt, *-scontrol-*.txt, trap-*.txt): it stays
    RUNNING, its end time ``kill_at`` if that comes before its time limit (preempt-grace: squeue's
    END_TIME, scontrol's EndTime), its step tasks get SIGTERM at once and its batch script is killed
    at ``kill_at`` (job_stop); then slurmctld requeues it (``requeue``) or ends it PREEMPTED when it
    next finds its GraceTime over (``preempted_jobs_end``), even if its batch script has ended since
    (job_batch_finished). A REQUEUE victim without GraceTime, or whose batch script does not run yet,
    is requeued at once.
    """
    job.preempt_time = now
    job.preempt_kill_time = kill_at
    job.save(update_fields=["preempt_time", "preempt_kill_time"])
    if requeue and (kill_at <= now or _running_batch(job) is None):
        job_requeue(job=job, now=now, record_state=JobState.PREEMPTED, desc=desc)
    else:
        job_stop(job=job, ending_state=JobState.REQUEUED if requeue else JobState.PREEMPTED, now=now, desc=desc,
                 kill_at=kill_at)


def _grace_over(job: SlurmJob, now: dt.datetime) -> bool:
    """Whether the job is a preemption victim stopped for it whose GraceTime is over at ``now``."""
    return (job.state == JobState.RUNNING and job.ending_state in (JobState.REQUEUED, JobState.PREEMPTED)
            and job.preempt_kill_time is not None and job.preempt_kill_time <= now)


def preempted_jobs_end(*, cluster: SlurmCluster, now: dt.datetime) -> int:
    """Requeue, or end PREEMPTED, now, the victims whose GraceTime is over: what slurmctld does when
    its periodic check (``job_time_limit``) or a backfill iteration trying the victim's preemptor
    finds it over (preempt.c ``_job_check_grace_internal``: PreemptTime set to then; CANCEL's job
    signalled SIGKILL and ended PREEMPTED, ExitCode 0:15, REQUEUE's requeued; fixtures/22.05/
    preempt-grace, slurmctld-extract.txt: "preempted JobId=1 has been requeued/killed to reclaim
    resources" at the first 30-s tick after the GraceTime; preempt-requeue: GraceTime over at 18:03:20,
    requeued at 18:03:36). The caller runs it when that check is due (preemption.grace_check_due).
    How many were requeued or ended."""
    due = SlurmJob.objects.filter(cluster=cluster, state=JobState.RUNNING, preempt_kill_time__lte=now,
                                  ending_state__in=[JobState.REQUEUED, JobState.PREEMPTED])
    count = 0
    for job_pk in sorted(due.values_list("pk", flat=True)):
        with transaction.atomic():
            job = _locked_job(job_pk)
            if not _grace_over(job, now):
                continue
            job.preempt_time = now
            job.save(update_fields=["preempt_time"])
            if job.ending_state == JobState.REQUEUED:
                job_requeue(job=job, now=now, record_state=JobState.PREEMPTED, desc=job.state_desc)
            else:
                _end(job, JobState.PREEMPTED, now, exit_code=0, signal=SIGTERM, desc=job.state_desc)
            count += 1
    return count


@transaction.atomic
def job_stop(*, job: SlurmJob, ending_state: str, now: dt.datetime, desc: str = "",
             kill_at: dt.datetime | None = None) -> None:
    """End a RUNNING job in ``ending_state`` (CANCELLED, TIMEOUT, PREEMPTED).

    A batch script that runs is signalled first and the job ends when it has exited; a job still
    in its prolog ends at once. ``kill_at`` (a preemption's GraceTime, KillWait after a time limit):
    the step tasks of every node get SIGTERM at once, the batch script nothing until then.
    """
    batch = _running_batch(job)
    if batch is None:
        _end(job, ending_state, now, exit_code=0, signal=15 if ending_state != JobState.TIMEOUT else 0, desc=desc)
        return
    stopped = _current_nodes(job).filter(phase=NodePhase.RUNNING) if kill_at else JobNode.objects.filter(pk=batch.pk)
    nodes_wake(stopped.values_list("node_id", flat=True))
    stopped.update(stop_requested=True, kill_at=kill_at)
    job.ending_state = ending_state
    job.state_desc = desc
    job.save(update_fields=["ending_state", "state_desc"])
    job_event(job, now, f"Stopping the batch script: {ending_state.lower()}" + (f" ({desc})" if desc else "") + ".")


@transaction.atomic
def job_allocation_ended(*, job: SlurmJob, exit_code: int, signal: int, now: dt.datetime,
                         cancelled_by: str = "") -> None:
    """salloc's command exited and salloc relinquished the RUNNING allocation: it ends as a batch
    script's job would, COMPLETED on 0:0, FAILED otherwise, with the command's exit code;
    ``cancelled_by``: CANCELLED by that user, 0:0, whatever the exit code (srun's job completed with
    NO_VAL after two Ctrl-C)."""
    if cancelled_by:
        _end(job, JobState.CANCELLED, now, exit_code=0, signal=0, desc=f"by {cancelled_by}")
        return
    state = JobState.COMPLETED if exit_code == 0 and signal == 0 else JobState.FAILED
    _end(job, state, now, exit_code=exit_code, signal=signal)


def job_launch_failed(*, job: SlurmJob, now: dt.datetime) -> None:
    """srun's own allocation whose step was refused: srun completes it with 1 (srun_job.c's
    create_srun_job: ``slurm_complete_job(job_id, 1)``), which slurmctld's job_complete reads as a
    wait status killed by signal 1: FAILED, Reason JobLaunchFailure, scontrol's ExitCode 0:1; slurmdbd
    stores a 1 as exit code 1 ("set by Slurm so don't treat it like a signal", as_mysql_job.c): sacct's
    1:0 (fixtures/22.05/hostfile-edge: scontrol-1.txt, sacct.txt)."""
    _end(job, JobState.FAILED, now, exit_code=0, signal=1, reason=JOB_LAUNCH_FAILURE)
    JobRun.objects.filter(job=job, index=job.restart_count).update(exit_code=1, exit_signal=0)


@transaction.atomic
def job_allocation_abandoned(*, job: SlurmJob, now: dt.datetime, reason: str) -> None:
    """The allocation's salloc went silent: a running one ends TIMEOUT with ``reason``
    (slurmctld's job_time_limit at InactiveLimit), a pending one is cancelled."""
    if job.state == JobState.PENDING:
        job.state, job.end_time, job.state_desc, job.expected_start = JobState.CANCELLED, now, reason, None
        job.reason = reason
        job.save(update_fields=["state", "end_time", "state_desc", "expected_start", "reason"])
        job_event(job, now, f"Cancelled while pending: its salloc went silent ({reason}).")
        mail_job_ended(job=job, now=now)
        return
    _end(job, JobState.TIMEOUT, now, exit_code=0, desc=reason)
    SlurmJob.objects.filter(pk=job.pk).update(reason=reason)


def allocations_abandoned(*, cluster: SlurmCluster, config: SlurmConfig, now: dt.datetime) -> int:
    """End the allocations whose salloc has not called for InactiveLimit seconds
    (KEEPALIVE_TIMEOUT_SECONDS when it is 0; services.allocations); how many ended."""
    silent = now - dt.timedelta(seconds=config.inactive_limit or KEEPALIVE_TIMEOUT_SECONDS)
    count = 0
    for pk in SlurmJob.objects.filter(cluster=cluster, interactive=True, state__in=[JobState.PENDING, JobState.RUNNING],
                                      ending_state="", salloc_seen__lt=silent).values_list("pk", flat=True):
        with transaction.atomic():
            job = SlurmJob.objects.select_for_update().select_related("cluster").get(pk=pk)
            if job.salloc_seen >= silent or job.ending_state or not job.is_active:
                continue
            job_allocation_abandoned(job=job, now=now, reason=INACTIVE_LIMIT)
            count += 1
    return count


@transaction.atomic
def job_node_prolog_finished(*, job_node: JobNode, exit_code: int, now: dt.datetime) -> None:
    """A node finished the cluster's prolog scripts (0: all succeeded).

    Failure drains the node ("Prolog error") and requeues the job held ("launch failed requeued
    held", JobHeldUser), as slurmctld does; a job that may not be requeued ends NODE_FAIL.
    Success on the last node starts the batch script.
    """
    job = _locked_job(job_node.job_id)
    node = JobNode.objects.select_for_update().select_related("node").get(pk=job_node.pk)
    if node.phase != NodePhase.PROLOG:
        return
    node.prolog_exit = exit_code
    current = node.run_index == job.restart_count and job.state == JobState.RUNNING
    if exit_code != 0:
        node.phase = NodePhase.EPILOG
        node.save(update_fields=["phase", "prolog_exit"])
        node_set_state(node=node.node, state=NodeState.DRAIN, reason=PROLOG_ERROR)
        if current:
            job_event(job, now, f"Prolog failed on {node.node.name} (exit {exit_code}); node drained.")
            if job.requeue:
                job_requeue(job=job, now=now, record_state=JobState.REQUEUED, hold=Hold.USER,
                            desc="launch failed requeued held")
            else:
                _end(job, JobState.NODE_FAIL, now, exit_code=None, desc=PROLOG_ERROR)
        return
    node.phase = NodePhase.READY
    node.save(update_fields=["phase", "prolog_exit"])
    if current and not _current_nodes(job).exclude(phase=NodePhase.READY).exists():
        nodes_wake(_current_nodes(job).values_list("node_id", flat=True))
        _current_nodes(job).update(phase=NodePhase.RUNNING)
        if job.interactive:  # salloc runs the command: its nodes are ready for srun's steps
            job_event(job, now, "Prolog done on every node; the allocation is ready.")
        else:
            JobRun.objects.filter(job=job, index=job.restart_count).update(batch_state=JobState.RUNNING)
            job_event(job, now, "Prolog done on every node; batch script launched.")


#: What slurmctld records for a batch script that never started (its output file could not be
#: opened): ExitCode 0:53 and Reason JobLaunchFailure (fixtures/22.05/output_dir).
LAUNCH_FAILURE_SIGNAL = 53
JOB_LAUNCH_FAILURE = "JobLaunchFailure"


def job_batch_launch_failed(*, job_node: JobNode, now: dt.datetime) -> None:
    """The batch script could not be started on its node: the job FAILED, as slurmctld records it."""
    job_batch_finished(job_node=job_node, exit_code=0, signal=LAUNCH_FAILURE_SIGNAL, max_rss_kb=None, now=now,
                       reason=JOB_LAUNCH_FAILURE)


@transaction.atomic
def job_batch_finished(*, job_node: JobNode, exit_code: int, signal: int, max_rss_kb: int | None,
                       now: dt.datetime, reason: str = "None") -> None:
    """The batch script exited (``signal`` > 0: killed by it). COMPLETED on 0:0, FAILED otherwise,
    or the state the job was being stopped for."""
    job = _locked_job(job_node.job_id)
    node = JobNode.objects.select_for_update().get(pk=job_node.pk)
    if node.phase == NodePhase.DONE:
        return
    node.max_rss_kb = max_rss_kb
    node.phase = NodePhase.EPILOG
    node.save(update_fields=["max_rss_kb", "phase"])
    if max_rss_kb is not None:
        JobRun.objects.filter(job=job, index=node.run_index).update(max_rss_kb=max_rss_kb)
    if node.run_index != job.restart_count or job.state != JobState.RUNNING:
        return
    # Its own record (JOBID.batch): killed for a cancel, time limit or preemption, it is CANCELLED.
    JobRun.objects.filter(job=job, index=node.run_index, batch_state=JobState.RUNNING).update(
        batch_state=(JobState.COMPLETED if exit_code == signal == 0 else
                     JobState.CANCELLED if job.ending_state else JobState.FAILED),
        batch_exit_code=exit_code, batch_exit_signal=signal)
    if _grace_over(job, now):  # killed at its GraceTime's end: it ends when slurmctld next checks
        return
    if job.ending_state == JobState.REQUEUED:  # a preemption's victim (job_preempt)
        job_requeue(job=job, now=now, record_state=JobState.PREEMPTED, desc=job.state_desc)
        return
    state = job.ending_state or (JobState.COMPLETED if exit_code == 0 and signal == 0 else JobState.FAILED)
    _end(job, state, now, exit_code=exit_code, signal=signal, desc=job.state_desc if job.ending_state else "",
         reason=reason)


@transaction.atomic
def job_node_epilog_finished(*, job_node: JobNode, exit_code: int, now: dt.datetime) -> None:
    """The epilog ran on a node: the node is free of the job; a failure drains it ("Epilog error")."""
    node = JobNode.objects.select_for_update().select_related("node", "job").get(pk=job_node.pk)
    if node.phase != NodePhase.EPILOG:
        return
    node.phase = NodePhase.DONE
    node.epilog_exit = exit_code
    node.save(update_fields=["phase", "epilog_exit"])
    if exit_code != 0:
        node_set_state(node=node.node, state=NodeState.DRAIN, reason=EPILOG_ERROR)
        job_event(node.job, now, f"Epilog failed on {node.node.name} (exit {exit_code}); node drained.")


@transaction.atomic
def job_node_lost(*, job_node: JobNode, now: dt.datetime, reason: str) -> None:
    """The agent lost the job's process on a node (it restarted): the run fails as NODE_FAIL and a
    requeue-able job is requeued, as after a node failure."""
    job = _locked_job(job_node.job_id)
    node = JobNode.objects.select_for_update().get(pk=job_node.pk)
    if node.phase in (NodePhase.EPILOG, NodePhase.DONE):
        return
    node.phase = NodePhase.EPILOG
    node.save(update_fields=["phase"])
    if node.run_index != job.restart_count or job.state != JobState.RUNNING:
        return
    if job.requeue:
        job_requeue(job=job, now=now, record_state=JobState.NODE_FAIL, desc=reason)
    else:
        _end(job, JobState.NODE_FAIL, now, exit_code=None, desc=reason)


def job_log_append(*, job_node: JobNode, stream: str, lines: Iterable[tuple[dt.datetime, str]]) -> int:
    rows = [JobLogLine(job_id=job_node.job_id, run_index=job_node.run_index, node_name=job_node.node.name,
                       stream=stream, time=time, text=text[:65536]) for time, text in lines]
    if rows:
        JobLogLine.objects.bulk_create(rows)
    return len(rows)


@dataclass(frozen=True)
class NodeGrant:
    node_id: int
    gpu_indices: tuple[int, ...]
    cpus: int


@dataclass(frozen=True)
class JobStart:
    """An allocation the scheduler decided: the nodes (batch host first) and the run's billing."""

    job_pk: int
    grants: tuple[NodeGrant, ...]
    billing: float
    #: A time limit for a job without one (backfill's; scheduler.Start.time_limit_minutes).
    time_limit: int | None = None
    #: Started by a backfill iteration (scheduler.Start.backfilled).
    backfilled: bool = False


def jobs_start(*, starts: list[JobStart], now: dt.datetime) -> set[int]:
    """Write allocations and start the jobs (RUNNING; the agents then run the prologs).

    Everything is written in one transaction; if a GPU was taken meanwhile (the partial unique
    index on live GPU allocations refuses it) each job is retried alone, so a conflict costs only
    that job. A job that stopped pending meanwhile is skipped. Returns the pks started.
    """
    if not starts:
        return set()
    try:
        with transaction.atomic():
            return _start_all(starts, now)
    except IntegrityError:
        if len(starts) == 1:
            return set()
        started: set[int] = set()
        for start in starts:
            started |= jobs_start(starts=[start], now=now)
        return started


def _start_all(starts: list[JobStart], now: dt.datetime) -> set[int]:
    # slurmctld's start_time is time(NULL), whole seconds: jobs started within one second start together
    # (squeue orders them by job id: fixtures/22.05/ntasks/squeue.txt, jobs 1-3 started by the main
    # scheduler and then backfill in 05:10:48)
    started_at = now.replace(microsecond=0)
    by_pk = {start.job_pk: start for start in starts}
    jobs = list(SlurmJob.objects.select_for_update().filter(pk__in=list(by_pk), state=JobState.PENDING)
                .exclude(gpu_allocations__active=True))
    names = dict(Node.objects.filter(pk__in={g.node_id for s in starts for g in s.grants})
                 .values_list("pk", "name"))
    runs, job_nodes, gpus = [], [], []
    for job in jobs:
        start = by_pk[job.pk]
        job.node_list = compress(names[grant.node_id] for grant in start.grants)
        job.state = JobState.RUNNING
        job.start_time = started_at
        job.preempt_time = job.preempt_kill_time = None  # a new run, no victim yet
        job.started_by_backfill = start.backfilled
        job.reason = "None"
        job.expected_start = None
        # a constraint's counts got it more nodes than it asked for (-C a100*2), a node range as many as
        # were free (fewer than it was tried with: min_nodes keeps its MIN): one task each at least
        job.num_nodes = len(start.grants) if job.min_nodes else max(job.num_nodes, len(start.grants))
        job.num_tasks = max(job.num_tasks, job.num_nodes)
        if job.time_limit is None:
            job.time_limit = start.time_limit
        runs.append(JobRun(job=job, index=job.restart_count, submit_time=job.submit_time, start_time=started_at,
                           node_list=job.node_list, num_nodes=len(start.grants),
                           alloc_cpus=sum(g.cpus for g in start.grants),
                           alloc_gpus=sum(len(g.gpu_indices) for g in start.grants), billing=start.billing))
        for position, grant in enumerate(start.grants):
            job_nodes.append(JobNode(job=job, run_index=job.restart_count, node_id=grant.node_id,
                                     gpu_indices=list(grant.gpu_indices), cpus=grant.cpus,
                                     batch_host=position == 0 and not job.interactive))
            gpus += [GpuAllocation(job=job, node_id=grant.node_id, gpu_index=index) for index in grant.gpu_indices]
    JobRun.objects.bulk_create(runs, batch_size=1000)
    JobNode.objects.bulk_create(job_nodes, batch_size=1000)
    nodes_wake(job_node.node_id for job_node in job_nodes)
    GpuAllocation.objects.bulk_create(gpus, batch_size=1000)
    SlurmJob.objects.bulk_update(jobs, ["node_list", "state", "start_time", "preempt_time", "preempt_kill_time",
                                        "started_by_backfill",
                                        "reason", "expected_start", "num_nodes", "num_tasks", "time_limit"],
                                 batch_size=1000)
    JobEvent.objects.bulk_create([JobEvent(job=job, time=now, message=f"Allocated {job.node_list}; running the prolog.")
                                  for job in jobs], batch_size=1000)
    for job in jobs:
        if job.mail_type:
            mail_job_started(job=job, now=now)
    return {job.pk for job in jobs}
