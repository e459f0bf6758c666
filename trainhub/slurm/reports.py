"""What squeue, sprio, sshare and sacct print, read from the database for the API, the pages and
the CLI (formats.py lays the text out). Each report takes the filters of its command's flags.

- squeue: pending and running jobs, and finished jobs whose epilog still runs (COMPLETING).
- sprio: pending jobs that are eligible (begin time reached) and not held, with the factors of
  their last priority computation, as slurmctld keeps them between PriorityCalcPeriods.
- sshare: the association tree's fair-share now (usage as of the last pass).
- sacct: one record per job (its latest run), every run with -D; by default the caller's own jobs
  since midnight; jobs that never ran have a record of their own (PENDING, CANCELLED). Each run's
  record is followed by its steps' (``JOBID.batch``, ``JOBID.0`` ...) unless -X (allocations).
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from operator import itemgetter
from signal import SIGINT

from django.core.exceptions import EmptyResultSet
from django.db import connections
from django.db.models import (BigIntegerField, Case, CharField, DateTimeField, Exists, F, Func, IntegerField, Max, OuterRef,
                              Prefetch, Q, QuerySet, Subquery, Value, When)
from django.db.models.functions import Coalesce
from django.utils.dateparse import parse_datetime

from trainhub.iam.selectors import posix_accounts_by_username
from trainhub.inventory.models import Node, NodeState
from trainhub.slurm import (arrays, fairshare, formats, jobenv, scheduler, scontrol_job, scontrol_node,
                            scontrol_partition, snapshot)
from trainhub.slurm import sinfo as sinfo_layout
from trainhub.slurm.conf import parse_config
from trainhub.slurm.hostlist import HostlistError, compress, expand
from trainhub.slurm.models import (Association, ClusterAuditEntry, JobNode, JobRun, JobState, JobStep, NodePhase,
                                   PendingStep, SlurmCluster, SlurmJob, StepNode)
from trainhub.slurm.priority import PriorityBreakdown
from trainhub.slurm.tres import GresRequest, format_tres

_STATE_NAMES = {code: state for state, code in {
    "PENDING": "PD", "RUNNING": "R", "COMPLETING": "CG", "COMPLETED": "CD", "CANCELLED": "CA", "FAILED": "F",
    "TIMEOUT": "TO", "PREEMPTED": "PR", "NODE_FAIL": "NF", "REQUEUED": "RQ"}.items()}


def _names(text: str) -> list[str]:
    return [item.strip() for item in text.split(",") if item.strip()]


#: Job ids are stored as signed 64-bit integers: a larger number names no job (and no database
#: takes it as a parameter).
MAX_JOB_ID = 2**63 - 1
_JOB_ID = re.compile(r"[0-9]+")


def _job_ids(text: str) -> list[int]:
    """The job ids of a -j list; items that are no job id (words, other digits, ids too large to
    exist) match no job."""
    return [int(item) for item in _names(text) if _JOB_ID.fullmatch(item) and int(item) <= MAX_JOB_ID]


def _states(text: str) -> set[str]:
    """squeue/sacct -t/-s: names or compact codes, any case."""
    return {_STATE_NAMES.get(item.upper(), item.upper()) for item in _names(text)}


#: The job states squeue -t takes, in the order its error lists them, with their compact codes
#: (src/squeue/opts.c ``_check_job_state``, job_state_string_compact).
SQUEUE_STATES = {
    "PENDING": "PD", "RUNNING": "R", "SUSPENDED": "S", "COMPLETED": "CD", "CANCELLED": "CA", "FAILED": "F",
    "TIMEOUT": "TO", "NODE_FAIL": "NF", "PREEMPTED": "PR", "BOOT_FAIL": "BF", "DEADLINE": "DL",
    "OUT_OF_MEMORY": "OOM", "COMPLETING": "CG", "CONFIGURING": "CF", "RESIZING": "RS", "RESV_DEL_HOLD": "RD",
    "REQUEUED": "RQ", "REQUEUE_FED": "RF", "REQUEUE_HOLD": "RH", "REVOKED": "RV", "SIGNALING": "SI",
    "SPECIAL_EXIT": "SE", "STAGE_OUT": "SO", "STOPPED": "ST"}
_SQUEUE_STATE_WORDS = {*SQUEUE_STATES, *SQUEUE_STATES.values()}


def squeue_states(text: str) -> set[str]:
    """squeue -t's states (``_states``), ``all`` only alone; raises ValueError with squeue's two error
    lines for any other word (fixtures/22.05/bad-input: ``-t bogus``, ``-t all,PD``, ``-t PD,bogus``)."""
    if text.strip().upper() == "ALL":
        return {"ALL"}
    for item in _names(text):
        if item.upper() not in _SQUEUE_STATE_WORDS:
            raise ValueError(f"squeue: error: Invalid job state specified: {item}\n"
                             f"squeue: error: Valid job states include: {','.join(SQUEUE_STATES)}\n")
    return _states(text)


class _Stored(Func):
    """A datetime column as the database stores it, which the driver leaves unparsed: on SQLite through
    its no-op unary ``+`` (the result has no declared type, which the sqlite3 module parses by: Django
    registers a converter for ``datetime``), on PostgreSQL as text (Django's loader parses every
    timestamptz in Python). Over 10,000 jobs either cost 10-25 ms, for columns a default squeue
    never shows and sprio only compares. The rows converted afterwards have datetimes."""

    template = "%(expressions)s"
    output_field = DateTimeField()

    def as_sqlite(self, compiler, connection, **extra_context):
        return self.as_sql(compiler, connection, template="+%(expressions)s", **extra_context)

    def as_postgresql(self, compiler, connection, **extra_context):
        return self.as_sql(compiler, connection, template="(%(expressions)s)::text", **extra_context)

    def get_db_converters(self, connection):
        return [*super().get_db_converters(connection), _as_datetime]


def _as_datetime(value, expression, connection) -> dt.datetime | None:
    """_Stored's text as a datetime (Django's own converter parses SQLite's first)."""
    return value if value is None or isinstance(value, dt.datetime) else parse_datetime(value)


def _driver_rows(rows: QuerySet, fields: Sequence[str]) -> tuple[list[tuple], Callable[[Sequence[tuple]], list[tuple]]]:
    """``rows.values_list(*fields)`` as the database driver returns them, without Django's per-row
    conversions (datetimes parsed, JSON decoded: over a 10,000-job queue they cost as much as the query),
    and the conversion that turns some of those rows into what values_list would have given."""
    model_fields = {field.name: field for field in rows.model._meta.concrete_fields}
    columns = [_Stored(F(name)) if isinstance(model_fields.get(name), DateTimeField) else name for name in fields]
    compiler = rows.values_list(*columns).query.get_compiler(using=rows.db)
    try:
        sql, params = compiler.as_sql()
    except EmptyResultSet:  # a filter nothing can match (jobs=abc, user=","): Django writes no SQL for it
        return [], list
    converters = compiler.get_converters([column for column, _, _ in compiler.select])
    with connections[rows.db].cursor() as cursor:
        cursor.execute(sql, params)
        fetched = cursor.fetchall()

    def converted(chosen: Sequence[tuple]) -> list[tuple]:
        return list(map(tuple, compiler.apply_converters(chosen, converters))) if converters else list(chosen)

    return fetched, converted


class Report:
    """A command's text and the items it printed; their JSON rows are built only for the items
    asked for (pages show just the text, the API a page of rows).

    A report built for one ``page`` (a slice of the items in the command's order, as the web pages
    ask for) prints only those items; ``total`` still counts every item the command would print.
    """

    def __init__(self, text: str, items: Sequence = (), to_rows: Callable[[Sequence], list[dict]] = list,
                 total: int | None = None, stderr: str = ""):
        self.text = text
        #: What the command prints on its standard error beside its output (squeue's unknown -O fields).
        self.stderr = stderr
        #: The lines that say what it was asked for and did not find (scontrol show node's ``Node NAME
        #: not found``, in its output too), which make its exit status 1.
        self.missing: list[str] = []
        self.items = items
        self._to_rows = to_rows
        self.total = len(items) if total is None else total

    def rows(self, start: int = 0, size: int | None = None) -> list[dict]:
        return self._to_rows(self.items[start:None if size is None else start + size])


# --- squeue -------------------------------------------------------------------------------------

_SQUEUE_FIELDS = ("job_id", "partition", "name", "user_name", "squeue_state", "start_time", "time_limit", "num_nodes",
                  "node_list", "reason", "expected_start", "priority", "end_time", "expected_nodes", "account",
                  "num_tasks", "cpus_per_task", "gpus_per_node", "nice", "array_job_id", "array_task_id",
                  "array_pending", "array_max_running", "features", "gpus_per_task", "qos", "comment", "dependency",
                  "exclusive", "mem_per_node", "mem_per_cpu", "req_nodes", "exc_nodes", "submit_time", "work_dir",
                  "gpus_per_job", "gpu_request", "ntasks_per_node", "cpus_per_gpu", "preempt_kill_time", "min_nodes",
                  "tasks_from_nodes")
#: What only squeue's rarer letters and -O fields show (formats.squeue_reads_more), read after the
#: others for a format that shows one: a 10,000-job queue read a third slower with them.
_SQUEUE_MORE_FIELDS = ("interactive", "accrue_time", "begin_time", "hold", "requeue", "restart_count", "exit_code",
                       "exit_signal", "stdout_pattern", "stderr_pattern", "alloc_node", "alloc_sid",
                       "uid", "gid", "group_name", "script_path", "script_args", "nodes_from_tasks", "mem_per_gpu",
                       "tasks_given",
                       # what _squeue_rows annotates
                       "squeue_cluster", "squeue_assoc", "squeue_last_pass", "squeue_node_memory",
                       "squeue_memory_consumable", "squeue_alloc_cpus", "squeue_alloc_gpus")


def _squeue_fields(format_text: str) -> tuple[str, ...]:
    return _SQUEUE_FIELDS + _SQUEUE_MORE_FIELDS if formats.squeue_reads_more(format_text) else _SQUEUE_FIELDS


#: What squeue's default and -l lines (formats.SQUEUE_DEFAULT, SQUEUE_LONG: JOBID with an array's
#: tasks, PARTITION, NAME, USER, ST/STATE, TIME, TIME_LIMIT, NODES, NODELIST(REASON)), their order
#: and the API's rows read of a job: _SQUEUE_FIELDS' first 14 in the same places, then the array's.
#: Reading only these takes half the columns off a 10,000-job squeue, the most of its CPU.
_SQUEUE_SHOWN = (*_SQUEUE_FIELDS[:14], "array_job_id", "array_task_id", "array_pending", "array_max_running")
#: The other _SQUEUE_FIELDS as SqueueJob's defaults stand for them in those lines (none is shown).
_SQUEUE_UNSHOWN = {"account": "", "num_tasks": 1, "cpus_per_task": 1, "gpus_per_node": 0, "nice": 0, "features": None,
                   "gpus_per_task": 0, "qos": "", "comment": "", "dependency": "", "exclusive": False,
                   "mem_per_node": 0, "mem_per_cpu": 0, "req_nodes": "", "exc_nodes": "", "submit_time": None,
                   "work_dir": "", "gpus_per_job": 0, "gpu_request": "", "ntasks_per_node": 0, "cpus_per_gpu": 0,
                   "preempt_kill_time": None, "min_nodes": 0, "tasks_from_nodes": False}
_SQUEUE_NARROW_FORMATS = (formats.SQUEUE_DEFAULT, formats.SQUEUE_LONG)


def _squeue_widened(row: tuple) -> tuple:
    """A _SQUEUE_SHOWN row as a _SQUEUE_FIELDS one."""
    shown = dict(zip(_SQUEUE_SHOWN, row, strict=True))
    return tuple(shown[name] if name in shown else _SQUEUE_UNSHOWN[name] for name in _SQUEUE_FIELDS)


def expected_start_shown(expected: dt.datetime | None, now: dt.datetime) -> dt.datetime | None:
    """A pending job's expected start as squeue and scontrol show it: ``now`` once it has passed and the
    job still waits (fixtures/22.05/start-passed: job 5 planned at 14:47:34 shows 14:47:39 at 14:47:39,
    its end time its time limit later, until it starts)."""
    return max(expected, now) if expected is not None else None


def _expected_start_shown_sql(now: dt.datetime) -> Case:
    """expected_start_shown in SQL, for ordering by it."""
    return Case(When(expected_start__lt=now, then=Value(now)), default=F("expected_start"),
                output_field=DateTimeField())


def _squeue_item(row: tuple, now: dt.datetime) -> formats.SqueueJob:
    (job_id, partition, name, user_name, state, start_time, time_limit, num_nodes, node_list, reason,
     expected_start, priority, end_time, expected_nodes, account, num_tasks, cpus_per_task, gpus_per_node, nice,
     array_job_id, array_task_id, array_pending, array_max_running, features, gpus_per_task, qos, comment, depends,
     exclusive, mem_per_node, mem_per_cpu, req_nodes, exc_nodes, submit_time, work_dir, gpus_per_job, gpu_request,
     ntasks_per_node, cpus_per_gpu, kill_time, min_nodes, tasks_from_nodes, *more) = row
    running_for = ((end_time or now) - start_time).total_seconds() if start_time else 0
    tres_per_job, tres_per_node, tres_per_task = scontrol_job.gpu_tres_per(
        request=gpu_request, per_job=gpus_per_job, per_node=gpus_per_node, per_task=gpus_per_task)
    # allocated, --ntasks-per-node's tasks' CPUs on every node (ntasks-per-node/squeue-o: -n 20 on 3 x 8, 24)
    # a job that never got nodes (pending, or cancelled while it waited: 22.05.8 ``-N 2-4 -H`` then scancel,
    # squeue -t all CPUS 1, as scontrol's NumCPUs) counts what it asked
    tasks = scontrol_job.asked_tasks(num_tasks=num_tasks, tasks_from_nodes=tasks_from_nodes, pending=not node_list)
    cpus = (num_nodes * ntasks_per_node if ntasks_per_node and state != JobState.PENDING else tasks) * cpus_per_task
    # and, once it got nodes, --cpus-per-gpu's for its GPUs (cpus-per-gpu/squeue.txt; a refused record
    # none: small-diffs/squeue-all.txt, ``-n 1 --gpus-per-task=2 --cpus-per-gpu=9`` CPUS 1)
    if cpus_per_gpu and state != JobState.PENDING and node_list:
        cpus = scheduler.cpus_for_gpus(cpus, scontrol_job.requested_gpus(
            nodes=num_nodes, num_tasks=num_tasks, gpus_per_job=gpus_per_job, gpus_per_task=gpus_per_task,
            gpus_per_node=gpus_per_node), cpus_per_gpu)
    tres = partial(scontrol_job.job_cpus_and_tres, requested=state == JobState.PENDING, num_nodes=num_nodes,
                   num_tasks=num_tasks, cpus_per_task=cpus_per_task, gpus_per_job=gpus_per_job,
                   gpus_per_task=gpus_per_task, gpus_per_node=gpus_per_node, mem_per_node=mem_per_node,
                   mem_per_cpu=mem_per_cpu, min_nodes=min_nodes, tasks_from_nodes=tasks_from_nodes)
    return formats.SqueueJob(
        job_id=job_id, partition=partition, name=name, user=user_name, state=state,
        elapsed_seconds=max(0, int(running_for)), time_limit_minutes=time_limit, nodes=num_nodes, nodelist=node_list,
        # a job cancelled while pending started and ended at the cancel (finished-jobs/squeue-all-o.txt)
        reason=reason, start_time=expected_start_shown(expected_start, now) if state == JobState.PENDING
        else start_time or end_time,
        priority=priority,
        sched_nodes=expected_nodes if state == JobState.PENDING else "", account=account,
        cpus=cpus, tres_per_job=tres_per_job, tres_per_node=tres_per_node, tres_per_task=tres_per_task, nice=nice,
        array_job_id=array_job_id,
        array_task_id=array_task_id, array_pending=array_pending, array_max_running=array_max_running,
        features=features, qos=qos, cpus_per_task=cpus_per_task, comment=comment, dependency=depends,
        exclusive=exclusive, mem_per_node=mem_per_node, mem_per_cpu=mem_per_cpu, req_nodes=req_nodes,
        exc_nodes=exc_nodes, submit_time=submit_time, work_dir=work_dir,
        kill_time=kill_time if state == JobState.RUNNING else None,
        end_time=None if state in (JobState.PENDING, JobState.RUNNING) else end_time,
        **(_squeue_more(more, start_time, submit_time, depends, now, tres, partial(
            scontrol_job.never_tested, state=state, reason=reason, node_list=node_list, start_time=start_time, now=now),
            partial(scontrol_job.shown_tasks, num_tasks=num_tasks, ntasks_per_node=ntasks_per_node,
                    cpus_per_task=cpus_per_task))
           if more else {"num_tasks": num_tasks}))


def _squeue_more(more: Sequence, start_time: dt.datetime | None, submit_time: dt.datetime, depends: str,
                 now: dt.datetime, tres: Callable[..., str], untested: Callable[..., bool],
                 tasks: Callable[..., int | None]) -> dict:
    """SqueueJob's values of the _SQUEUE_MORE_FIELDS read for a row; ``tres``: scontrol_job.job_cpus_and_tres
    of the row's job, given what tres-alloc reads of the job and the cluster (its current run's CPUs and
    GPUs, None while it has none; its nodes' memory, None when not read): scontrol's TRES=. ``untested`` and
    ``tasks``: scontrol_job.never_tested and shown_tasks of the row's job, given its hold, begin time,
    whether its tasks were given and a started job's CPUs (TASKS: scontrol's NumTasks, both pack_job's
    num_tasks; NO_VAL where scontrol shows N/A; fixtures/22.05/review-records/squeue-O.txt: ``-n 20
    --ntasks-per-node=8`` running on 3 x 8 CPUs, 24)."""
    (interactive, accrue_time, begin_time, hold, requeue, restart_count, exit_code, exit_signal, stdout_pattern,
     stderr_pattern, alloc_node, alloc_sid, uid, gid, group, script_path, script_args, nodes_from_tasks, mem_per_gpu,
     tasks_given, cluster_name, assoc_id, last_pass, node_memory, memory_is_consumable, alloc_cpus, alloc_gpus) = more
    started = start_time if start_time is not None and start_time < now else None
    allocated = (alloc_cpus, alloc_gpus) if alloc_cpus is not None else None
    shown_tasks = tasks(tasks_given=tasks_given, untested=untested(hold=bool(hold), begin_time=begin_time),
                        allocated_cpus=alloc_cpus if started else None)
    return dict(
        num_tasks=scontrol_job.NO_VAL if shown_tasks is None else shown_tasks,
        tres=tres(allocated=allocated, nodes_from_tasks=nodes_from_tasks, mem_per_gpu=mem_per_gpu,
                  node_memory_mb=node_memory, memory_is_consumable=memory_is_consumable)[1]
        if node_memory is not None else "",
        cluster=cluster_name, uid=uid, gid=gid, group=group,
        command=scontrol_job.command_text(script_path, script_args), batch=not interactive, alloc_node=alloc_node,
        alloc_sid=alloc_sid, accrue_time=accrue_time,
        # squeue's EligibleTime: none while held or waiting for a dependency (--begin's time before it comes)
        eligible_time=None if hold or depends else begin_time, requeue=requeue, restart_count=restart_count,
        exit_status=0 if exit_code is None else (exit_code << 8) | exit_signal,
        pending_seconds=max(0, int(((started or now) - submit_time).total_seconds())),
        stdout_pattern=stdout_pattern, stderr_pattern=stderr_pattern, assoc_id=assoc_id or 0, last_pass=last_pass)


def _squeue_rows(cluster: SlurmCluster, format_text: str, now: dt.datetime) -> QuerySet:
    """The cluster's jobs, each with what squeue shows of the cluster on every line where ``format_text``
    shows it (formats.squeue_reads_more): its name; and, only where the format shows them, the
    job's association (its partition's, else the one for every partition), the cluster's last scheduler
    pass, and for tres-alloc its current run's CPUs and GPUs, its nodes' largest memory and whether
    memory is consumable (None otherwise: no join, and a kept line is not laid out again at every pass)."""
    active = [JobState.PENDING, JobState.RUNNING]
    epilog = JobNode.objects.filter(job=OuterRef("pk"), phase=NodePhase.EPILOG)
    # A finished job whose epilog still runs on a node is COMPLETING.
    rows = SlurmJob.objects.filter(cluster=cluster).annotate(squeue_state=Case(
        When(state__in=active, then=F("state")), When(Exists(epilog), then=Value("COMPLETING")),
        default=F("state"), output_field=CharField()))
    if not formats.squeue_reads_more(format_text):
        return rows
    association = Association.objects.filter(
        Q(partition=OuterRef("partition")) | Q(partition=""), cluster=cluster, account__name=OuterRef("account"),
        user=OuterRef("user_name")).order_by("-partition").values("pk")[:1]
    return rows.annotate(
        squeue_cluster=Value(cluster.cluster_id),
        squeue_assoc=Subquery(association) if "{associd}" in format_text else Value(None, IntegerField()),
        squeue_last_pass=(F("cluster__last_pass_time") if "{lastschedeval}" in format_text
                          else Value(None, DateTimeField())),
        **_squeue_tres_context(cluster, format_text, now))


def _squeue_tres_context(cluster: SlurmCluster, format_text: str, now: dt.datetime) -> dict[str, Value]:
    """squeue_node_memory, squeue_memory_consumable and squeue_alloc_cpus/gpus: what tres-alloc needs of
    the cluster and of the job's current run (scontrol show job's), read only for a format that shows it;
    the run's CPUs for NumTasks too (a running --ntasks-per-node job's is what its CPUs hold)."""
    run = JobRun.objects.filter(job=OuterRef("pk"), index=OuterRef("restart_count"))
    alloc_cpus = (Subquery(run.values("alloc_cpus")[:1])
                  if "{tres-alloc}" in format_text or "{numtasks}" in format_text else Value(None, IntegerField()))
    if "{tres-alloc}" not in format_text:
        return {"squeue_node_memory": Value(None, IntegerField()), "squeue_memory_consumable": Value(False),
                "squeue_alloc_cpus": alloc_cpus, "squeue_alloc_gpus": Value(None, IntegerField())}
    return {"squeue_node_memory": Value(_node_memory_mb(cluster, now)),
            "squeue_memory_consumable": Value(parse_config(cluster.config).memory_is_consumable),
            "squeue_alloc_cpus": alloc_cpus, "squeue_alloc_gpus": Subquery(run.values("alloc_gpus")[:1])}


def _squeue_items(rows, now: dt.datetime, shown: Callable[[formats.SqueueJob], list[formats.SqueueJob]] | None,
                  array_tasks: bool) -> list[formats.SqueueJob]:
    items = [_squeue_item(row, now) for row in rows]
    if shown is not None:
        items = [one for item in items for one in shown(item)]
    return [one for item in items for one in item.one_per_task()] if array_tasks else items


def squeue_first_sort(now: dt.datetime) -> tuple:
    """The order squeue sorts the jobs in before its -S keys (src/squeue/sort.c ``sort_jobs_by_start_time``,
    which formats.in_squeue_order's stable sorts keep among jobs equal in those): the later start first
    (a pending job's expected start, ``now`` when that has passed: ``_get_start_time``), equal starts in
    slurmctld's job list order (by job id); pending jobs without an estimate (start_time 0) last, in
    reverse: ``_sort_job_by_time_start`` puts the first of two such jobs after the second, and glibc's
    merge sort thereby reverses them (fixtures/22.05/order: b-squeue-o lists the urgent jobs started at
    11:51:02 before those of 11:50:59, and pending 19 before 17)."""
    pending = Q(state=JobState.PENDING)
    start = Case(When(pending, then=_expected_start_shown_sql(now)), default=Coalesce("start_time", "end_time"),
                 output_field=DateTimeField())
    unknown_reversed = Case(When(pending & Q(expected_start__isnull=True), then=-F("job_id")), default=F("job_id"),
                            output_field=BigIntegerField())
    return start.desc(nulls_last=True), unknown_reversed


def _squeue_selected(cluster: SlurmCluster, rows: QuerySet, *, states: str, now: dt.datetime) -> QuerySet:
    """The jobs squeue lists (rows annotated by _squeue_rows): without -t the queued and completing ones,
    with -j too (src/squeue/filter.c); with -t, of slurmctld's jobs (those, and the ones that ended within
    MinJobAge: it purges them after) the states it names (a name or short code, ``all`` any; a completing
    job is only CG) (fixtures/22.05/finished-jobs: squeue, squeue-all, squeue-finished, squeue-j-default).
    The plain columns select first: the shown state is worked out only for the rows they keep."""
    active = [JobState.PENDING, JobState.RUNNING]
    completing = (JobNode.objects.filter(job__cluster=cluster, phase=NodePhase.EPILOG)
                  .exclude(job__state__in=active).values("job_id"))
    queued = Q(state__in=active) | Q(pk__in=completing)
    wanted = squeue_states(states)
    if not wanted:
        return rows.filter(queued)
    kept = rows.filter(queued | Q(end_time__gte=now - dt.timedelta(
        seconds=parse_config(cluster.config).min_job_age)))
    return kept if "ALL" in wanted else kept.filter(squeue_state__in=wanted)


def _squeue_in_order(rows: QuerySet, *, start: bool, now: dt.datetime) -> QuerySet:
    """squeue's order (formats.squeue_order) in SQL, so that a page reads only its jobs."""
    if start:
        return rows.filter(state=JobState.PENDING).order_by(_expected_start_shown_sql(now).asc(nulls_last=True),
                                                            "job_id")
    state_code = Case(*(When(squeue_state=state, then=Value(code)) for state, code in formats.STATE_CODES.items()),
                      default=Value(""), output_field=CharField())
    return rows.order_by("partition", state_code, "-priority", *squeue_first_sort(now))


def _job_selection(text: str) -> tuple[Q, Callable[[formats.SqueueJob], list[formats.SqueueJob]]]:
    """squeue -j: job ids (an array's job id selects all its records) and ``A_T`` (one task of array A,
    a pending one cut out of the array's record): the rows to read, and what each prints of them."""
    ids, tasks = [], {}
    for item in _names(text):
        array_id, task = arrays.task_of(item)
        if task is not None:
            tasks.setdefault(array_id, set()).add(task)
        elif _JOB_ID.fullmatch(item) and int(item) <= MAX_JOB_ID:
            ids.append(int(item))
    whole = set(ids)

    def shown(job: formats.SqueueJob) -> list[formats.SqueueJob]:
        if job.job_id in whole or job.array_job_id in whole:
            return [job]
        return [one for one in job.one_per_task() if one.array_task_id in tasks.get(job.array_job_id, ())]

    return Q(job_id__in=ids) | Q(array_job_id__in=ids + list(tasks)), shown


def squeue(cluster: SlurmCluster, *, now: dt.datetime, user: str = "", partition: str = "", states: str = "",
           jobs: str = "", long: bool = False, start: bool = False, format: str | None = None,
           page: slice | None = None, array_tasks: bool = False) -> Report:
    """``format``: an -o format string (formats.squeue_long_format makes one of -O's fields);
    ``array_tasks`` (squeue -r): an array's pending tasks one per line."""
    format_text = formats.squeue_format(long=long, start=start, format=format)
    fields = _squeue_fields(format_text)
    # The cluster's jobs read straight off its (cluster, job id) index, not through a subquery of
    # their own ids (which cost a quarter more and a sort over 10,000 pending jobs).
    rows = _squeue_selected(cluster, _squeue_rows(cluster, format_text, now), states=states, now=now)
    if user:
        rows = rows.filter(user_name__in=_names(user))
    if partition:
        rows = rows.filter(partition__in=_names(partition))
    shown = None
    if jobs:
        selection, shown = _job_selection(jobs)
        rows = rows.filter(selection)
    if page is not None:
        rows = _squeue_in_order(rows, start=start, now=now)
        # Tuples, not model instances, and only the page's: the queue page refreshes every 5 s.
        items = _squeue_items(rows[page].values_list(*fields), now, shown, array_tasks)
        return Report(formats.squeue_text(items, long=long, start=start, format=format), items,
                      formats.squeue_rows, total=rows.count())
    rows = rows.order_by(*squeue_first_sort(now))
    if shown is not None or array_tasks or start:
        items = _squeue_items(rows.values_list(*fields), now, shown, array_tasks)
        return Report(formats.squeue_text(items, long=long, start=start, format=format), items, formats.squeue_rows)
    # One line per row: laid out once per row and kept (formats.LineCache) while the row stays the
    # same, except a job that has started, whose TIME moves with ``now``.
    narrow = format_text in _SQUEUE_NARROW_FORMATS
    fetched, converted = _driver_rows(rows, _SQUEUE_SHOWN if narrow else fields)
    selected = formats.in_squeue_order(fetched, partition=itemgetter(1), state=itemgetter(4),
                                       priority=itemgetter(11))
    clocked = formats.squeue_reads_clock(format_text)

    def items(chosen: Sequence[tuple]) -> list[formats.SqueueJob]:
        full = converted(chosen)
        return _squeue_items(list(map(_squeue_widened, full)) if narrow else full, now, None, False)

    lines = _LINES.lines(("squeue", cluster.pk, format_text), selected,
                         lambda chosen: formats.squeue_lines(items(chosen), format_text),
                         keys=[row if row[5] is None and not clocked else (row, now) for row in selected])
    return Report(formats.report_text(formats.squeue_header(format_text), lines), selected,
                  lambda chosen: formats.squeue_rows(items(chosen)))


def _running_steps(cluster: SlurmCluster, *, user: str = "",
                   jobs: str = "") -> list[tuple[SlurmJob, list[JobStep], JobRun | None, JobNode | None]]:
    """The running jobs (by job id) with their current run's running steps, and the run and batch
    host while the batch script runs."""
    rows = SlurmJob.objects.filter(cluster=cluster, state=JobState.RUNNING).order_by("job_id")
    if user:
        rows = rows.filter(user_name__in=_names(user))
    if jobs:
        rows = rows.filter(job_id__in=_job_ids(jobs))
    found = []
    for job in rows:
        steps = list(JobStep.objects.filter(job=job, run_index=job.restart_count, state=JobState.RUNNING)
                     .prefetch_related("step_nodes"))
        run = JobRun.objects.filter(job=job, index=job.restart_count, batch_state=JobState.RUNNING).first()
        batch = JobNode.objects.filter(job=job, run_index=job.restart_count, batch_host=True).select_related(
            "node").first()
        found.append((job, steps, run, batch if run is not None else None))
    return found


def squeue_steps(cluster: SlurmCluster, *, now: dt.datetime, user: str = "", jobs: str = "") -> Report:
    """squeue -s: the running jobs' running steps, by job id, numbered steps before the batch script
    (slurmctld sorts the batch step's id, 0xfffffffb, after every other)."""
    items = []
    for job, steps, run, batch in _running_steps(cluster, user=user, jobs=jobs):
        def item(step_id: str, name: str, start: dt.datetime, nodelist: str) -> formats.SqueueJob:
            return formats.SqueueJob(job_id=step_id, partition=job.partition, name=name, user=job.user_name,
                                     state="RUNNING", elapsed_seconds=int((now - start).total_seconds()),
                                     nodelist=nodelist)

        items += [item(f"{job.job_id}.{step.step_id}", step.name, step.start_time, step.node_list) for step in steps]
        if batch is not None:
            items.append(item(f"{job.job_id}.batch", "batch", run.start_time, batch.node.name))
    return Report(formats.squeue_steps_text(items), items, formats.squeue_rows)


#: An srun that has not asked for its step for this long is no longer waiting (it asks every second).
PENDING_STEP_SECONDS = 10


def scontrol_steps(cluster: SlurmCluster, *, now: dt.datetime, step: str = "") -> Report:
    """``scontrol show step [JOBID[.STEPID]]``: the running steps, each job's batch script first
    and the sruns still waiting for theirs last (``JOBID.TDB``; fixtures/22.05/steps/scontrol-step-1.txt),
    UserId the job's submitter's uid. Raises ValueError for a ``step`` that is not
    JOBID, JOBID.STEPID or JOBID.batch."""
    job_id, _, step_id = step.partition(".")
    if step and not (job_id.isdigit() and (step_id == "" or step_id == "batch" or step_id.isdigit())):
        raise ValueError(f"Invalid job step id: {step}")
    items = []
    for job, steps, run, batch in _running_steps(cluster, jobs=job_id):
        if batch is not None and step_id in ("", "batch"):
            items.append(formats.ScontrolStep(
                step_id=f"{job.job_id}.batch", user_id=job.uid, start=run.start_time, partition=job.partition,
                node_list=batch.node.name, nodes=1, tasks=1, name="batch", batch=True))
        for running in steps:
            if step_id not in ("", str(running.step_id)):
                continue
            parts = list(running.step_nodes.all())
            cpus = sum(part.cpus for part in parts)
            items.append(formats.ScontrolStep(
                step_id=f"{job.job_id}.{running.step_id}", user_id=job.uid, start=running.start_time,
                partition=job.partition, node_list=running.node_list, nodes=len(parts), tasks=running.num_tasks,
                name=running.name, cpus=cpus, tres=_step_tres(cpus, sum(len(p.gpu_indices) for p in parts), len(parts)),
                srun_host=running.srun_host, srun_pid=running.srun_pid, tres_per_step=running.tres_per_step,
                tres_per_node=running.tres_per_node, distribution=running.distribution))
        if step_id == "":
            items += [formats.ScontrolStep(
                step_id=f"{job.job_id}.TDB", user_id=job.uid, start=None, partition=job.partition,
                node_list=waiting.node_list, nodes=waiting.num_nodes, tasks=waiting.num_tasks, name="",
                cpus=waiting.cpus, srun_host=waiting.srun_host, srun_pid=waiting.srun_pid)
                for waiting in PendingStep.objects.filter(
                    job=job, run_index=job.restart_count,
                    seen__gte=now - dt.timedelta(seconds=PENDING_STEP_SECONDS)).order_by("id")]
    return Report(formats.scontrol_step_text(items, asked=step), items, formats.scontrol_step_rows)


def scontrol_jobs(cluster: SlurmCluster, *, now: dt.datetime, job: str = "", one_liner: bool = False) -> Report:
    """``scontrol show job [JOBID|ARRAYID_TASK]`` (scontrol_job.py's layout). A pending job's TRES
    counts its nodes' whole memory without --mem* (MinMemoryNode=0), and LastSchedEval is the pass
    that last gave an eligible pending job its priority, the submission of one held or waiting on a
    dependency or a begin time, a started job's start. Raises ValueError for a ``job`` that is
    neither JOBID nor ARRAYID_TASK."""
    job_id, _, task = job.partition("_")
    if job and not (job_id.isdigit() and (task == "" or task.isdigit())):
        raise ValueError(f"Invalid job id specified: {job}")
    jobs = SlurmJob.objects.filter(cluster=cluster).order_by("job_id")
    task_id = int(task) if task else None
    if task:  # one task: its own record once started, else the array's record standing for it
        rows = list(jobs.filter(array_job_id=int(job_id)))
        jobs = [row for row in rows if row.array_task_id == task_id] or [
            row for row in rows if row.job_id == int(job_id) and task_id in arrays.expand(row.array_pending)]
    elif job:
        # an array's id: its record (the tasks still pending), then its started tasks, the last first
        jobs = sorted(jobs.filter(Q(job_id=int(job_id)) | Q(array_job_id=int(job_id))),
                      key=lambda row: (row.job_id != int(job_id), -row.job_id))
    config = parse_config(cluster.config)
    exempt = dt.timedelta(seconds=config.preempt_exempt_time or 0)
    node_memory = _node_memory_mb(cluster, now)
    hosts = dict(JobNode.objects.filter(job__cluster=cluster, batch_host=True, run_index=F("job__restart_count"))
                 .values_list("job_id", "node__name"))
    runs = {job_pk: (index, start, cpus, gpus) for job_pk, index, start, cpus, gpus in (
        JobRun.objects.filter(job__cluster=cluster).order_by("index")
        .values_list("job_id", "index", "start_time", "alloc_cpus", "alloc_gpus"))}
    items = [_scontrol_job(row, now=now, exempt=exempt, node_memory=node_memory,
                           memory_is_consumable=config.memory_is_consumable, batch_host=hosts.get(row.pk, ""),
                           last_run=runs.get(row.pk), last_main=cluster.last_main_time,
                           last_backfill=cluster.last_backfill_time, task_id=task_id)
             for row in jobs]
    report = Report(scontrol_job.scontrol_job_text(items, asked=job, one_liner=one_liner), items,
                    scontrol_job.scontrol_job_rows)
    report.stderr = scontrol_job.NOT_FOUND if job and not items else ""
    return report


def _node_memory_mb(cluster: SlurmCluster, now: dt.datetime) -> int:
    """The largest RealMemory of the cluster's nodes: what a pending job without --mem asks of each."""
    return max((node.memory_mb for node in snapshot.load_cluster(cluster, now=now).nodes.values()), default=0)


#: job_limits_check's reasons (partition limits) and an array's throttle: build_job_queue leaves such a
#: job out of the main scheduler's and backfill's queues (slurm-22.05 job_scheduler.c
#: ``_job_runnable_test2``, ``job_array_start_test``).
_OUTSIDE_QUEUE = frozenset({"PartitionConfig", "PartitionDown", "PartitionInactive", "PartitionNodeLimit",
                            "PartitionTimeLimit", "JobArrayTaskLimit"})


def _main_after_backfill(submitted: dt.datetime, last_main: dt.datetime | None, last_backfill: dt.datetime) -> bool:
    """Whether the main scheduler's last run came after the last backfill iteration for a job submitted in
    the second both ran in. A submission asks for a main run (queue_job_scheduler), which slurmctld's
    background thread makes at its next tick, while a backfill iteration that sees the job had begun in that
    second and holds the locks: the main run's build_job_queue clears the job's BACKFILL_SCHED flag after it
    (fixtures/22.05/node-range scontrol-wait-N3-4: submitted at 01:02:07, a start a year on from the
    iteration at 01:02:07, LastSchedEval=01:02:07 Scheduler=Main). Within one second the order is a race
    in slurmctld; this is the order the recordings show for a job submitted in that second."""
    second = submitted.replace(microsecond=0)
    return last_main is not None and last_main.replace(microsecond=0) == last_backfill.replace(microsecond=0) == second


def _scontrol_job(job: SlurmJob, *, now: dt.datetime, exempt: dt.timedelta, node_memory: int,
                  memory_is_consumable: bool, batch_host: str, last_run: tuple[int, dt.datetime, int, int] | None,
                  last_main: dt.datetime | None, last_backfill: dt.datetime | None,
                  task_id: int | None = None) -> scontrol_job.ScontrolJob:
    """``last_run``: its last run's index, start, CPUs and GPUs (an --exclusive job gets its nodes' all:
    constraint/scontrol-19), which NumCPUs and TRES show while it is that run. ``last_main`` and
    ``last_backfill``: the cluster's last main scheduler run and backfill iteration.
    ``memory_is_consumable``: SelectTypeParameters=CR_*_Memory."""
    allocated = last_run[2:] if last_run and last_run[0] == job.restart_count else None
    pending = job.state == JobState.PENDING
    # cancelled while pending: slurmctld keeps it as it waited, its start and end the cancel's
    # (fixtures/22.05/finished-jobs/scontrol-4, -5)
    never_ran = not pending and job.state != JobState.RUNNING and job.start_time is None
    waiting = (pending or never_ran) and (bool(job.hold) or job.reason in ("Dependency", "DependencyNeverSatisfied"))
    future = (pending or never_ran) and job.begin_time > now
    started = not pending and job.start_time is not None
    limit = dt.timedelta(minutes=job.time_limit) if job.time_limit is not None else None
    if never_ran:
        start = end = job.end_time
    elif started:
        kill_time = job.preempt_kill_time if job.state == JobState.RUNNING else None
        start, end = job.start_time, job.end_time or (
            formats.limit_end(job.start_time, job.time_limit, kill_time) if limit else None)
    elif future:  # its time limit after it (preempt-grace/REQUEUE ended-scontrol-v1: a requeued job)
        start, end = job.begin_time, job.begin_time + limit if limit else None
    else:
        start = expected_start_shown(job.expected_start, now)
        end = start + limit if start and limit else None
    if started:
        eligible = max(job.begin_time, job.accrue_time or job.begin_time)
    else:
        # a throttled array's record at its limit: slurmctld's job_array_start_test zeroes its begin_time
        eligible = None if waiting or job.reason == arrays.TASK_LIMIT else job.begin_time
    # LastSchedEval and Scheduler=: slurmctld's last look at the job, the one that started it (by the
    # main scheduler or a backfill iteration), a held or waiting job's submission (a requeued one's
    # last start: sched/b-scontrol-6), the main scheduler's last run since its submission (ntasks/
    # scontrol-4: 05:10:51) or, for one its queue leaves out, its submission (ntasks/scontrol-6) or, for an
    # array's throttled record, the pass that gave it its priority (array/scontrol-1), or a later backfill
    # iteration, "Backfill:*" (sched/a-scontrol-5)
    if started:
        evaluated, scheduler = job.start_time, "Backfill" if job.started_by_backfill else "Main"
    elif waiting or future:
        evaluated, scheduler = last_run[1] if last_run and job.restart_count else job.submit_time, "Main"
    elif job.reason == arrays.TASK_LIMIT:
        # an array's record its throttle holds back: the pass that gave it its priority (array/scontrol-1,
        # scontrol-1-4, scontrol-1-after: LastSchedEval two seconds after its submission)
        evaluated, scheduler = max(job.sched_eval_time or job.submit_time, job.submit_time), "Main"
    elif job.reason in _OUTSIDE_QUEUE:
        # slurmctld tried it as it came and no scheduler looks at it again (build_job_queue leaves it
        # out), however many priority calculations pass (finished-jobs/scontrol-7, range-limits
        # scontrol-pm-N1-4, ntasks scontrol-6/7: LastSchedEval is SubmitTime)
        evaluated, scheduler = job.submit_time, "Main"
    else:
        evaluated, scheduler = max(last_main or job.submit_time, job.submit_time), "Main"
        # backfill runs after the main scheduler in a pass that runs both, except the main run the job's
        # own submission asked for in that second (_main_after_backfill)
        if pending and last_backfill is not None and last_backfill >= evaluated and not _main_after_backfill(
                job.submit_time, last_main, last_backfill):
            evaluated, scheduler = last_backfill, "Backfill:*"
    # the --gres=gpu:9 kind: slurmctld made the record, then failed its node test (services.jobs)
    rejected = job.state == JobState.FAILED and job.reason == "BadConstraints" and not job.node_list
    # its record keeps the CPUs --cpus-per-gpu gave each task's --gpus-per-task, not counted in its NumCPUs
    # (small-diffs/scontrol-5: ``-n 3 --gpus-per-task=1 --cpus-per-gpu=100``, CPUs/Task=100 NumCPUs=3)
    cpus_per_task = max(job.cpus_per_task, job.gpus_per_task * job.cpus_per_gpu) if rejected else job.cpus_per_task
    asked = pending or rejected or never_ran  # TRES as requested (scontrol_job.job_cpus_and_tres)
    cpus, tres = scontrol_job.job_cpus_and_tres(
        requested=asked, allocated=allocated if started else None, num_nodes=job.num_nodes,
        nodes_from_tasks=job.nodes_from_tasks, num_tasks=job.num_tasks, cpus_per_task=job.cpus_per_task,
        gpus_per_job=job.gpus_per_job, gpus_per_task=job.gpus_per_task, gpus_per_node=job.gpus_per_node,
        mem_per_node=job.mem_per_node, mem_per_cpu=job.mem_per_cpu, mem_per_gpu=job.mem_per_gpu,
        node_memory_mb=node_memory, memory_is_consumable=memory_is_consumable, min_nodes=job.min_nodes,
        tasks_from_nodes=job.tasks_from_nodes)
    tres_per_job, tres_per_node, tres_per_task = scontrol_job.gpu_tres_per(
        request=job.gpu_request, per_job=job.gpus_per_job, per_node=job.gpus_per_node, per_task=job.gpus_per_task)
    array = ""
    if job.array_job_id is not None:
        task = arrays.task_text(pending=job.array_pending, task_id=job.array_task_id if task_id is None else task_id,
                                max_running=job.array_max_running)
        array = f"ArrayJobId={job.array_job_id} ArrayTaskId={task} ArrayTaskThrottle={job.array_max_running} "
    streams = jobenv.standard_streams(
        stdout_pattern=job.stdout_pattern, stderr_pattern=job.stderr_pattern, work_dir=job.work_dir,
        job_id=job.job_id, job_name=job.name, user=job.user_name, array_job_id=job.array_job_id,
        task_id=job.array_task_id if task_id is None else task_id)
    tasks = scontrol_job.shown_tasks(
        num_tasks=job.num_tasks, tasks_given=job.tasks_given, ntasks_per_node=job.ntasks_per_node,
        untested=scontrol_job.never_tested(state=job.state, reason=job.reason, node_list=job.node_list,
                                           start_time=job.start_time, hold=bool(job.hold), begin_time=job.begin_time,
                                           now=now),
        cpus_per_task=job.cpus_per_task, allocated_cpus=cpus if started and allocated else None)
    return scontrol_job.ScontrolJob(
        job_id=job.job_id, name=job.name, user=job.user_name, uid=job.uid, gid=job.gid,
        group=job.group_name, priority=job.priority, nice=job.nice,
        account=job.account, qos=job.qos, state=job.state, reason=job.reason, dependency=job.dependency,
        requeue=job.requeue, restarts=job.restart_count, batch=not job.interactive,
        # its raw wait status 1 (sacct's 1:0) as scontrol decodes it, WEXITSTATUS:WTERMSIG
        exit_code="0:1" if rejected else f"{job.exit_code or 0}:{job.exit_signal}",
        run_seconds=int(((job.end_time or now) - job.start_time).total_seconds()) if started else 0,
        time_limit=job.time_limit, submit=job.submit_time, eligible=eligible,
        accrue=job.accrue_time, start=start, end=end,
        preempt_eligible=start + exempt if started or never_ran else None, preempt_time=job.preempt_time,
        last_sched_eval=evaluated, scheduler=scheduler,
        partition=job.partition, alloc_node=job.alloc_node, alloc_sid=job.alloc_sid, req_nodes=job.req_nodes,
        exc_nodes=job.exc_nodes, node_list=job.node_list if started else "",
        sched_nodes=job.expected_nodes if pending else "",
        # an allocation's too: the first of its nodes (salloc/scontrol-6, sched/c-scontrol-14)
        batch_host=(batch_host or expand(job.node_list)[0]) if started and job.node_list else "",
        num_nodes=f"{job.num_nodes}-{job.max_nodes}" if pending and job.max_nodes else str(job.num_nodes),
        num_cpus=cpus,
        num_tasks="N/A" if tasks is None else str(tasks),
        cpus_per_task=cpus_per_task, ntasks_per_node=job.ntasks_per_node,
        # job_mgr.c _copy_job_desc_to_job_record: pn_min_cpus = MAX(it, cpus_per_task x ntasks_per_node)
        min_cpus_node=cpus_per_task * max(job.ntasks_per_node if job.num_tasks > 1 else 1, 1),
        tres=tres,
        mem_per_node=job.mem_per_node, mem_per_cpu=job.mem_per_cpu, features=job.features,
        exclusive=job.exclusive, command=scontrol_job.command_text(job.script_path, job.script_args),
        work_dir=job.work_dir, comment=job.comment, stdin=streams[0], stdout=streams[1], stderr=streams[2],
        tres_per_job=tres_per_job, tres_per_node=tres_per_node, tres_per_task=tres_per_task,
        cpus_per_gpu=job.cpus_per_gpu, mem_per_gpu=job.mem_per_gpu,
        mail_type=job.mail_type, mail_user=job.mail_user or job.user_name, array=array)


# --- sprio --------------------------------------------------------------------------------------

#: formats.SPRIO_ORDER (job id, partition) on a snapshot.breakdown_fields row.
_SPRIO_ROW_ORDER = itemgetter(0, 1)


def _eligible(cluster: SlurmCluster, now: dt.datetime):
    """Pending jobs past their begin time, not held, no dependency left, with a computed priority
    (what sprio lists)."""
    return SlurmJob.objects.filter(cluster=cluster, state=JobState.PENDING, hold="", dependency="",
                                   begin_time__lte=now, priority_time__isnull=False)


def _sprio_rows(cluster: SlurmCluster, now: dt.datetime, user: str, jobs: str, partition: str):
    rows = _eligible(cluster, now)
    if user:
        rows = rows.filter(user_name__in=_names(user))
    if jobs:
        rows = rows.filter(job_id__in=_job_ids(jobs))
    if partition:
        rows = rows.filter(partition__in=_names(partition))
    return rows


def _sprio_values(cluster: SlurmCluster, *, now: dt.datetime, fields: tuple[str, ...], user: str, jobs: str,
                  partition: str, page: slice | None) -> tuple[list[tuple], Callable[[Sequence[tuple]], list[tuple]]]:
    """The ``fields`` (snapshot.breakdown_fields) of the eligible, unheld pending jobs as _driver_rows
    gives them; only the ``page`` of them in sprio's order (job id, partition) when one is given."""
    rows = _sprio_rows(cluster, now, user, jobs, partition)
    if page is not None:
        rows = rows.order_by("job_id", "partition")[page]
    return _driver_rows(rows, fields)


#: sprio's and squeue's lines as last laid out, per process (formats.LineCache): a report read again
#: before the next pass changes its rows lays out only what changed.
_LINES = formats.LineCache()
#: sprio's texts as last built, per process (formats.ReportCache), under the fingerprint _SPRIO_VERSION
#: reads: each listed job's id and the moment its factors were computed (the pass writes both with
#: them, and holds, releases, nice and requeues clear that moment), with its priority and nice.
_REPORTS = formats.ReportCache()
_SPRIO_VERSION = ("job_id", "priority", "nice", "priority_time")
#: _SPRIO_VERSION's columns in a row of snapshot.BREAKDOWN_FIELDS followed by priority_time.
_SPRIO_VERSION_OF_ROW = itemgetter(0, 5, 7, 14)


def sprio(cluster: SlurmCluster, *, now: dt.datetime, long: bool = False, weights: bool = False, norm: bool = False,
          user: str = "", jobs: str = "", partition: str = "", page: slice | None = None) -> Report:
    config = parse_config(cluster.config)
    if config.priority_type != "priority/multifactor":
        text = (f"You are not running a supported priority plugin\n({config.priority_type}).\n"
                "Only 'priority/multifactor' is supported.\n")
        return Report(text)
    if weights:
        return Report(formats.sprio_text([], config, long=long, norm=norm, with_user=bool(user), weights=True))
    fields = snapshot.breakdown_fields(config)
    factor_weights = snapshot.priority_weights(config)
    format_text = formats.sprio_format(config, long=long, norm=norm, with_user=bool(user))

    def breakdowns(chosen: Sequence[tuple]) -> list[PriorityBreakdown]:
        return [snapshot.breakdown_from_row(row, factor_weights) for row in chosen]

    def to_rows(chosen: Sequence[tuple]) -> list[dict]:
        return formats.sprio_rows(breakdowns(chosen))

    # The whole queue's text is kept between reads (a page's few rows are laid out afresh; TRES terms
    # are a dict, decoded for every row, and no key of a LineCache).
    kept = page is None and "factor_tres" not in fields
    report_key = ("sprio", cluster.pk, format_text, factor_weights)
    # Each filtered read kept apart: ``sprio -j 5`` between two reads of the queue leaves the queue's.
    text_key = (*report_key, user, jobs, partition)
    if kept:
        versions, _ = _sprio_values(cluster, now=now, fields=_SPRIO_VERSION, user=user, jobs=jobs,
                                    partition=partition, page=None)
        if jobs and not versions:
            return Report(formats.SPRIO_NO_JOBS + "\n")
        versions.sort(key=itemgetter(0))  # job ids are unique in a cluster: sprio's order
        last = _REPORTS.get(text_key, versions)
        if last is not None:
            return Report(last[0], last[1], to_rows)
        fields = (*fields, "priority_time")
    rows, converted = _sprio_values(cluster, now=now, fields=fields, user=user, jobs=jobs, partition=partition,
                                    page=page)
    if "factor_tres" in fields:
        rows = converted(rows)
    total = (_sprio_rows(cluster, now, user, jobs, partition).count()
             if page is not None and (page.start or len(rows) == page.stop) else None)
    if jobs and not rows and not total:
        return Report(formats.SPRIO_NO_JOBS + "\n")
    rows.sort(key=_SPRIO_ROW_ORDER)

    def lay_out(chosen: Sequence[tuple]) -> list[str]:
        return formats.sprio_lines(breakdowns(chosen), format_text)

    if not kept:
        return Report(formats.report_text(formats.sprio_header(format_text), lay_out(rows)), rows, to_rows,
                      total=total)
    # The versions these rows give, not those read before them: a pass may have ended in between.
    versions = list(map(_SPRIO_VERSION_OF_ROW, rows))
    rows = [row[:-1] for row in rows]  # priority_time is no breakdown field
    text = formats.report_text(formats.sprio_header(format_text), _LINES.lines(report_key, rows, lay_out))
    _REPORTS.put(text_key, versions, text, rows)
    return Report(text, rows, to_rows)


# --- sshare -------------------------------------------------------------------------------------

#: Slurm's built-in TRES in id order (slurmdb tres table), before AccountingStorageTRES's.
_BUILTIN_TRES = ("cpu", "mem", "energy", "node", "billing", "fs/disk", "vmem", "pages")
#: A job without a time limit (MaxTime=INFINITE) is charged for a year (slurmctld's end_time).
_NO_LIMIT = dt.timedelta(days=365)


def _tres_run_minutes(cluster: SlurmCluster, state: snapshot.ClusterState) -> dict[str, str]:
    """sshare's TRESRunMins per association key: each running job's TRES times the seconds left of
    its time limit as of the last decay (slurmctld subtracts the elapsed time at each decay run),
    summed up the tree, in minutes."""
    names = _BUILTIN_TRES + tuple(name for name in state.config.accounting_storage_tres if name not in _BUILTIN_TRES)
    parents = {assoc.pk: assoc.parent_id for assoc in state.associations}
    seconds: dict[int, dict[str, float]] = {pk: dict.fromkeys(names, 0.0) for pk in parents}
    decayed_at = cluster.last_decay_time
    for job in SlurmJob.objects.filter(cluster=cluster, state=JobState.RUNNING, start_time__isnull=False):
        end = job.start_time + (dt.timedelta(minutes=job.time_limit) if job.time_limit is not None else _NO_LIMIT)
        left = (end - max(job.start_time, decayed_at or job.start_time)).total_seconds()
        assoc = state.association_for(account=job.account, user=job.user_name, partition=job.partition)
        pk = assoc.pk if assoc is not None else None
        while pk is not None:
            for name, count in snapshot.job_tres(job, state).items():
                if name in seconds[pk]:
                    seconds[pk][name] += count * max(left, 0.0)
            pk = parents[pk]
    return {str(pk): ",".join(f"{name}={int(value) // 60}" for name, value in tres.items())
            for pk, tres in seconds.items()}


def sshare(cluster: SlurmCluster, *, now: dt.datetime, viewer: str, long: bool = False, all_users: bool = False,
           accounts: str = "", users: str = "") -> Report:
    state = snapshot.load_cluster(cluster, now=now)
    rows = snapshot.compute_fairshare(state).rows
    if cluster.priority_norms:  # a decay run has been: FairShare and LevelFS are its until the next
        rows = fairshare.as_last_run(rows, {str(a.pk): (a.fs_factor, a.level_fs) for a in state.associations})
    if accounts:
        wanted = set(_names(accounts))
        rows = [row for row in rows if row.account in wanted]
    user = viewer
    if users:
        wanted_users = set(_names(users))
        rows = [row for row in rows if row.user is None or row.user in wanted_users]
        all_users = True
    text = formats.sshare_text(rows, fair_tree=state.config.fair_tree, long=long, user=user, all_users=all_users,
                               tres_run_minutes=_tres_run_minutes(cluster, state) if long else None,
                               grp_tres_mins={str(a.pk): format_tres(a.settings["grp_tres_mins"])
                                              for a in state.associations if a.settings.get("grp_tres_mins")})
    return Report(text, rows, lambda chosen: formats.sshare_rows(chosen, user=user, all_users=all_users))


# --- sinfo --------------------------------------------------------------------------------------

_AVAIL = {"UP": "up", "DOWN": "down", "INACTIVE": "inact", "DRAIN": "drain"}


def _running_allocations(cluster: SlurmCluster) -> list[tuple[int, int, list[int], int]]:
    """What running jobs hold now: (node pk, CPUs, GPU indices, job pk) of each job's current run on
    each node its epilog has not finished on."""
    return list(JobNode.objects.filter(job__cluster=cluster, job__state=JobState.RUNNING,
                                       run_index=F("job__restart_count"))
                .exclude(phase=NodePhase.DONE).values_list("node_id", "cpus", "gpu_indices", "job_id"))


@dataclass(frozen=True)
class _NodeCondition:
    responding: bool
    reason: str
    reason_user: str
    reason_time: dt.datetime | None


def _node_conditions(cluster: SlurmCluster, state: snapshot.ClusterState) -> dict[int, _NodeCondition]:
    """Each node's reason with who set it and when (the cluster's audit), or Not responding (by
    ``slurm``, at its last heartbeat) for an UP node whose agent stopped answering."""
    set_by = {}
    for entry in ClusterAuditEntry.objects.filter(cluster=cluster, subject__startswith="node ").order_by("time", "id"):
        set_by[entry.subject[len("node "):]] = (entry.actor, entry.time)
    heartbeats = dict(Node.objects.filter(pk__in=list(state.nodes)).values_list("pk", "last_heartbeat"))
    conditions = {}
    for pk, node in state.nodes.items():
        responding = node.available or node.state != NodeState.UP
        if responding:
            user, since = set_by.get(node.name, ("root", None)) if node.reason else ("", None)
            conditions[pk] = _NodeCondition(True, node.reason, user, since)
        else:
            conditions[pk] = _NodeCondition(False, "Not responding", "slurm", heartbeats.get(pk))
    return conditions


def sinfo_partitions(cluster: SlurmCluster, *, now: dt.datetime,
                     partition: str = "") -> list[sinfo_layout.SinfoPartition]:
    """The cluster's partitions with their nodes' states, CPUs allocated to running jobs counted per
    node; a node's reason with who set it and when (the cluster's audit), or Not responding."""
    state = snapshot.load_cluster(cluster, now=now)
    allocated: dict[int, int] = {}
    for node_id, cpus, _, _ in _running_allocations(cluster):
        allocated[node_id] = allocated.get(node_id, 0) + cpus
    conditions = _node_conditions(cluster, state)
    nodes = {}
    for pk, node in state.nodes.items():
        condition = conditions[pk]
        nodes[pk] = sinfo_layout.SinfoNode(
            name=node.name, cpus=node.cpus, memory_mb=node.memory_mb, reason=condition.reason,
            reason_user=condition.reason_user, available_features=node.available_features,
            active_features=node.active_features, reason_time=condition.reason_time, state=sinfo_layout.node_state(
                responding=condition.responding, drain=node.state == NodeState.DRAIN,
                down=node.state == NodeState.DOWN, allocated_cpus=allocated.get(pk, 0), cpus=node.cpus))
    wanted = set(_names(partition)) if partition else None
    return [sinfo_layout.SinfoPartition(
        name=name, default=name == cluster.default_partition, avail=_AVAIL.get(info.options.state, "up"),
        time_limit_minutes=info.options.max_time_minutes,
        nodes=tuple(sorted((nodes[pk] for pk in info.node_pks), key=lambda n: n.name)))
        for name, info in state.partitions.items() if wanted is None or name in wanted]


def sinfo(cluster: SlurmCluster, *, now: dt.datetime, node_oriented: bool = False, long: bool = False,
          summarize: bool = False, reasons: bool = False, partition: str = "") -> Report:
    partitions = sinfo_partitions(cluster, now=now, partition=partition)
    text = sinfo_layout.sinfo_text(partitions, now=now, node_oriented=node_oriented, long=long, summarize=summarize,
                                   reasons=reasons)
    return Report(text, partitions, sinfo_layout.sinfo_rows)


def scontrol_partitions(cluster: SlurmCluster, *, now: dt.datetime, partition: str = "",
                        one_liner: bool = False) -> Report:
    """``scontrol [-o] show partition [NAME]`` (scontrol_partition.py's layout), in the cluster's
    partition order; an unknown NAME is no record and scontrol's ``Partition NAME not found`` (missing)."""
    state = snapshot.load_cluster(cluster, now=now)
    items = [scontrol_partition.ScontrolPartition(
        name=name, default=name == cluster.default_partition, options=info.options,
        nodes=compress(sorted(state.nodes[pk].name for pk in info.node_pks)), totals=info.tres_totals,
        cluster_preempt_mode=state.config.preempt_base_mode, max_tres="MAX_TRES" in state.config.priority_flags)
        for name, info in state.partitions.items() if partition in ("", name)]
    report = Report(scontrol_partition.scontrol_partition_text(items, asked=partition, one_liner=one_liner), items,
                    scontrol_partition.scontrol_partition_rows)
    if partition and not items:
        report.missing = [report.text.rstrip("\n")]
    return report


# --- scontrol show node -------------------------------------------------------------------------

#: A bracket closed before anything but a comma: a list hostlist_create refuses ("gpu[2-3]x";
#: fixtures/22.05/node/bad-syntax), which trainhub's hostlist would read as names with a suffix.
_AFTER_BRACKET = re.compile(r"\][^,]")


#: The most names a node list may give scontrol show node: Slurm's hostlist refuses a range of more
#: (hostlist.c MAX_RANGE), and each name no node has is a line of the answer.
MAX_ASKED_NODES = 64 * 1024


def _asked_nodes(nodes: str, known: Sequence[str]) -> list[str]:
    """The names ``nodes`` lists, in its order (a name twice twice), or every node by name; ValueError
    with scontrol's message for a list it cannot parse or one of more than MAX_ASKED_NODES names."""
    if not nodes:
        return list(known)
    try:
        if _AFTER_BRACKET.search(nodes):
            raise HostlistError(nodes)
        names = expand(nodes)
    except HostlistError as exc:
        raise ValueError(f"unable to parse node list {nodes}") from exc
    if len(names) > MAX_ASKED_NODES:
        raise ValueError(f"unable to parse node list {nodes}")
    return names


def scontrol_nodes(cluster: SlurmCluster, *, now: dt.datetime, nodes: str = "", one_liner: bool = False) -> Report:
    """``scontrol [-o] show node[s] [NAMES]`` (scontrol_node.py's layout and its rules for what only
    the machine knows): each node asked, a name no node has its ``Node NAME not found`` line, which
    also makes the report's ``missing``. CPUs, GPUs and (where memory is consumable, CR_*_Memory)
    memory count what running jobs hold. Raises ValueError for a list scontrol cannot parse."""
    state = snapshot.load_cluster(cluster, now=now)
    by_name = {node.name: node for node in state.nodes.values()}
    asked = _asked_nodes(nodes, list(by_name))
    pks = {by_name[name].pk for name in asked if name in by_name}
    held: dict[int, list[int]] = {pk: [0, 0, 0] for pk in pks}
    allocations = [row for row in _running_allocations(cluster) if row[0] in pks]
    jobs = {}
    if state.config.memory_is_consumable:
        jobs = SlurmJob.objects.in_bulk({job_pk for _, _, _, job_pk in allocations})
    for node_pk, cpus, gpu_indices, job_pk in allocations:
        totals = held[node_pk]
        totals[0] += cpus
        totals[1] += len(gpu_indices)
        totals[2] += snapshot.allocated_memory_mb(jobs[job_pk], state, cpus, len(gpu_indices)) if job_pk in jobs else 0
    conditions = _node_conditions(cluster, state)
    machines = Node.objects.in_bulk(pks)
    last_ends = dict(JobNode.objects.filter(node_id__in=pks, job__cluster=cluster, job__end_time__isnull=False)
                     .order_by().values("node_id").annotate(last=Max("job__end_time"))
                     .values_list("node_id", "last"))
    partitions: dict[int, list[str]] = {pk: [] for pk in pks}
    for name, info in state.partitions.items():
        for pk in info.node_pks:
            if pk in partitions:
                partitions[pk].append(name)
    items: list[scontrol_node.ScontrolNode | str] = []
    shown: dict[int, scontrol_node.ScontrolNode] = {}
    for name in asked:
        node = by_name.get(name)
        if node is None:
            items.append(name)
            continue
        if node.pk not in shown:
            machine, condition = machines[node.pk], conditions[node.pk]
            cpus, gpus, memory = held[node.pk]
            started = machine.joined_at or cluster.create_time
            boot = machine.facts.get("bootTime")
            shown[node.pk] = scontrol_node.ScontrolNode(
                name=node.name, cpus=node.cpus, alloc_cpus=cpus, real_memory_mb=node.memory_mb, alloc_memory_mb=memory,
                gres=str(GresRequest("gpu", node.gpu_type, node.gpus)) if node.gpus else "", gpus=node.gpus,
                alloc_gpus=gpus, available_features=node.available_features, active_features=node.active_features,
                state=scontrol_node.node_state(responding=condition.responding, drain=node.state == NodeState.DRAIN,
                                               down=node.state == NodeState.DOWN, alloc_cpus=cpus, cpus=node.cpus),
                weight=node.weight, partitions=tuple(partitions[node.pk]), reason=condition.reason,
                reason_user=condition.reason_user, reason_time=condition.reason_time,
                node_addr=machine.peer_address, hostname=machine.hostname,
                arch=str(machine.facts.get("arch") or scontrol_node.DEFAULT_ARCH),
                os=str(machine.facts.get("os") or scontrol_node.DEFAULT_OS),
                boot_time=dt.datetime.fromtimestamp(boot, dt.UTC) if isinstance(boot, int | float) else started,
                slurmd_start_time=started, last_busy_time=last_ends.get(node.pk) or started,
                billing=scontrol_node.node_billing(
                    {"cpu": node.cpus, "mem": node.memory_mb, "node": 1, "gres/gpu": node.gpus},
                    [state.partitions[name].billing_weights for name in partitions[node.pk]],
                    max_tres="MAX_TRES" in state.config.priority_flags))
        items.append(shown[node.pk])
    report = Report(scontrol_node.scontrol_node_text(items, one_liner=one_liner), items,
                    scontrol_node.scontrol_node_rows)
    report.missing = [scontrol_node.not_found(item).rstrip("\n") for item in items if isinstance(item, str)]
    return report


# --- sacct --------------------------------------------------------------------------------------

def _cancellers(job: SlurmJob, runs: Sequence[JobRun]) -> set[str]:
    """Who cancelled the job or one of its runs ("by NAME" in its state_desc)."""
    return {desc[3:] for desc in (job.state_desc, *(run.state_desc for run in runs)) if desc.startswith("by ")}


def _run_record(job: SlurmJob, run: JobRun | None, now: dt.datetime, uids: Mapping[str, int],
                req_tres: str = "", memory_is_consumable: bool = False) -> formats.SacctJob:
    """``uids``: the uid of each canceller other than the job's user, which sacct prints for them
    (``CANCELLED by 1001``); a user since deleted keeps their name. ``req_tres``: its ReqTRES. Where
    memory is a consumable resource the run's AllocTRES holds the memory the job asked for it:
    --mem-per-gpu x its GPUs, --mem x its nodes, --mem-per-cpu x its CPUs (fixtures/22.05/gpus-mem/sacct.txt:
    ``-N 2 --gpus=3 --mem-per-gpu=1000`` mem=3000M, ``--mem=15000`` mem=15000M; a job without any takes
    none in trainhub: snapshot.job_memory_mb)."""
    state = run.state if run else job.state
    desc = run.state_desc if run else job.state_desc
    if state == JobState.CANCELLED and desc.startswith("by "):
        name = desc[3:]
        state = f"CANCELLED by {job.uid if name == job.user_name else uids.get(name, name)}"
    # a refused job's record started and ended at its submission (finished-jobs/sacct-x-more.txt)
    start = run.start_time if run else job.start_time
    end = (run.end_time if run else job.end_time)
    elapsed = int(((end or now) - start).total_seconds()) if start else 0
    exit_code, signal = (run.exit_code, run.exit_signal) if run else (job.exit_code, job.exit_signal)
    if run and run.batch_state == JobState.CANCELLED:
        exit_code, signal = 0, 0  # the signal that stopped it is its batch step's (fixtures/22.05/srun/sacct.txt)
    tres = {"cpu": run.alloc_cpus, "node": run.num_nodes, "billing": int(run.billing),
            "gres/gpu": run.alloc_gpus} if run else {}
    if run and memory_is_consumable:
        tres["mem"] = (job.mem_per_gpu * run.alloc_gpus or job.mem_per_node * run.num_nodes
                       or job.mem_per_cpu * run.alloc_cpus)
    # a job that never ran: what it asked (fixtures/22.05/node-range/sacct.txt: ``-N 2-4`` cancelled while it
    # waited, 1 CPU on 2 nodes; ntasks/sacct.txt: ``-n 65`` 65 on 1)
    asked_cpus, asked_nodes = scontrol_job.requested_cpus_and_nodes(
        num_tasks=job.num_tasks, cpus_per_task=job.cpus_per_task, tasks_from_nodes=job.tasks_from_nodes,
        num_nodes=job.num_nodes, min_nodes=job.min_nodes, nodes_from_tasks=job.nodes_from_tasks)
    cpus, nodes = (run.alloc_cpus, run.num_nodes) if run else (asked_cpus, asked_nodes)
    return formats.SacctJob(
        job_id=arrays.display_id(job_id=job.job_id, array_job_id=job.array_job_id, pending=job.array_pending,
                                 task_id=job.array_task_id, max_running=job.array_max_running),
        job_id_raw=str(job.job_id), name=job.name, partition=job.partition, account=job.account,
        alloc_cpus=cpus, state=state,
        exit_code=f"{exit_code or 0}:{signal or 0}", user=job.user_name, elapsed_seconds=max(elapsed, 0),
        time_limit_minutes=job.time_limit, nnodes=nodes,
        nodelist=run.node_list if run else "None assigned", qos=job.qos, priority=job.priority,
        restarts=job.restart_count, submit=run.submit_time if run else job.submit_time, start=start, end=end,
        alloc_tres=format_tres(tres, by_name=True), req_tres=req_tres, req_cpus=asked_cpus, req_nodes=asked_nodes,
        alloc_nodes=run.num_nodes if run else 0,
        reason=formats.accounting_reason(reason_prev_db=job.reason_prev_db, reason_recorded=job.reason_recorded,
                                         started=run is not None))


def _requested_tres(cluster: SlurmCluster, now: dt.datetime) -> Callable[[SlurmJob], str]:
    """sacct's ReqTRES of each job: scontrol's TRES as the job asked it (scontrol_job.job_cpus_and_tres,
    requested), by name, as slurmdbd keeps slurmctld's tres_req_str (fixtures/22.05/gputype/sacct.txt:
    a running ``-n 20`` asked node=1 and its nodes' memory, a refused typed request its GPUs untyped)."""
    node_memory, consumable = _node_memory_mb(cluster, now), parse_config(cluster.config).memory_is_consumable

    def requested(job: SlurmJob) -> str:
        return scontrol_job.tres_by_name(scontrol_job.job_cpus_and_tres(
            requested=True, allocated=None, num_nodes=job.num_nodes, nodes_from_tasks=job.nodes_from_tasks,
            num_tasks=job.num_tasks, cpus_per_task=job.cpus_per_task, gpus_per_job=job.gpus_per_job,
            gpus_per_task=job.gpus_per_task, gpus_per_node=job.gpus_per_node, mem_per_node=job.mem_per_node,
            mem_per_cpu=job.mem_per_cpu, mem_per_gpu=job.mem_per_gpu, node_memory_mb=node_memory,
            memory_is_consumable=consumable, min_nodes=job.min_nodes, tasks_from_nodes=job.tasks_from_nodes)[1])
    return requested


def _step_tres(cpus: int, gpus: int, nodes: int) -> str:
    """A step's AllocTRES: no billing, and ``mem=0`` where the job requested no memory."""
    return f"cpu={cpus}," + (f"gres/gpu={gpus}," if gpus else "") + f"mem=0,node={nodes}"


def _step_records(job: SlurmJob, run: JobRun, now: dt.datetime) -> list[formats.SacctJob]:
    """The run's batch script (``JOBID.batch``, on the batch host) and its srun steps (``JOBID.N``,
    with the CPUs each held: all of the job's on its nodes, or what ``srun --exact`` took)."""
    nodes = {pk: (name, cpus, len(gpus)) for pk, name, cpus, gpus in JobNode.objects.filter(
        job=job, run_index=run.index).values_list("pk", "node__name", "cpus", "gpu_indices")}
    batch = next((pk for pk in JobNode.objects.filter(job=job, run_index=run.index, batch_host=True)
                  .values_list("pk", flat=True)), None)
    records = []

    def record(job_id: str, name: str, state: str, exit_code: int | None, signal: int, start: dt.datetime,
               end: dt.datetime | None, on: list[int], ntasks: int, cpus: int, gpus: int) -> formats.SacctJob:
        return formats.SacctJob(
            job_id=job_id, name=name, partition="", account=job.account, alloc_cpus=cpus, state=state,
            exit_code=f"{exit_code or 0}:{signal or 0}", elapsed_seconds=int(((end or now) - start).total_seconds()),
            nnodes=len(on), nodelist=compress(nodes[pk][0] for pk in on), start=start, end=end, ntasks=ntasks,
            submit=start, alloc_tres=_step_tres(cpus, gpus, len(on)))

    if run.batch_state and batch is not None:
        records.append(record(f"{job.job_id}.batch", "batch", run.batch_state, run.batch_exit_code,
                              run.batch_exit_signal, run.start_time,
                              run.end_time if run.batch_state != JobState.RUNNING else None, [batch], 1,
                              nodes[batch][1], nodes[batch][2]))
    for step in JobStep.objects.filter(job=job, run_index=run.index).prefetch_related(
            Prefetch("step_nodes", queryset=StepNode.objects.order_by("node_index"))):
        parts = list(step.step_nodes.all())
        # A step its srun aborted (two Ctrl-C: SIGINT to the tasks) was cancelled by the job's user
        # (srun-abort/sacct-p.txt: ``CANCELLED by 1001``, 0:2); one stopped with the job (scancel, a time
        # limit: srun passes SIGTERM on) by nobody (srun/sacct.txt, srun-timeout/sacct-p.txt: ``CANCELLED``).
        stopped = step.state == JobState.CANCELLED and any(
            part.stop_requested and part.stop_signal == SIGINT for part in parts)
        state = f"CANCELLED by {job.uid}" if stopped else step.state
        records.append(record(f"{job.job_id}.{step.step_id}", step.name, state, step.exit_code, step.exit_signal,
                              step.start_time, step.end_time, [part.job_node_id for part in parts], step.num_tasks,
                              sum(part.cpus for part in parts), sum(len(part.gpu_indices) for part in parts)))
    return records


def _accounting(record: formats.SacctJob, run: JobRun | None) -> dict:
    """Per-run accounting beyond sacct's default columns: CPU time, GPU-seconds, max memory."""
    elapsed = record.elapsed_seconds
    return {"elapsedSeconds": elapsed, "cpuSeconds": elapsed * record.alloc_cpus,
            "gpuSeconds": elapsed * (run.alloc_gpus if run else 0),
            "maxRssKb": run.max_rss_kb if run else None}


#: What a job's sacct records read of it (_run_record): a third of its columns - not its script,
#: environment or priority factors - which takes 40 % off the CPU of a 500-job page.
_SACCT_JOB_FIELDS = ("cluster_id", "job_id", "name", "user_name", "account", "partition", "qos", "num_nodes",
                     "time_limit", "state", "state_desc", "priority", "restart_count", "submit_time", "start_time",
                     "end_time", "exit_code", "exit_signal", "array_job_id", "array_task_id", "array_pending",
                     "array_max_running", "reason", "reason_prev_db", "reason_recorded",
                     # ReqTRES's (_requested_tres)
                     "num_tasks", "cpus_per_task", "nodes_from_tasks", "gpus_per_job", "gpus_per_task",
                     "gpus_per_node", "mem_per_node", "mem_per_cpu", "mem_per_gpu", "min_nodes", "tasks_from_nodes")


def sacct(cluster: SlurmCluster, *, now: dt.datetime, viewer: str, jobs: str = "", user: str = "",
          all_users: bool = False, duplicates: bool = False, starttime: dt.datetime | None = None,
          endtime: dt.datetime | None = None, state: str = "", brief: bool = False, allocations: bool = False,
          parsable: bool = False, fields: list[str] | None = None, page: slice | None = None) -> Report:
    # Without -j, sacct's time window leaves out a job that has never been eligible (held, --begin ahead, a
    # dependency; fixtures/22.05/scenario/sacct-a-running.txt), an array's record while its ``%`` limit holds
    # its tasks back (EligibleTime=Unknown; fixtures/22.05/array/sacct.txt) and a job that ended so, cancelled
    # while held, before its --begin or its dependency (fixtures/22.05/node-range/sacct.txt: no held-N2-4,
    # begin-N2-4; 22.05.8: an afterok job cancelled while its dependency waited is not listed). -j
    # lists them all the same (22.05.8: ``sacct -j`` of a held, a --begin, a dependent job and an array's
    # throttled tasks shows them PENDING, Start Unknown, and CANCELLED once cancelled).
    never_eligible = (Q(state=JobState.PENDING) & (~Q(hold="") | ~Q(dependency="") | Q(begin_time__gt=now)
                                                   | Q(reason=arrays.TASK_LIMIT))
                      | ~Q(state=JobState.PENDING) & (~Q(hold="") | ~Q(dependency="")
                                                      | Q(begin_time__gt=F("end_time"))))
    rows = SlurmJob.objects.filter(cluster=cluster).only(*_SACCT_JOB_FIELDS)
    if jobs:
        rows = rows.filter(_job_selection(jobs)[0])
    else:
        rows = rows.exclude(never_eligible & ~Exists(JobRun.objects.filter(job=OuterRef("pk"))))
        since = starttime or now.replace(hour=0, minute=0, second=0, microsecond=0)
        rows = rows.filter(Q(end_time__isnull=True) | Q(end_time__gte=since))
        if endtime:
            rows = rows.filter(submit_time__lte=endtime)
    if user:
        rows = rows.filter(user_name__in=_names(user))
    elif not all_users and not jobs:
        rows = rows.filter(user_name=viewer)
    # An array's records together, its tasks in index order, the pending record after them.
    rows = rows.annotate(array_order=Coalesce("array_job_id", "job_id")).order_by(
        "array_order", F("array_task_id").asc(nulls_last=True), "job_id")
    total = None
    if page is not None and not state and not duplicates and allocations:
        # One record per job: the page's jobs are the page's records.
        total, rows, page = rows.count(), rows[page], None
    jobs_by_pk = {job.pk: job for job in rows}
    runs: dict[int, list[JobRun]] = {}
    for run in JobRun.objects.filter(job_id__in=list(jobs_by_pk)).order_by("job_id", "index"):
        runs.setdefault(run.job_id, []).append(run)
    wanted = _states(state)
    others = {name for pk, job in jobs_by_pk.items() for name in _cancellers(job, runs.get(pk, []))
              if name != job.user_name}
    uids = {name: account.uid for name, account in posix_accounts_by_username(usernames=sorted(others)).items()
            } if others else {}
    requested = (_requested_tres(cluster, now) if any(item.partition("%")[0].lower() == "reqtres"
                                                       for item in fields or ()) else None)
    consumable = parse_config(cluster.config).memory_is_consumable
    records, extra = [], []
    for pk, job in jobs_by_pk.items():
        req_tres = requested(job) if requested else ""
        job_runs = runs.get(pk, [])
        # None stands for the job's own record: it ended before it ever ran, or pends and has never
        # run. A requeued job shows its last run (PREEMPTED, REQUEUED ...) until it runs again.
        requeued = job.state == JobState.PENDING and job_runs
        current = job_runs[-1] if job_runs and (job_runs[-1].index == job.restart_count or requeued) else None
        for run in (job_runs + ([] if current else [None])) if duplicates else [current]:
            record = _run_record(job, run, now, uids, req_tres, consumable)
            if wanted and record.state.split()[0] not in wanted:
                continue
            records.append(record)
            extra.append(_accounting(record, run))
            for step in [] if allocations or run is None else _step_records(job, run, now):
                records.append(step)
                extra.append(_accounting(step, None))
    selected = ["jobid", "state", "exitcode"] if brief else fields

    def to_rows(chosen: Sequence[tuple[formats.SacctJob, dict]]) -> list[dict]:
        rows_json = formats.sacct_rows([record for record, _ in chosen], fields=selected)
        return [{**row, **more} for row, (_, more) in zip(rows_json, chosen)]

    chosen = list(zip(records, extra))
    if page is not None:
        total, records, chosen = len(chosen), records[page], chosen[page]
    text = formats.sacct_text(records, fields=selected, parsable="ending" if parsable else None)
    return Report(text, chosen, to_rows, total=total)


# --- one job's priority, factor by factor ---------------------------------------------------------

@dataclass(frozen=True)
class FactorLine:
    name: str
    factor: float
    weight: float
    contribution: float
    why: str


def _duration(seconds: float) -> str:
    seconds = int(seconds)
    days, rest = divmod(seconds, 86400)
    return (f"{days}-" if days else "") + f"{rest // 3600:02d}:{rest % 3600 // 60:02d}:{rest % 60:02d}"


def job_priority(job: SlurmJob, *, now: dt.datetime) -> tuple[list[FactorLine], PriorityBreakdown | None]:
    """Each factor of the job's last computed priority: its value, weight, contribution and why."""
    if job.priority_time is None:
        return [], None
    state = snapshot.load_cluster(job.cluster, now=now)
    config = state.config
    breakdown = snapshot.breakdown_from_row(tuple(getattr(job, field) for field in snapshot.breakdown_fields(config)),
                                            snapshot.priority_weights(config))
    computed = job.priority_time
    assoc = state.association_for(account=job.account, user=job.user_name, partition=job.partition)
    share = next((row for row in snapshot.compute_fairshare(state).rows if assoc and row.key == str(assoc.pk)), None)
    partition = state.partitions.get(job.partition)
    qos_priorities = {name: int(row.settings.get("priority", 0)) for name, row in state.qos.items()}
    assoc_priorities = [int(a.settings.get("priority", 0)) for a in state.associations]
    waited = (computed - job.accrue_time).total_seconds() if job.accrue_time else None
    why = {
        "age": (f"eligible since {job.accrue_time:%Y-%m-%d %H:%M:%S}: waited {_duration(waited)} of PriorityMaxAge "
                f"{_duration(config.priority_max_age)}" if waited is not None
                else "accrues no age: held or before its begin time"),
        "assoc": f"association Priority {int(assoc.settings.get('priority', 0)) if assoc else 0} of the highest "
                 f"{max(assoc_priorities, default=0)}",
        "fairshare": (f"{'Fair Tree' if config.fair_tree else 'classic fair-share'} for {job.user_name}@{job.account}:"
                      f" shares {share.norm_shares:.4f} of its level, usage {share.effective_usage:.4f} of its "
                      f"parent's (Level FS {'inf' if share.level_fs is None or share.level_fs == float('inf') else f'{share.level_fs:.4f}'})"
                      if share else "no association: factor 0"),
        "jobsize": (f"{job.num_nodes} of the cluster's {len(state.nodes)} node(s), {snapshot.job_cpus(job)} of "
                    f"{state.cluster_cpus} CPUs (PriorityFavorSmall={'YES' if config.priority_favor_small else 'NO'})"),
        "partition": (f"partition {job.partition} PriorityJobFactor "
                      f"{partition.options.priority_job_factor if partition else 0} of the highest "
                      f"{max((p.options.priority_job_factor for p in state.partitions.values()), default=0)}"),
        "qos": f"QOS {job.qos or 'none'} Priority {qos_priorities.get(job.qos, 0)} of the highest "
               f"{max(qos_priorities.values(), default=0)}",
    }
    lines = [FactorLine(name, f.factor, f.weight, f.weighted, why[name]) for name, f in breakdown.factors.items()]
    lines += [FactorLine(f"tres {name}", f.factor, f.weight, f.weighted,
                         f"{name} of partition {job.partition}'s total") for name, f in breakdown.tres.items()]
    lines.append(FactorLine("site", float(breakdown.site), 1.0, float(breakdown.site), "set by an administrator"))
    lines.append(FactorLine("nice", float(breakdown.nice), -1.0, -float(breakdown.nice),
                            "subtracted as is (scontrol update nice=, sbatch --nice)"))
    return lines, breakdown


def queue_breakdowns(cluster: SlurmCluster, *, now: dt.datetime, include: int, limit: int = 30
                     ) -> list[PriorityBreakdown]:
    """The ``limit`` highest-priority eligible pending jobs, plus job ``include`` if it is not among them."""
    config = parse_config(cluster.config)
    fields = snapshot.breakdown_fields(config)
    rows = _eligible(cluster, now).order_by("-priority", "job_id")
    chosen = list(rows.values_list(*fields)[:limit])
    if include not in {row[0] for row in chosen}:
        chosen += list(rows.filter(job_id=include).values_list(*fields))
    weights = snapshot.priority_weights(config)
    return [snapshot.breakdown_from_row(row, weights) for row in chosen]
