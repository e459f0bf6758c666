"""What squeue, sprio, sshare and sacct print, read from the database for the API, the pages and
the CLI (formats.py lays the text out). Each report takes the filters of its command's flags.

- squeue: pending and running jobs, and finished jobs whose epilog still runs (COMPLETING).
- sprio: pending jobs that are eligible (begin time reached) and not held, with the factors of
  their last priority computation, as slurmctld keeps them between PriorityCalcPeriods.
- sshare: the association tree's fair-share now (usage as of the last pass).
- sacct: one record per job (its latest run), every run with -D; by default the caller's own jobs
  since midnight; jobs that never ran have a record of their own (PENDING, CANCELLED).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from django.db.models import Q

from trainhub.slurm import formats, snapshot
from trainhub.slurm.conf import SlurmConfig, parse_config
from trainhub.slurm.models import JobNode, JobRun, JobState, NodePhase, SlurmCluster, SlurmJob
from trainhub.slurm.priority import PriorityBreakdown
from trainhub.slurm.tres import format_tres

_STATE_NAMES = {code: state for state, code in {
    "PENDING": "PD", "RUNNING": "R", "COMPLETING": "CG", "COMPLETED": "CD", "CANCELLED": "CA", "FAILED": "F",
    "TIMEOUT": "TO", "PREEMPTED": "PR", "NODE_FAIL": "NF", "REQUEUED": "RQ"}.items()}


def _names(text: str) -> list[str]:
    return [item.strip() for item in text.split(",") if item.strip()]


def _job_ids(text: str) -> list[int]:
    return [int(item) for item in _names(text) if item.isdigit()]


def _states(text: str) -> set[str]:
    """squeue/sacct -t/-s: names or compact codes, any case."""
    return {_STATE_NAMES.get(item.upper(), item.upper()) for item in _names(text)}


@dataclass(frozen=True)
class Report:
    text: str
    rows: list[dict]


# --- squeue -------------------------------------------------------------------------------------

def squeue(cluster: SlurmCluster, *, now: dt.datetime, user: str = "", partition: str = "", states: str = "",
           jobs: str = "", long: bool = False, start: bool = False) -> Report:
    active = SlurmJob.objects.filter(cluster=cluster, state__in=[JobState.PENDING, JobState.RUNNING])
    completing_ids = (JobNode.objects.filter(job__cluster=cluster, phase=NodePhase.EPILOG)
                      .exclude(job__state__in=[JobState.PENDING, JobState.RUNNING]).values("job_id"))
    rows = SlurmJob.objects.filter(Q(pk__in=active.values("pk")) | Q(pk__in=completing_ids))
    if user:
        rows = rows.filter(user_name__in=_names(user))
    if partition:
        rows = rows.filter(partition__in=_names(partition))
    if jobs:
        rows = rows.filter(job_id__in=_job_ids(jobs))
    wanted = _states(states)
    items = []
    for job in rows.only("job_id", "partition", "name", "user_name", "state", "start_time", "time_limit",
                         "num_nodes", "node_list", "reason", "expected_start", "priority", "end_time"):
        state = job.state if job.state in (JobState.PENDING, JobState.RUNNING) else "COMPLETING"
        if wanted and state not in wanted:
            continue
        running_for = ((job.end_time or now) - job.start_time).total_seconds() if job.start_time else 0
        items.append(formats.SqueueJob(
            job_id=job.job_id, partition=job.partition, name=job.name, user=job.user_name, state=state,
            elapsed_seconds=max(0, int(running_for)), time_limit_minutes=job.time_limit, nodes=job.num_nodes,
            nodelist=job.node_list, reason=job.reason,
            start_time=job.expected_start if state == JobState.PENDING else job.start_time, priority=job.priority))
    return Report(formats.squeue_text(items, long=long, start=start), formats.squeue_rows(items))


# --- sprio --------------------------------------------------------------------------------------

def priority_breakdowns(cluster: SlurmCluster, *, now: dt.datetime, user: str = "", jobs: str = "",
                        partition: str = "") -> list[PriorityBreakdown]:
    """Eligible, unheld pending jobs with their last computed factors (what sprio lists)."""
    rows = SlurmJob.objects.filter(cluster=cluster, state=JobState.PENDING, hold="", begin_time__lte=now).exclude(
        priority_factors={})
    if user:
        rows = rows.filter(user_name__in=_names(user))
    if jobs:
        rows = rows.filter(job_id__in=_job_ids(jobs))
    if partition:
        rows = rows.filter(partition__in=_names(partition))
    return [snapshot.breakdown_from_values(job_id=job_id, partition=part, user=user_name, account=account, qos=qos,
                                           data=factors)
            for job_id, part, user_name, account, qos, factors in
            rows.values_list("job_id", "partition", "user_name", "account", "qos", "priority_factors")]


def sprio(cluster: SlurmCluster, *, now: dt.datetime, long: bool = False, weights: bool = False, norm: bool = False,
          user: str = "", jobs: str = "", partition: str = "", config: SlurmConfig | None = None) -> Report:
    config = config or parse_config(cluster.config)
    if config.priority_type != "priority/multifactor":
        text = (f"You are not running a supported priority plugin\n({config.priority_type}).\n"
                "Only 'priority/multifactor' is supported.\n")
        return Report(text, [])
    breakdowns = [] if weights else priority_breakdowns(cluster, now=now, user=user, jobs=jobs, partition=partition)
    if jobs and not breakdowns and not weights:
        return Report(formats.SPRIO_NO_JOBS + "\n", [])
    text = formats.sprio_text(breakdowns, config, long=long, norm=norm, with_user=bool(user), weights=weights)
    return Report(text, formats.sprio_rows(breakdowns))


# --- sshare -------------------------------------------------------------------------------------

def sshare(cluster: SlurmCluster, *, now: dt.datetime, viewer: str, long: bool = False, all_users: bool = False,
           accounts: str = "", users: str = "") -> Report:
    state = snapshot.load_cluster(cluster, now=now)
    rows = snapshot.compute_fairshare(state).rows
    if accounts:
        wanted = set(_names(accounts))
        rows = [row for row in rows if row.account in wanted]
    user = viewer
    if users:
        wanted_users = set(_names(users))
        rows = [row for row in rows if row.user is None or row.user in wanted_users]
        all_users = True
    text = formats.sshare_text(rows, fair_tree=state.config.fair_tree, long=long, user=user, all_users=all_users)
    return Report(text, formats.sshare_rows(rows, user=user, all_users=all_users))


# --- sacct --------------------------------------------------------------------------------------

def _run_record(job: SlurmJob, run: JobRun | None, now: dt.datetime) -> formats.SacctJob:
    state = run.state if run else job.state
    desc = run.state_desc if run else job.state_desc
    if state == JobState.CANCELLED and desc.startswith("by "):
        state = f"CANCELLED {desc}"
    start = run.start_time if run else None
    end = (run.end_time if run else job.end_time)
    elapsed = int(((end or now) - start).total_seconds()) if start else 0
    exit_code, signal = (run.exit_code, run.exit_signal) if run else (job.exit_code, job.exit_signal)
    tres = {"cpu": run.alloc_cpus, "node": run.num_nodes, "billing": int(run.billing),
            "gres/gpu": run.alloc_gpus} if run else {}
    return formats.SacctJob(
        job_id=str(job.job_id), name=job.name, partition=job.partition, account=job.account,
        alloc_cpus=run.alloc_cpus if run else 0, state=state,
        exit_code=f"{exit_code or 0}:{signal or 0}", user=job.user_name, elapsed_seconds=max(elapsed, 0),
        time_limit_minutes=job.time_limit, nnodes=run.num_nodes if run else job.num_nodes,
        nodelist=run.node_list if run else "None assigned", qos=job.qos, priority=job.priority,
        restarts=job.restart_count, submit=run.submit_time if run else job.submit_time, start=start, end=end,
        alloc_tres=format_tres(tres))


def _accounting(record: formats.SacctJob, run: JobRun | None) -> dict:
    """Per-run accounting beyond sacct's default columns: CPU time, GPU-seconds, max memory."""
    elapsed = record.elapsed_seconds
    return {"elapsedSeconds": elapsed, "cpuSeconds": elapsed * record.alloc_cpus,
            "gpuSeconds": elapsed * (run.alloc_gpus if run else 0),
            "maxRssKb": run.max_rss_kb if run else None}


def sacct(cluster: SlurmCluster, *, now: dt.datetime, viewer: str, jobs: str = "", user: str = "",
          all_users: bool = False, duplicates: bool = False, starttime: dt.datetime | None = None,
          endtime: dt.datetime | None = None, state: str = "", brief: bool = False,
          fields: list[str] | None = None) -> Report:
    rows = SlurmJob.objects.filter(cluster=cluster)
    if jobs:
        rows = rows.filter(job_id__in=_job_ids(jobs))
    else:
        since = starttime or now.replace(hour=0, minute=0, second=0, microsecond=0)
        rows = rows.filter(Q(end_time__isnull=True) | Q(end_time__gte=since))
        if endtime:
            rows = rows.filter(submit_time__lte=endtime)
    if user:
        rows = rows.filter(user_name__in=_names(user))
    elif not all_users and not jobs:
        rows = rows.filter(user_name=viewer)
    jobs_by_pk = {job.pk: job for job in rows.order_by("job_id")}
    runs: dict[int, list[JobRun]] = {}
    for run in JobRun.objects.filter(job_id__in=list(jobs_by_pk)).order_by("job_id", "index"):
        runs.setdefault(run.job_id, []).append(run)
    wanted = _states(state)
    records, extra = [], []
    for pk, job in jobs_by_pk.items():
        job_runs = runs.get(pk, [])
        # None stands for the job's own record: it pends (again) or ended before it ever ran.
        current = job_runs[-1] if job_runs and job_runs[-1].index == job.restart_count else None
        for run in (job_runs + ([] if current else [None])) if duplicates else [current]:
            record = _run_record(job, run, now)
            if wanted and record.state.split()[0] not in wanted:
                continue
            records.append(record)
            extra.append(_accounting(record, run))
    selected = ["jobid", "state", "exitcode"] if brief else fields
    rows_json = formats.sacct_rows(records, fields=selected)
    for row, more in zip(rows_json, extra):
        row.update(more)
    return Report(formats.sacct_text(records, fields=selected), rows_json)
