"""One scheduler pass of one cluster, as slurmctld's threads would do it:

1. every PriorityCalcPeriod, usage decay and accrual (the decay thread, services.usage);
2. jobs on a DOWN node fail NODE_FAIL and are requeued; preemption victims whose GraceTime has ended
   are requeued or end PREEMPTED when slurmctld's periodic check is due (preemption.grace_check_due)
   or a backfill iteration runs (it tries their preemptors; bf_interval below 30 s never lets the
   check's 30 s pass), services.lifecycle.preempted_jobs_end; jobs past their time limit, or of an
   association or QOS whose usage reached its GrpTRESMins, are stopped (TIMEOUT), and allocations
   whose salloc went silent end (services.allocations);
3. --dependency tested; pending jobs that became eligible start accruing age (accrue_time);
4. priorities: every pending job's when PriorityCalcPeriod has passed (the decay run, which also
   stores the fair-share factors and norms a submission's priority is computed from until the
   next: services.jobs), else only released, reniced and requeued jobs' (multifactor, with
   fair-share from the association tree);
5. scheduling: main + preemption batch_sched_delay after the last or at a job's end, backfill every bf_interval
   (trainhub.slurm.scheduler); the new priorities, pending reasons and --start estimates stored
   together (each job's row updated once), then the allocations written in one transaction.

A pass reads the queue as plain rows (snapshot.queued_jobs), works out each association's
fair-share and each (association, partition, QOS)'s limits once, not once per job, so a pass
over 10,000 pending jobs costs well under a second of CPU (bench: slurm_pages).

Every pass records its time and outcome (or its error) on the cluster, shown on the cluster page.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Mapping
from dataclasses import asdict, dataclass

from django.db import connection, transaction
from django.db.models import F, Model, Q

from trainhub.common.wire import format_timestamp
from trainhub.inventory.models import NodeState
from trainhub.slurm import arrays, dependency, fairshare, hostlist, limits, preemption, scheduler, snapshot
from trainhub.slurm.conf import SlurmConfig
from trainhub.slurm.models import (
    Association,
    GpuAllocation,
    Hold,
    JobNode,
    JobRun,
    JobState,
    NodePhase,
    SlurmCluster,
    SlurmJob,
)
from trainhub.slurm.services import arrays as array_service
from trainhub.slurm.services import lifecycle
from trainhub.slurm.services.mail import mail_invalid_dependency, mail_time_limits
from trainhub.slurm.services.usage import usage_pass
from trainhub.slurm.steps import TIME_LIMIT

logger = logging.getLogger(__name__)


@dataclass
class PassSummary:
    pending: int = 0
    running: int = 0
    started: int = 0
    preempted: int = 0
    timed_out: int = 0
    node_failed: int = 0
    priorities_computed: int = 0
    #: Seconds until the main scheduler is due when this pass skipped it with jobs pending (0: not
    #: skipped): the task asks for a pass then, as slurmctld's background loop runs it then.
    main_due_in: float = 0.0


def cluster_pass_recorded(*, cluster_pk: int, now: dt.datetime) -> PassSummary | None:
    """Run a pass and record its outcome on the cluster; an error is recorded, not raised."""
    cluster = SlurmCluster.objects.filter(pk=cluster_pk).first()
    if cluster is None:
        return None
    try:
        summary = cluster_pass(cluster=cluster, now=now)
        record = {"time": format_timestamp(now), "ok": True, **asdict(summary)}
    except Exception as exc:  # noqa: BLE001 - a failed pass is shown on the cluster page, then retried by beat
        logger.exception("scheduler pass of Slurm cluster %s failed", cluster.cluster_id)
        summary = None
        record = {"time": format_timestamp(now), "ok": False, "error": f"{type(exc).__name__}: {exc}"}
    SlurmCluster.objects.filter(pk=cluster_pk).update(last_pass_time=now, last_pass_summary=record)
    return summary


def _fail_jobs_on_down_nodes(cluster: SlurmCluster, now: dt.datetime) -> int:
    """slurmctld requeues a batch job whose node went DOWN (NODE_FAIL), or ends it NODE_FAIL."""
    lost = (JobNode.objects.filter(job__cluster=cluster, job__state=JobState.RUNNING, node__state=NodeState.DOWN)
            .exclude(phase__in=[NodePhase.EPILOG, NodePhase.DONE]).select_related("node"))
    count = 0
    for job_node in lost:
        lifecycle.job_node_lost(job_node=job_node, now=now, reason=f"node {job_node.node.name} is down")
        count += 1
    return count


def _time_out(job_pk: int, desc: str, now: dt.datetime, *, kill_wait: int) -> bool:
    """Stop a job as TIMEOUT unless it has ended or is being stopped meanwhile: as slurmd at a time
    limit, its steps' tasks get SIGTERM at once and its batch script ``kill_wait`` seconds (KillWait)
    to end on its own before it is killed (fixtures/22.05/srun-timeout: ``srun sleep 300; echo ...``
    prints srun's exit and its batch step ends COMPLETED)."""
    with transaction.atomic():
        job = SlurmJob.objects.select_for_update().get(pk=job_pk)
        if job.state != JobState.RUNNING or job.ending_state:
            return False
        lifecycle.job_stop(job=job, ending_state=JobState.TIMEOUT, now=now, desc=desc,
                           kill_at=now + dt.timedelta(seconds=kill_wait))
        return True


def _stop_timed_out(cluster: SlurmCluster, state: snapshot.ClusterState, now: dt.datetime) -> int:
    grace = dt.timedelta(minutes=state.config.over_time_limit)
    return sum(_time_out(job.pk, TIME_LIMIT, now, kill_wait=state.config.kill_wait)
               for job in SlurmJob.objects.filter(cluster=cluster, state=JobState.RUNNING, ending_state="",
                                                  time_limit__isnull=False, start_time__isnull=False)
               if job.start_time + dt.timedelta(minutes=job.time_limit) + grace <= now)


def _stop_over_tres_minutes(cluster: SlurmCluster, state: snapshot.ClusterState, now: dt.datetime) -> int:
    """Running jobs of an association or QOS whose usage reached its GrpTRESMins end TIMEOUT with
    slurmctld's explanation (limits.tres_minutes_exhausted)."""
    if not any(row.settings.get("grp_tres_mins") for row in (*state.associations, *state.qos.values())):
        return 0  # the usual case: no limit context built twice per pass (_schedule builds its own)
    context = snapshot.limit_context(state)
    count = 0
    for job in SlurmJob.objects.filter(cluster=cluster, state=JobState.RUNNING, ending_state=""):
        desc = limits.tres_minutes_exhausted(context, snapshot.limit_request(job, state), state.tres_of(job))
        count += bool(desc) and _time_out(job.pk, desc, now, kill_wait=state.config.kill_wait)
    return count


def _resolve_dependencies(cluster: SlurmCluster, now: dt.datetime) -> None:
    """Test pending jobs' --dependency (trainhub.slurm.dependency): satisfied items are dropped, and a
    job whose dependency is all satisfied becomes eligible now (scontrol's EligibleTime); one whose
    dependency can no longer be satisfied mails INVALID_DEPEND."""
    waiting = list(SlurmJob.objects.filter(cluster=cluster, state=JobState.PENDING).exclude(dependency="")
                   .select_related("submitted_by"))
    if not waiting:
        return
    wanted = set().union(*(dependency.job_ids(job.dependency) for job in waiting))
    # A job's own state, or an array's every task's together (arrays.combined_state).
    states: dict[int, list[str]] = {}
    for job_id, array_job_id, state in (SlurmJob.objects.filter(cluster=cluster).filter(
            Q(job_id__in=wanted) | Q(array_job_id__in=wanted)).values_list("job_id", "array_job_id", "state")):
        states.setdefault(array_job_id if array_job_id in wanted else job_id, []).append(state)
    facts = {job_id: dependency.JobFacts(job_id, arrays.combined_state(found)) for job_id, found in states.items()}
    for job in waiting:
        blocked = "singleton" in job.dependency and SlurmJob.objects.filter(
            cluster=cluster, user_name=job.user_name, name=job.name, job_id__lt=job.job_id,
            state__in=[JobState.PENDING, JobState.RUNNING]).exists()
        status = dependency.evaluate(job.dependency, facts.get, singleton_blocked=blocked)
        if status.text != job.dependency:
            changes = {"dependency": status.text}
            if not status.text:
                changes["begin_time"] = max(job.begin_time, now)
            with transaction.atomic():
                SlurmJob.objects.filter(pk=job.pk, state=JobState.PENDING).update(**changes)
                if status.reason == dependency.NEVER_SATISFIED != dependency.pending_reason(job.dependency):
                    mail_invalid_dependency(job=job, now=now)


def _start_accruing(cluster: SlurmCluster, now: dt.datetime, new_allocations: frozenset[int]) -> None:
    """A pending job accrues age from the moment it is eligible: not held, no dependency left, begin
    time reached, not an array record held back at its ``%N`` limit (services.arrays.throttle_changes).
    salloc's request is tried as slurmctld receives it (job_allocate), before it accrues: one granted
    at once never does (AccrueTime=Unknown: salloc/scontrol-6, sched/c-scontrol-14)."""
    SlurmJob.objects.filter(cluster=cluster, state=JobState.PENDING, hold=Hold.NONE, dependency="",
                            accrue_time__isnull=True, begin_time__lte=now).exclude(
        pk__in=new_allocations).exclude(reason=arrays.TASK_LIMIT).update(accrue_time=F("begin_time"))


def _decay_due(cluster: SlurmCluster, config: SlurmConfig, now: dt.datetime) -> bool:
    """slurmctld's decay thread runs once per PriorityCalcPeriod: it applies usage, then recomputes
    every pending job's priority (priority_multifactor.c ``_decay_thread``)."""
    return (cluster.last_priority_time is None
            or (now - cluster.last_priority_time).total_seconds() >= config.priority_calc_period)


def _recompute_priorities(state: snapshot.ClusterState, pending: list[snapshot.QueuedJob], now: dt.datetime, *,
                          due: bool, shares: fairshare.FairShareResult | None) -> list[snapshot.QueuedJob]:
    """Every pending job's priority when the decay thread is ``due``; in between only jobs that
    have none yet (released, reniced, requeued, submitted before the first decay run). The new
    priorities are set on the jobs (the scheduler orders by them) and stored with the pass's
    decisions (_store_queue). ``shares``: the fair-share already computed by this pass, if any.
    Returns those jobs."""
    jobs = pending if due else [job for job in pending if job.priority_time is None]
    if jobs:
        snapshot.set_priorities(jobs, state, snapshot.association_terms(state, shares or snapshot.compute_fairshare(
            state)), snapshot.priority_context(state), now)
    return jobs


def _store_priority_norms(cluster: SlurmCluster, state: snapshot.ClusterState,
                          shares: fairshare.FairShareResult) -> None:
    """What the decay run leaves for the jobs submitted before the next one: each association's
    FairShare (slurmctld's fs_factor, set only by its decay thread) and LevelFS (what sshare shows
    until the next run) and the cluster-wide maxima the
    factors are normalised against (snapshot.priority_norms); rows written only where they changed."""
    level_fs = {row.key: 0.0 if row.level_fs is None else row.level_fs for row in shares.rows}
    _update_rows(Association, ("fs_factor", "level_fs"), [
        (factor, level, a.pk) for a in state.associations
        if ((factor := shares.factor(str(a.pk))), (level := level_fs[str(a.pk)])) != (a.fs_factor, a.level_fs)])
    norms = snapshot.priority_norms(state)
    if norms != cluster.priority_norms:
        SlurmCluster.objects.filter(pk=cluster.pk).update(priority_norms=norms)
        cluster.priority_norms = norms


def _gpu_grants(state: snapshot.ClusterState, start: scheduler.Start,
                taken: set[tuple[int, int]]) -> tuple[lifecycle.NodeGrant, ...]:
    """GPU indices for a start: the lowest free ones of each node (``taken`` grows as they go)."""
    pk_by_name = {node.name: node.pk for node in state.nodes.values()}
    grants = []
    for name in start.nodes:
        pk, resources = pk_by_name[name], start.allocation[name]
        free = [index for index in range(state.nodes[pk].gpus) if (pk, index) not in taken]
        chosen = tuple(free[:resources.gres.get("gpu", 0)])
        taken.update((pk, index) for index in chosen)
        grants.append(lifecycle.NodeGrant(pk, chosen, resources.cpus))
    return tuple(grants)


def _preempt(jobs: dict[int, snapshot.QueuedJob], plan: scheduler.SchedulePlan, now: dt.datetime) -> int:
    """Signal the plan's new victims; how many."""
    preemptor_of = {victim: job_id for job_id, waiting in plan.waiting.items() for victim in waiting.preempting}
    count = 0
    for action in plan.preemptions:
        desc = f"preempted by job {preemptor_of.get(action.job_id, '?')}"
        with transaction.atomic():
            job = SlurmJob.objects.select_for_update().get(pk=jobs[action.job_id].pk)
            if job.state != JobState.RUNNING or job.preempt_time is not None:
                continue  # ended meanwhile, or chosen before and running out its GraceTime
            lifecycle.job_preempt(job=job, requeue=action.mode == "REQUEUE", now=now, desc=desc, kill_at=action.kill_at)
            count += 1
    return count


def scheduler_snapshot(state: snapshot.ClusterState, jobs: list[snapshot.QueuedJob], requests: dict,
                       pending: list[scheduler.PendingJob]) -> scheduler.Snapshot:
    """The scheduler's view: the nodes, partitions, the running ``jobs`` on their current
    allocations (``requests``: their limit requests by pk) and the ``pending`` entries given."""
    allocations: dict[int, list[tuple[str, int, int]]] = {}
    running = [job.pk for job in jobs if job.state == JobState.RUNNING]
    for job_pk, name, cpus, gpus in (JobNode.objects.filter(job__in=running, run_index=F("job__restart_count"))
                                     .values_list("job_id", "node__name", "cpus", "gpu_indices")):
        allocations.setdefault(job_pk, []).append((name, cpus, len(gpus)))
    return scheduler.Snapshot(
        nodes=snapshot.scheduler_nodes(state),
        partitions={name: [state.nodes[pk].name for pk in info.node_pks] for name, info in state.partitions.items()},
        partition_options={name: info.options for name, info in state.partitions.items()},
        running=[snapshot.running_job(job, allocations.get(job.pk, []), state, requests[job.pk])
                 for job in jobs if job.state == JobState.RUNNING],
        pending=pending)


def will_run(cluster: SlurmCluster, state: snapshot.ClusterState, probe: SlurmJob,
             now: dt.datetime) -> tuple[dt.datetime, scheduler.Start | scheduler.Waiting] | None:
    """sbatch --test-only: when and where ``probe`` (an unsaved job) would start if it were the only job
    waiting (slurmctld's will-run test weighs the running jobs' end times, not the pending queue):
    (the start, the plan's Start or Waiting for it), or None when no start is found."""
    running = [job for job in snapshot.queued_jobs(cluster) if job.state == JobState.RUNNING]
    requests = {job.pk: snapshot.limit_request(job, state) for job in running}
    entry = snapshot.pending_job(probe, state, snapshot.limit_request(probe, state))
    plan = scheduler.schedule(scheduler_snapshot(state, running, requests, [entry]), state.config, now)
    start = next((start for start in plan.starts if start.job_id == probe.job_id), None)
    if start is not None:
        return now, start
    waiting = plan.waiting.get(probe.job_id)
    return (waiting.estimated_start, waiting) if waiting and waiting.estimated_start else None


def _arrived_after(job: snapshot.QueuedJob, now: dt.datetime) -> bool:
    """Whether the job was submitted after the pass's moment (the pass read the queue later, as a
    job submitted while it began): slurmctld's main scheduler and backfill iteration test the queue
    they build when they begin, so such a job gets no reason, evaluation or expected start from
    them (fixtures/22.05/ntasks: job 9, submitted after the backfill iteration that started jobs 2
    and 3 began, shows StartTime=Unknown, while jobs 4 and 5 it tested show a start a year on). A
    requeued job (a new submit time, its requeue's) is left in."""
    return job.restart_count == 0 and job.submit_time > now


def _schedule(cluster: SlurmCluster, state: snapshot.ClusterState, jobs: list[snapshot.QueuedJob],
              recomputed: list[snapshot.QueuedJob], now: dt.datetime, summary: PassSummary, *,
              main: bool, backfill: bool, new_allocations: frozenset[int] = frozenset()) -> None:
    """Main + preemption (when due) and backfill (when due) on the current queue; decisions written to the database.
    ``new_allocations``: the pks of salloc jobs no pass has seen yet, tried first (scheduler.schedule)."""
    by_id = {job.job_id: job for job in jobs}
    context = snapshot.limit_context(state)
    requests = {job.pk: snapshot.limit_request(job, state) for job in jobs}
    usage = snapshot.limit_usage(state, context, jobs, requests)
    pending = [job for job in jobs if job.state == JobState.PENDING and not _arrived_after(job, now)]
    running_tasks = array_service.running_tasks(cluster)
    entries = array_service.spread(pending, [snapshot.pending_job(job, state, requests[job.pk],
                                                                  allocating=job.pk in new_allocations)
                                             for job in pending], running_tasks, state.cluster_cpus)
    plan = scheduler.schedule(scheduler_snapshot(state, jobs, requests, entries.pending), state.config, now,
                              limits=(context, usage), preempt_policy=snapshot.preempt_policy(state, context),
                              backfill=backfill, main=main)
    task_starts = array_service.fold(plan, entries, by_id, running_tasks)
    summary.preempted = _preempt(by_id, plan, now)
    _store_queue(cluster, pending, recomputed, plan, now, estimated=backfill, built=main or backfill,
                 task_nodes={job.job_id: snapshot.scheduled_node_count(job, state) for job in pending
                             if job.nodes_from_tasks or job.min_nodes})
    held, released = array_service.throttle_changes(plan, by_id)
    if held:
        SlurmJob.objects.filter(pk__in=held).update(accrue_time=None)
    if released:
        SlurmJob.objects.filter(pk__in=released, state=JobState.PENDING).update(begin_time=now, accrue_time=None)
    taken = set(GpuAllocation.objects.filter(job__cluster=cluster, active=True).values_list("node_id", "gpu_index"))
    # An array record's starts go to the tasks split off it, lowest index first.
    split = {job_id: array_service.array_split(record_pk=by_id[job_id].pk, count=count, now=now)
             for job_id, count in task_starts.items() if by_id[job_id].array_pending}
    starts = [lifecycle.JobStart(split[start.job_id].pop(0) if start.job_id in split else by_id[start.job_id].pk,
                                 _gpu_grants(state, start, taken),
                                 snapshot.job_billing(by_id[start.job_id], state, snapshot.allocation_tres(start.allocation)),
                                 start.time_limit_minutes, start.backfilled)
              for start in plan.starts]
    summary.started = len(lifecycle.jobs_start(starts=starts, now=now))


_PRIORITY_COLUMNS = ("priority", *snapshot.FACTOR_FIELDS)


def _update_rows(model: type[Model], columns: tuple[str, ...], rows: list[tuple], **where: str) -> None:
    """``UPDATE ... SET columns WHERE id = ? [AND column = value ...]`` once per row (executemany: one
    prepared statement). A pass rewrites thousands of pending jobs (and a decay run thousands of
    associations); bulk_update's CASE expressions take seconds for that, one save() per row as long.
    Each row: the column values, then the pk; ``where``: further equalities every row must meet."""
    quote = connection.ops.quote_name
    assignments = ", ".join(f"{quote(column)} = %s" for column in columns)
    conditions = "".join(f" AND {quote(column)} = %s" for column in where)
    with connection.cursor() as cursor:
        cursor.executemany(f"UPDATE {quote(model._meta.db_table)} SET {assignments} "  # noqa: S608
                           f"WHERE {quote('id')} = %s{conditions}", [(*row, *where.values()) for row in rows])


def _update_pending(columns: tuple[str, ...], rows: list[tuple]) -> None:
    """_update_rows of jobs still pending."""
    _update_rows(SlurmJob, columns, rows, state=JobState.PENDING.value)


#: What a pass writes of every pending job it changes, with its priority or evaluation time or alone.
_REASON_COLUMNS = ("reason", "expected_start", "expected_nodes", "reason_prev_db")
#: The reasons of a job the main scheduler tried and could not start (scheduler._Pass.main).
_TRIED = frozenset({"Resources", scheduler.NODES_RESERVED})


def _store_queue(cluster: SlurmCluster, pending: list[snapshot.QueuedJob], recomputed: list[snapshot.QueuedJob],
                 plan: scheduler.SchedulePlan, now: dt.datetime, *, estimated: bool, built: bool,
                 task_nodes: Mapping[int, int]) -> None:
    """The pending jobs' new priorities (with their factors), the pass's evaluation of those and of
    jobs no pass had evaluated (sched_eval_time), and changed reasons and --start estimates, each
    row written once, in one transaction, before the planned jobs start. Only rows
    still pending: a job may have been cancelled or started since it was read. Without a backfill
    iteration (``estimated`` False) a job keeps the estimate of the last one unless the main
    scheduler gave it a new one (its --begin, or the end of its preemption victims). A job of -n
    without -N (or of -N MIN-MAX) the main scheduler tried and could not start (Resources) shows the node
    count it was tried with (``task_nodes``: snapshot.scheduled_node_count; slurmctld's node_cnt_wag, set by
    select_nodes whether or not the job starts). A pass that builds a queue (``built``: the main scheduler
    or a backfill iteration runs) first keeps each pending job's reason for accounting
    (scheduler.reason_prev_db), from the reason it had before the pass."""
    adapt = connection.ops.adapt_datetimefield_value
    moment = adapt(now)
    # TRES terms exist only with PriorityWeightTRES (a JSON column, adapted as the ORM would).
    with_tres = any(job.factor_tres for job in recomputed)
    tres_field = SlurmJob._meta.get_field("factor_tres")
    new_priority = {job.pk for job in recomputed}
    priority_rows, evaluated_rows, reason_rows, node_rows = [], [], [], []
    for job in pending:
        waiting = plan.waiting.get(job.job_id)
        tried = task_nodes.get(job.job_id, job.num_nodes)
        if waiting and waiting.reason in _TRIED and tried != job.num_nodes:
            node_rows.append((tried, job.pk))
        if waiting and (estimated or waiting.estimated_start):
            reason, estimate, nodes = (waiting.reason, waiting.estimated_start,
                                       hostlist.compress(waiting.planned_nodes) if waiting.estimated_start else "")
        else:
            reason, estimate, nodes = (waiting.reason if waiting else job.reason, job.expected_start,
                                       job.expected_nodes)
        prev_db = (scheduler.reason_prev_db(reason=job.reason, prev_db=job.reason_prev_db) if built
                   else job.reason_prev_db)
        if job.pk in new_priority:
            priority_rows.append((*(getattr(job, column) for column in _PRIORITY_COLUMNS),
                                  *((tres_field.get_db_prep_value(job.factor_tres, connection),) if with_tres else ()),
                                  moment, moment, reason, adapt(estimate), nodes, prev_db, job.pk))
        elif job.sched_eval_time is None:
            evaluated_rows.append((moment, reason, adapt(estimate), nodes, prev_db, job.pk))
        elif ((job.reason, job.expected_start, job.expected_nodes, job.reason_prev_db)
              != (reason, estimate, nodes, prev_db)):
            reason_rows.append((reason, adapt(estimate), nodes, prev_db, job.pk))
    tres_columns = ("factor_tres",) if with_tres else ()
    with transaction.atomic():
        _update_pending((*_PRIORITY_COLUMNS, *tres_columns, "priority_time", "sched_eval_time", *_REASON_COLUMNS),
                        priority_rows)
        _update_pending(("sched_eval_time", *_REASON_COLUMNS), evaluated_rows)
        _update_pending(_REASON_COLUMNS, reason_rows)
        _update_pending(("num_nodes",), node_rows)
        if recomputed and not with_tres:
            SlurmJob.objects.filter(cluster=cluster, state=JobState.PENDING).exclude(factor_tres={}).update(
                factor_tres={})


def _job_ended_since(cluster: SlurmCluster, moment: dt.datetime | None) -> bool:
    """Whether a job's run (a requeued one's too) has ended since ``moment``: its epilog's completion
    runs the main scheduler at once (scheduler.main_due)."""
    return moment is not None and JobRun.objects.filter(job__cluster=cluster, end_time__gte=moment).exists()


def _allocation_untried(job: SlurmJob) -> bool:
    """An salloc request no pass has evaluated: slurmctld tries one as it receives it. A pass whose
    moment came before the request's submission (begun by another request as it committed) saw it
    BeginTime: that was no try."""
    return (job.state == JobState.PENDING and job.interactive and job.restart_count == 0
            and (job.sched_eval_time is None or job.sched_eval_time < job.submit_time))


def cluster_pass(*, cluster: SlurmCluster, now: dt.datetime) -> PassSummary:
    summary = PassSummary()
    cluster.refresh_from_db()
    state = snapshot.load_cluster(cluster, now=now)
    due = _decay_due(cluster, state.config, now)
    if due:
        usage_pass(cluster=cluster, config=state.config, now=now)
    summary.node_failed = _fail_jobs_on_down_nodes(cluster, now)
    mail_time_limits(cluster_pk=cluster.pk, now=now)
    backfill = scheduler.backfill_due(state.config, cluster.last_backfill_time, now)
    # a backfill iteration tries the victims' preemptors, so it ends those past their GraceTime too
    if backfill or preemption.grace_check_due(cluster.last_backfill_time, now):
        lifecycle.preempted_jobs_end(cluster=cluster, now=now)
    summary.timed_out = _stop_timed_out(cluster, state, now)
    summary.timed_out += lifecycle.allocations_abandoned(cluster=cluster, config=state.config, now=now)
    _resolve_dependencies(cluster, now)
    new_allocations = frozenset(
        job.pk for job in SlurmJob.objects.filter(cluster=cluster, state=JobState.PENDING, interactive=True)
        .only("pk", "state", "interactive", "restart_count", "sched_eval_time", "submit_time")
        if _allocation_untried(job))
    _start_accruing(cluster, now, new_allocations)
    state = snapshot.load_cluster(cluster, now=now)
    summary.timed_out += _stop_over_tres_minutes(cluster, state, now)
    jobs = snapshot.queued_jobs(cluster)
    shares = snapshot.compute_fairshare(state) if due or not cluster.priority_norms else None
    if shares is not None:
        _store_priority_norms(cluster, state, shares)
    # and one queued since: the main scheduler may not run in this pass to start it (main_due)
    new_allocations |= {job.pk for job in jobs if _allocation_untried(job)}
    recomputed = _recompute_priorities(state, [job for job in jobs if job.state == JobState.PENDING], now, due=due,
                                       shares=shares)
    summary.priorities_computed = len(recomputed)
    main = scheduler.main_due(state.config, cluster.last_main_time, now, job_ended=_job_ended_since(
        cluster, cluster.last_main_time))
    _schedule(cluster, state, jobs, recomputed, now, summary, main=main, backfill=backfill,
              new_allocations=new_allocations)
    if due:
        SlurmCluster.objects.filter(pk=cluster.pk).update(last_priority_time=now)
    # the caller's cluster too: scontrol's LastSchedEval reads them (reports.scontrol_jobs)
    if backfill:
        cluster.last_backfill_time = now
        SlurmCluster.objects.filter(pk=cluster.pk).update(last_backfill_time=now)
    if main:
        cluster.last_main_time = now
        SlurmCluster.objects.filter(pk=cluster.pk).update(last_main_time=now)
    summary.pending = SlurmJob.objects.filter(cluster=cluster, state=JobState.PENDING).count()
    if not main and summary.pending:
        summary.main_due_in = scheduler.main_due_in(state.config, cluster.last_main_time, now)
    summary.running = SlurmJob.objects.filter(cluster=cluster, state=JobState.RUNNING).count()
    return summary
