"""Scheduler benchmarks: the pure gang-placement pass, the full database pass, and job submission.

1. ``plan_pass``: ``trainhub.scheduling.placement.plan_pass`` alone (no Django, no database) on
   N queued gang jobs and M idle 8-GPU nodes; median and best of several runs, and how the time
   grows with N compared with n log n.
2. ``scheduler_pass``: one ``trainhub.scheduling.services.scheduler_pass`` against the database:
   read the waiting jobs and free nodes, plan, write each placed gang's allocation and each
   waiting job's reasons. Then a second pass with nothing changed (the steady state of a queue
   longer than the cluster, re-evaluated every few seconds). Seconds, jobs placed, SQL queries.
3. ``job_submit``: ``trainhub.jobs.services.job_submit`` in a loop, in-process (no HTTP), and
   ``parse_custom_job`` alone for comparison; jobs per second and SQL queries per job.

Every benchmark draws its jobs from ``bench.workload.generate_jobs`` (seeded) and times through
``bench.timing.measure``.
"""

from __future__ import annotations

import datetime as dt
import math
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache, partial
from typing import TYPE_CHECKING, Any, TypeVar

from bench.report import Column, Section
from bench.timing import Timing, measure
from bench.workload import MACHINES, REPLICA_MIX, WorkloadJob, free_nodes, generate_jobs, node_split
from trainhub.common.collector import collector_paused
from trainhub.scheduling.placement import plan_pass

if TYPE_CHECKING:  # Django models need django.setup(); the pure benchmark runs without it.
    from django.contrib.auth.models import AbstractBaseUser

    from trainhub.iam.models import Project
    from trainhub.jobs.models import CustomJob

T = TypeVar("T")
LOCATION = "us-central1"
#: A repeated pass runs this long after the first, as beat's 5-second interval would.
REPEAT_PASS_DELAY = dt.timedelta(seconds=5)


@dataclass(frozen=True)
class Sizes:
    """How big each benchmark is; FULL is the reference run, QUICK fits a CI job (< 60 s)."""

    pure_jobs: tuple[int, ...]
    pure_nodes: tuple[int, ...]
    pure_repeat: int
    #: Fewer runs for queues at least this long (each run takes long enough to be steady).
    pure_long_queue: int
    db_nodes: int
    db_jobs: tuple[int, ...]
    db_repeat: int
    submit_jobs: int
    submit_repeat: int
    #: bench/admission.py: cohorts of Kueue's baseline load (5 in Kueue's) and the divisor of its job counts.
    admission_cohorts: int
    admission_divisor: int
    #: CustomJobs POSTed over HTTP by the rest_submit benchmark (bench/submission.py).
    rest_jobs: int
    page_active_jobs: int
    page_finished_jobs: int
    page_nodes: int
    page_repeat: int
    #: The rest of the page dataset (bench/page_extras.py, bench/slurm_pages.py).
    page_studies: int
    page_pipelines: int
    page_models: int
    page_resources: int
    page_slurm_pending: int
    page_slurm_finished: int
    #: Simulated node agents and seconds measured by the agent_fleet benchmark (bench/agent_fleet.py).
    fleet_agents: int
    fleet_seconds: float

    def pure_repeat_for(self, jobs: int) -> int:
        return 3 if jobs >= self.pure_long_queue else self.pure_repeat


FULL = Sizes(pure_jobs=(1_000, 10_000, 50_000), pure_nodes=(100, 1_000), pure_repeat=5, pure_long_queue=50_000,
             db_nodes=1_000, db_jobs=(1_000, 10_000, 50_000), db_repeat=3, submit_jobs=1_000, submit_repeat=3,
             admission_cohorts=5, admission_divisor=1, rest_jobs=10_000, page_active_jobs=10_000,
             page_finished_jobs=100_000, page_nodes=1_000, page_repeat=20, page_studies=200, page_pipelines=100,
             page_models=10, page_resources=20, page_slurm_pending=10_000, page_slurm_finished=20_000,
             fleet_agents=1_000, fleet_seconds=60)
QUICK = Sizes(pure_jobs=(1_000, 10_000), pure_nodes=(100, 1_000), pure_repeat=3, pure_long_queue=10_000,
              db_nodes=100, db_jobs=(200, 1_000), db_repeat=2, submit_jobs=200, submit_repeat=2,
              admission_cohorts=1, admission_divisor=10, rest_jobs=1_000, page_active_jobs=1_000,
              page_finished_jobs=10_000, page_nodes=100, page_repeat=5, page_studies=20, page_pipelines=20,
              page_models=3, page_resources=4, page_slurm_pending=1_000, page_slurm_finished=2_000,
              fleet_agents=100, fleet_seconds=15)


# --- 1. pure placement pass -------------------------------------------------------------------

def _nlogn(n: int) -> float:
    return n * math.log(n)


def _per_decade(ratio: float, size_ratio: float) -> float:
    """A growth ``ratio`` over a ``size_ratio`` step, restated as the growth per 10x step."""
    return ratio ** (1 / math.log10(size_ratio))


def _plan_pass_as_deployed(requests: list, nodes: list) -> Any:
    """plan_pass with the cyclic garbage collector paused, as scheduler_pass runs it in the worker."""
    with collector_paused():
        return plan_pass(requests, nodes)


def bench_plan_pass(sizes: Sizes) -> Section:
    """plan_pass on each (nodes, jobs) pair, with growth per 10x jobs against n log n."""
    section = Section(
        name="plan_pass",
        key=("nodes", "jobs"),
        title="Pure placement pass: plan_pass(requests, free_nodes), no database",
        columns=[Column("nodes", "nodes"), Column("jobs", "jobs"), Column("median_ms", "median ms"),
                 Column("best_ms", "best ms"), Column("runs", "runs"), Column("placed", "jobs placed"),
                 Column("replicas_placed", "nodes used"), Column("us_per_job", "us/job"),
                 Column("nlogn_normalised", "t/(n log n) vs 1k"), Column("growth_per_10x", "growth/10x"),
                 Column("nlogn_growth_per_10x", "n log n growth/10x")],
    )
    queues = {jobs: [job.gang_request() for job in generate_jobs(jobs)] for jobs in sizes.pure_jobs}
    for node_count in sizes.pure_nodes:
        nodes = free_nodes(node_count)
        previous: tuple[int, float] | None = None
        baseline: float | None = None
        for jobs, requests in queues.items():
            timing = measure(partial(_plan_pass_as_deployed, requests, nodes), repeat=sizes.pure_repeat_for(jobs),
                             label=f"plan_pass-{node_count}nodes-{jobs}jobs")
            plan = timing.result
            per_nlogn = timing.median / _nlogn(jobs)
            baseline = baseline or per_nlogn
            row: dict[str, Any] = {
                "nodes": node_count, "jobs": jobs, **timing.figures("ms"),
                "placed": len(plan.placements),
                "replicas_placed": sum(len(assignment) for assignment in plan.placements.values()),
                "waiting": len(plan.shortfalls),
                "us_per_job": timing.median / jobs * 1e6,
                "nlogn_normalised": per_nlogn / baseline,
                "growth_per_10x": None, "nlogn_growth_per_10x": None,
            }
            if previous is not None:
                previous_jobs, previous_median = previous
                step = jobs / previous_jobs
                row["growth_per_10x"] = _per_decade(timing.median / previous_median, step)
                row["nlogn_growth_per_10x"] = _per_decade(_nlogn(jobs) / _nlogn(previous_jobs), step)
            previous = (jobs, timing.median)
            section.rows.append(row)
    section.notes += [
        ("Each job is 1-16 replicas of one whole 8-GPU node (60% 1-2, 30% 3-8, 10% 9-16; A100/H100/H200/B200 "
         "asked for 35/35/15/15%); nodes split evenly over the 4 machine types; random.Random(42)."),
        ("t/(n log n) vs 1k: median / (n ln n), divided by the same ratio at 1k jobs on the same nodes. "
         "At or below 1.0 means growth no worse than n log n."),
        ("growth/10x: how many times slower per 10x more jobs (from the previous row); compare with the "
         "n log n column."),
        "the cyclic garbage collector is paused during each run, as scheduler_pass pauses it in the worker "
        "(trainhub.common.collector)",
    ]
    target = next((row for row in section.rows if row["jobs"] == 10_000 and row["nodes"] == 1_000), None)
    if target is not None:
        verdict = "met" if target["median_ms"] < 1000 else "NOT met"
        section.notes.append(f"Target 10k jobs on 1,000 nodes < 1 s: median {target['median_ms']:.0f} ms, {verdict}.")
    return section


# --- shared database fixtures -----------------------------------------------------------------

@dataclass(frozen=True)
class QueryCount:
    """SQL statements run on the default connection, by leading keyword."""

    total: int
    by_kind: dict[str, int]

    def figures(self, per: int) -> dict[str, Any]:
        return {
            "queries": self.total,
            "queries_per_job": self.total / per if per else None,
            "select": self.by_kind.get("SELECT", 0),
            "insert": self.by_kind.get("INSERT", 0),
            "update": self.by_kind.get("UPDATE", 0),
            "transaction_control": sum(self.by_kind.get(kind, 0)
                                       for kind in ("BEGIN", "COMMIT", "SAVEPOINT", "RELEASE", "ROLLBACK")),
            "queries_by_kind": dict(sorted(self.by_kind.items())),
        }


@contextmanager
def _unbounded_query_log() -> Iterator[None]:
    """Let the connection keep every query (Django keeps only the last 9,000 by default)."""
    from collections import deque

    from django.db import connection

    saved = connection.queries_log
    connection.queries_log = deque(saved)
    try:
        yield
    finally:
        connection.queries_log = saved


def counting_queries(fn: Callable[[], T]) -> Callable[[], tuple[T, QueryCount]]:
    """Wrap ``fn`` so that it also returns the SQL it ran (via CaptureQueriesContext)."""

    def run() -> tuple[T, QueryCount]:
        from django.db import connection
        from django.test.utils import CaptureQueriesContext

        with _unbounded_query_log():
            with CaptureQueriesContext(connection) as captured:
                result = fn()
            kinds = Counter(query["sql"].lstrip().split(None, 1)[0].upper() for query in captured.captured_queries)
        return result, QueryCount(sum(kinds.values()), dict(kinds))

    run.__name__ = getattr(fn, "__name__", "counted")
    return run


@cache
def bench_project() -> tuple[Project, AbstractBaseUser]:
    """The project "bench" and its admin user "bench", created through the iam services."""
    from trainhub.iam.roles import ADMIN
    from trainhub.iam.services import membership_set, project_create, user_ensure

    project = project_create(project_id="bench", display_name="Benchmarks")
    user = user_ensure(username="bench", password="bench-password")
    membership_set(project=project, user=user, role=ADMIN)
    return project, user


@cache
def bench_nodes(count: int) -> tuple[int, ...]:
    """``count`` 8-GPU nodes in one pool per machine type (simulated executor); their ids."""
    from trainhub.inventory.models import Executor, Node
    from trainhub.inventory.services import node_pool_ensure

    names = []
    for machine, _accel, pool_size in node_split(count):
        name = f"bench-{machine}"
        node_pool_ensure(name=name, machine_type=machine, node_count=pool_size, executor=Executor.SIMULATED)
        names.append(name)
    return tuple(Node.objects.filter(pool__name__in=names).order_by("pk").values_list("pk", flat=True))


@contextmanager
def inventory_for_the_workload() -> Iterator[None]:
    """A FLEX_START gang that the location's whole inventory could never hold is refused at create:
    for the submissions measured here to be the workload's, one pool per machine type as large as
    the largest gang, whose nodes never report (nothing is placed on them), removed afterwards."""
    from trainhub.inventory.models import Executor, Node, NodePool
    from trainhub.inventory.services import node_pool_ensure

    names = [f"bench-submit-{machine}" for machine, _ in MACHINES]
    largest = max(largest for _, _, largest in REPLICA_MIX)
    for name, (machine, _) in zip(names, MACHINES):
        node_pool_ensure(name=name, machine_type=machine, node_count=largest, executor=Executor.SIMULATED)
    try:
        yield
    finally:
        Node.objects.filter(pool__name__in=names).delete()
        NodePool.objects.filter(name__in=names).delete()


def clear_jobs() -> None:
    """Delete every job with plain SQL, as the ORM's delete would treat what refers to it: the rows
    that cascade (logs, events, replicas) go, the ones that merely point at a job (the page dataset's
    trials, pipelines and model versions) lose the pointer - PostgreSQL refuses the commit otherwise."""
    from django.db import connection, models, transaction

    from trainhub.jobs.models import CustomJob

    quote = connection.ops.quote_name
    with transaction.atomic(), connection.cursor() as cursor:
        for relation in CustomJob._meta.related_objects:
            table, column = quote(relation.related_model._meta.db_table), quote(relation.field.column)
            if relation.on_delete is models.SET_NULL:
                cursor.execute(f"UPDATE {table} SET {column} = NULL WHERE {column} IS NOT NULL")
            else:
                cursor.execute(f"DELETE FROM {table} WHERE {column} IS NOT NULL")
        cursor.execute(f"DELETE FROM {quote(CustomJob._meta.db_table)}")


def queued_row(job: WorkloadJob, *, project: Project, user: AbstractBaseUser, created: dt.datetime) -> CustomJob:
    """An unsaved CustomJob for ``job`` with the fields job_submit sets (checked by
    ``row_drift_from_job_submit``), from the canonical document of parse_custom_job."""
    from trainhub.jobs.models import CustomJob
    from trainhub.jobs.spec import parse_custom_job
    from trainhub.scheduling.quota import quota_demand

    parsed = parse_custom_job(job.body())
    return CustomJob(
        project=project, location=LOCATION, job_id=str(10**17 + job.index),
        display_name=parsed.document["displayName"], spec=parsed.document, labels=parsed.document["labels"],
        strategy=parsed.strategy,
        gpu_count=sum(pool.replica_count * pool.shape.accelerator_count for pool in parsed.pools),
        replica_count=sum(pool.replica_count for pool in parsed.pools),
        accelerator_type=parsed.accelerator_type,
        quota_demand=quota_demand(((pool.replica_count, pool.shape) for pool in parsed.pools), parsed.strategy),
        timeout_seconds=parsed.timeout_seconds, max_wait_seconds=parsed.max_wait_seconds,
        created_by=user, create_time=created, update_time=created,
    )


def row_drift_from_job_submit(jobs: list[WorkloadJob]) -> list[str]:
    """Fields where ``queued_row`` differs from what job_submit stores for the same job ([] = none).

    Submits one job of each strategy through job_submit inside a transaction that is rolled back,
    so the bulk-loaded queue keeps describing what the service would have written even as
    CustomJob gains fields.
    """
    from django.db import transaction
    from django.utils import timezone

    from trainhub.jobs.services import job_submit

    project, user = bench_project()
    samples = list({job.strategy: job for job in jobs}.values())
    ignored = {"id", "job_id"}
    drift: set[str] = set()
    now = timezone.now()
    with transaction.atomic():
        with inventory_for_the_workload():
            for job in samples:
                stored = job_submit(project=project, location=LOCATION, user=user, body=job.body(), now=now)
                stored.refresh_from_db()
                row = queued_row(job, project=project, user=user, created=now)
                for field in stored._meta.concrete_fields:
                    if field.attname not in ignored and field.value_from_object(stored) != field.value_from_object(row):
                        drift.add(field.attname)
        transaction.set_rollback(True)
    return sorted(drift)


def load_queue(jobs: list[WorkloadJob], *, now: dt.datetime) -> None:
    """Replace the queue with ``jobs`` as QUEUED CustomJobs, as job_submit would have stored them.

    Rows (see ``queued_row``) and their "Job created" events are bulk-created; job i was submitted
    i ms after job 0 and the newest a second before ``now`` (inside the STANDARD stockout window).
    The scheduler's Redis queue is then rebuilt from them, as job_submit would have filled it.
    """
    from django.db import transaction

    from trainhub.jobs import states
    from trainhub.jobs.models import CustomJob, JobEvent

    project, user = bench_project()
    oldest = now - dt.timedelta(milliseconds=len(jobs) + 1000)
    rows = [queued_row(job, project=project, user=user, created=oldest + dt.timedelta(milliseconds=job.index))
            for job in jobs]
    clear_jobs()
    with transaction.atomic():
        CustomJob.objects.bulk_create(rows, batch_size=1000)
        JobEvent.objects.bulk_create(
            (JobEvent(job=row, time=row.create_time, state=states.QUEUED,
                      message=f"Job created by {user} ({row.strategy}).") for row in rows),
            batch_size=1000,
        )
    from trainhub.scheduling.services import working_memory_reconcile

    working_memory_reconcile(now=now)


# --- 2. full database pass --------------------------------------------------------------------

def _fresh_queue(jobs: list[WorkloadJob], node_ids: tuple[int, ...]) -> tuple[dt.datetime, Timing[None]]:
    """Load ``jobs`` as the queue and heartbeat every node now; (now, how long the load took)."""
    from django.utils import timezone

    from trainhub.inventory.services import node_heartbeat

    now = timezone.now()
    load = measure(lambda: load_queue(jobs, now=now), label=f"load_queue-{len(jobs)}jobs")
    node_heartbeat(node_ids=list(node_ids), now=now)
    return now, load


def _passes(now: dt.datetime) -> dict[str, Callable[[], Any]]:
    """The two passes measured on each fresh queue, in the order they must run."""
    from trainhub.scheduling.services import scheduler_pass

    return {"first": lambda: scheduler_pass(now=now),
            "repeat": lambda: scheduler_pass(now=now + REPEAT_PASS_DELAY)}


def bench_scheduler_pass(sizes: Sizes) -> Section:
    """scheduler_pass on a fresh queue, then again with nothing changed, for each queue length.

    Each of ``db_repeat`` rounds reloads the queue and times both passes without query capture
    (CaptureQueriesContext's bookkeeping costs 20-30% here); one more identical round, untimed,
    counts the SQL.
    """
    node_ids = bench_nodes(sizes.db_nodes)
    section = Section(
        name="scheduler_pass",
        key=("jobs", "pass"),
        title=f"Full scheduler pass against the database: scheduler_pass(now=...) on {len(node_ids):,} nodes",
        columns=[Column("jobs", "jobs"), Column("pass", "pass"), Column("median_s", "median s"),
                 Column("best_s", "best s"), Column("median_cpu_s", "cpu s"), Column("runs", "runs"),
                 Column("nlogn_normalised", "t/(n log n) vs 1k"), Column("placed", "jobs placed"),
                 Column("pure_placed", "pure plan placed"), Column("queries", "SQL queries"),
                 Column("queries_per_job", "queries/job"), Column("select", "SELECT"), Column("insert", "INSERT"),
                 Column("update", "UPDATE"), Column("transaction_control", "BEGIN/COMMIT"),
                 Column("load_s", "queue load s")],
    )
    drift = row_drift_from_job_submit(generate_jobs(max(sizes.db_jobs)))
    baseline: dict[str, float] = {}  # pass -> CPU seconds / (n ln n) of the smallest queue
    for job_count in sizes.db_jobs:
        jobs = generate_jobs(job_count)
        pure_placed = len(plan_pass([job.gang_request() for job in jobs], free_nodes(len(node_ids))).placements)
        timings: dict[str, list[Timing[Any]]] = {"first": [], "repeat": []}
        loads = []
        for _ in range(sizes.db_repeat):
            now, load = _fresh_queue(jobs, node_ids)
            loads.append(load)
            for name, run in _passes(now).items():
                timings[name].append(measure(run, label=f"scheduler_pass-{job_count}jobs-{name}"))
        now, _ = _fresh_queue(jobs, node_ids)
        counted = {name: counting_queries(run)() for name, run in _passes(now).items()}
        for name, runs in timings.items():
            timing = Timing.combine(runs)
            result, queries = timing.result, counted[name][1]
            figures = timing.figures("s")
            per_nlogn = figures["median_cpu_s"] / _nlogn(job_count)
            baseline.setdefault(name, per_nlogn)
            section.rows.append({
                "nodes": len(node_ids), "jobs": job_count, "pass": name, **figures,
                "nlogn_normalised": per_nlogn / baseline[name],
                "placed": result.placed, "failed": result.failed, "considered": result.considered,
                "pure_placed": pure_placed if name == "first" else None,
                "counted_run_placed": counted[name][0].placed,
                **queries.figures(result.considered),
                "load_s": Timing.combine(loads).median if name == "first" else None,
            })
    section.notes += [
        ("first: a fresh queue of QUEUED jobs on idle nodes (agents heart-beating); repeat: the next pass "
         f"{REPEAT_PASS_DELAY.seconds} s later with nothing changed (every job re-evaluated, none placed)."),
        ("A pass reads the queue and each queued job's gang from Redis, and from the database which of them "
         "still wait (pk and state only), the free nodes and quota usage; plans; writes every placed gang in "
         "one transaction; moves up to TRAINHUB_FLEX_PENDING_PER_PASS FLEX_START jobs QUEUED -> PENDING (with "
         "an event); and writes every waiting job's explanation to Redis in one round trip."),
        "Times are without query capture; SQL counted (CaptureQueriesContext) in one more identical round.",
        ("cpu s: median CPU seconds of this process (with SQLite that includes the database; never Redis), "
         "steadier than wall time on a busy machine. t/(n log n) vs 1k: cpu s / (n ln n), over the same ratio at the smallest queue; "
         "at or below 1.0 means growth no worse than n log n."),
        "pure plan placed: plan_pass alone on the same queue and nodes; it should equal jobs placed.",
        "queue load s: bulk-creating the queue and its Redis sorted set (setup, not part of the pass). "
        "30% of jobs are FLEX_START.",
        "Bulk-loaded rows match what job_submit stores (one job per strategy compared): "
        + ("yes." if not drift else f"NO - they differ in {', '.join(drift)}; update queued_row()."),
    ]
    section.extra["bulk_rows_drift_from_job_submit"] = drift
    return section


# --- 3. submission rate -----------------------------------------------------------------------

def bench_job_submit(sizes: Sizes) -> Section:
    with inventory_for_the_workload():
        return _bench_job_submit(sizes)


def _bench_job_submit(sizes: Sizes) -> Section:
    """job_submit in a loop (in-process), and parse_custom_job alone, on the same bodies."""
    from trainhub.jobs.services import job_submit
    from trainhub.jobs.spec import parse_custom_job

    project, user = bench_project()
    bodies = [job.body() for job in generate_jobs(sizes.submit_jobs)]
    count = len(bodies)
    section = Section(
        name="job_submit",
        key=("what",),
        title=f"Submission rate: {count:,} jobs submitted one after another, in-process (no HTTP)",
        columns=[Column("what", "what"), Column("median_s", "median s"), Column("best_s", "best s"),
                 Column("runs", "runs"), Column("jobs_per_second", "jobs/s"), Column("ms_per_job", "ms/job"),
                 Column("queries_per_job", "queries/job")],
    )

    def parse_all() -> list[Any]:
        return [parse_custom_job(body) for body in bodies]

    def submit_all() -> list[Any]:
        return [job_submit(project=project, location=LOCATION, user=user, body=body) for body in bodies]

    parse = measure(parse_all, repeat=3, label="parse_custom_job")
    submit = measure(submit_all, repeat=sizes.submit_repeat, setup=clear_jobs, label="job_submit")
    clear_jobs()
    _, queries = counting_queries(submit_all)()
    clear_jobs()
    for what, timing, query_figures in (("parse_custom_job only", parse, {"queries_per_job": None}),
                                        ("job_submit", submit, queries.figures(count))):
        section.rows.append({
            "what": what, "jobs": count, **timing.figures("s"),
            "jobs_per_second": count / timing.median, "ms_per_job": timing.median / count * 1000,
            **query_figures,
        })
    section.notes += [
        ("job_submit validates the body, inserts the job and its creation event in one transaction and, on "
         "commit, enqueues a scheduler pass (to the benchmarks' Redis, where no worker runs it); it also queues "
         "the job in the scheduler's Redis sorted set."),
        "Each run starts from an empty job table; SQL counted (CaptureQueriesContext) in one more, untimed, run.",
    ]
    return section


@dataclass(frozen=True)
class Benchmark:
    name: str
    run: Callable[[Sizes], Section]
    needs_database: bool


BENCHMARKS: tuple[Benchmark, ...] = (
    Benchmark("plan_pass", bench_plan_pass, needs_database=False),
    Benchmark("scheduler_pass", bench_scheduler_pass, needs_database=True),
    Benchmark("job_submit", bench_job_submit, needs_database=True),
)
