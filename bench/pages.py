"""Page benchmark: server time and SQL queries of every page of the web app on the bench dataset.

The dataset: ``page_active_jobs`` active jobs (running on most of the ``page_nodes`` nodes, the
rest queued or pending), ``page_finished_jobs`` finished ones spread over 30 days, two projects
(the user is a member of both, so "all my projects" is a two-project query), a week of dashboard
samples, quotas, the finished jobs' cost ledger, and one running job with a timeline and 2,000 log
lines; studies, pipelines, models and persistent resources (bench/page_extras.py); the Slurm
cluster of bench/slurm_pages.py with its pending queue and accounting history. Each page is
requested through Django's test client (the whole middleware and template stack, no network): one
warm-up request, then ``page_repeat`` timed ones (p50, p95, max), and one more, untimed, counting SQL.

Every page route of the URL conf must have a sample (or be listed in ``NOT_PAGES`` as no page,
with the reason): a route without one is printed before the dataset is built and reported as a
"NO SAMPLE" row, and tests/test_bench_pages.py fails on it.
"""

from __future__ import annotations

import datetime as dt
import random
import statistics
import time
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any

from bench.environment import collect_statistics
from bench.report import Column, Section

if TYPE_CHECKING:
    from bench.scheduler_pass import Sizes

LOCATION = "us-central1"
#: The issue's target: every page under this many milliseconds of server time.
TARGET_MS = 150.0
_MACHINES = (("a2-highgpu-8g", "NVIDIA_TESLA_A100"), ("a3-highgpu-8g", "NVIDIA_H100_80GB"),
             ("a3-ultragpu-8g", "NVIDIA_H200_141GB"), ("a4-highgpu-8g", "NVIDIA_B200"))


@cache
def _document(machine: str, replicas: int, strategy: str) -> Any:
    """The parsed job for one shape (parsing 100k bodies would take longer than the benchmark)."""
    from trainhub.jobs.spec import parse_custom_job

    pools = [{"machineSpec": {"machineType": machine}, "replicaCount": 1,
              "containerSpec": {"imageUri": "python:3.11", "command": ["python", "train.py"]}}]
    if replicas > 1:
        pools.append({**pools[0], "replicaCount": replicas - 1})
    scheduling = {"strategy": strategy, **({"maxWaitDuration": "0s"} if strategy == "FLEX_START" else {})}
    return parse_custom_job({"displayName": "bench", "jobSpec": {"workerPoolSpecs": pools, "scheduling": scheduling}})


def _job_row(index: int, *, project: Any, user: Any, rng: random.Random, state: str, created: dt.datetime,
             started: dt.datetime | None, ended: dt.datetime | None, replicas: int = 0) -> Any:
    from trainhub.jobs.models import CustomJob
    from trainhub.scheduling.quota import quota_demand

    machine, _kind = rng.choice(_MACHINES)
    replicas = replicas or rng.choice((1, 1, 1, 2, 2, 4, 8))
    strategy = rng.choice(("STANDARD", "STANDARD", "FLEX_START", "SPOT"))
    parsed = _document(machine, replicas, strategy)
    document = {**parsed.document, "displayName": f"bench-{index}"}
    return CustomJob(
        project=project, location=LOCATION, job_id=str(2 * 10**17 + index), display_name=f"bench-{index}",
        spec=document, labels={}, strategy=strategy, accelerator_type=parsed.accelerator_type,
        gpu_count=sum(p.replica_count * p.shape.accelerator_count for p in parsed.pools),
        replica_count=replicas, quota_demand=quota_demand(((p.replica_count, p.shape) for p in parsed.pools),
                                                          strategy),
        timeout_seconds=parsed.timeout_seconds, max_wait_seconds=parsed.max_wait_seconds, state=state,
        created_by=user, create_time=created, update_time=ended or started or created, start_time=started,
        end_time=ended, error={"code": 13, "message": "bench"} if state == "JOB_STATE_FAILED" else None)


@dataclass(frozen=True)
class Dataset:
    user: Any
    #: The Slurm cluster's administrator (the Slurm pages, several of them for admins only).
    slurm_admin: Any
    #: URL parameters of each object a sample page shows, by name ("job running", "cluster", ...).
    targets: dict[str, dict[str, Any]]
    #: Values the samples' query strings take from the dataset ("{deep_cursor}").
    values: dict[str, str]
    build_seconds: float


def build_dataset(sizes: Sizes) -> Dataset:
    """Replace every job with the bench dataset; nodes, samples and Redis state to match."""
    from django.db import transaction
    from django.utils import timezone

    from bench.dashboard_history import Pool, write_history
    from bench.page_extras import build_pipelines, build_resources, build_studies
    from bench.scheduler_pass import bench_nodes, bench_project, clear_jobs
    from bench.slurm_pages import slurm_cluster, slurm_history, slurm_queue
    from trainhub.dashboards.models import CapacitySample, QueueSample
    from trainhub.iam.roles import USER
    from trainhub.iam.services import membership_set, project_create
    from trainhub.inventory.models import Node
    from trainhub.inventory.services import node_heartbeat
    from trainhub.jobs import states
    from trainhub.jobs.costs import gpus_by_quota_demand
    from trainhub.jobs.models import CostLedger, CustomJob, JobEvent, LogLine, Replica
    from trainhub.jobs.page_selectors import FINISHED_TAB
    from trainhub.scheduling.quota import quota_metric
    from trainhub.scheduling.services import quota_set, scheduler_pass
    from trainhub.slurm.services.passes import cluster_pass

    began = time.perf_counter()
    now = timezone.now()
    rng = random.Random(11)
    project, user = bench_project()
    other = project_create(project_id="bench-b", display_name="Second bench project")
    membership_set(project=other, user=user, role=USER)
    node_ids = bench_nodes(sizes.page_nodes)
    clear_jobs()
    CapacitySample.objects.all().delete()
    QueueSample.objects.all().delete()

    def project_for(index: int) -> Any:
        return other if index % 10 == 0 else project

    active_states = (states.QUEUED, states.PENDING)
    nodes_by_machine: dict[str, list[int]] = {}
    for pk, machine in Node.objects.filter(pk__in=node_ids).values_list("pk", "pool__machine_type"):
        nodes_by_machine.setdefault(machine, []).append(pk)
    rows, running = [], []
    for index in range(sizes.page_finished_jobs):
        ended = now - dt.timedelta(seconds=rng.uniform(60, 30 * 86400))
        started = ended - dt.timedelta(seconds=rng.uniform(60, 8 * 3600))
        created = started - dt.timedelta(seconds=rng.expovariate(1 / 900))
        state = rng.choices((states.SUCCEEDED, states.FAILED, states.CANCELLED), (80, 12, 8))[0]
        rows.append(_job_row(index, project=project_for(index), user=user, rng=rng, state=state, created=created,
                             started=started, ended=ended))
    base = sizes.page_finished_jobs
    free = {machine: list(ids) for machine, ids in nodes_by_machine.items()}
    for index in range(base, base + sizes.page_active_jobs):
        created = now - dt.timedelta(seconds=rng.uniform(5, 6 * 3600))
        row = _job_row(index, project=project_for(index), user=user, rng=rng, state=rng.choice(active_states),
                       created=created, started=None, ended=None, replicas=1)
        machine = row.spec["jobSpec"]["workerPoolSpecs"][0]["machineSpec"]["machineType"]
        if free[machine] and rng.random() < 0.5:  # half the active jobs run while there are nodes
            row.state, row.start_time = states.RUNNING, created + dt.timedelta(seconds=rng.uniform(1, 600))
            running.append((row, free[machine].pop()))
        rows.append(row)
    with transaction.atomic():
        CustomJob.objects.bulk_create(rows, batch_size=2000)
        Replica.objects.bulk_create(
            (Replica(job=row, pool_index=0, replica_index=0, node_id=node_id, gpu_indices=list(range(8)),
                     state=states.REPLICA_RUNNING, assigned_at=row.create_time, started_at=row.start_time)
             for row, node_id in running), batch_size=2000)
    ledgers: dict[tuple[int, str], CostLedger] = {}
    for row in rows:  # what services._transition books as each job ends
        if row.end_time is not None:
            ledger = ledgers.setdefault((row.project.pk, row.strategy), CostLedger(project=row.project,
                                                                                   strategy=row.strategy))
            ledger.jobs += 1
            for kind, gpus in gpus_by_quota_demand(row.quota_demand).items():
                seconds = gpus * (row.end_time - row.start_time).total_seconds()
                ledger.gpu_seconds[kind] = ledger.gpu_seconds.get(kind, 0.0) + seconds
    CostLedger.objects.all().delete()
    CostLedger.objects.bulk_create(ledgers.values())
    running_job, _node = running[0]
    finished_job = rows[0]
    for job in (running_job, finished_job):
        JobEvent.objects.bulk_create(JobEvent(job=job, time=job.create_time, state=state, message=f"bench {state}")
                                     for state in (states.QUEUED, states.PENDING, states.RUNNING))
    replica = running_job.replicas.get()
    LogLine.objects.bulk_create((LogLine(replica=replica, job=running_job, stream="stdout", time=now,
                                         text=f"step {step} loss {1 / (step + 1):.4f}") for step in range(2000)),
                                batch_size=2000)
    for _machine, kind in _MACHINES:
        for strategy in ("STANDARD", "SPOT"):
            for each in (project, other):
                quota_set(project=each, location=LOCATION, metric=quota_metric(kind, strategy), limit=4096,
                          actor="bench")
    build_studies(project=project, user=user, count=sizes.page_studies, now=now)
    build_pipelines(project=project, user=user, count=sizes.page_pipelines, models=sizes.page_models, now=now)
    resource_id = build_resources(project=project, user=user, count=sizes.page_resources, now=now)
    node_heartbeat(node_ids=list(node_ids), now=now)
    pools = [Pool(f"bench-{machine}", kind, 8 * len(ids), busy=0.7) for (machine, kind), ids in
             zip(_MACHINES, (nodes_by_machine[m] for m, _ in _MACHINES))]
    write_history(pools=pools, end=now, minutes=7 * 24 * 60, waiting_scale=max(1.0, sizes.page_nodes / 100))
    scheduler_pass(now=now)  # the queue, wait explanations and snapshot in Redis, as beat keeps them
    cluster, slurm_admin, slurm_users = slurm_cluster(now)
    slurm_queue(cluster, slurm_users, sizes.page_slurm_pending, now)
    slurm_history(cluster, slurm_users, sizes.page_slurm_finished, now)
    cluster_pass(cluster=cluster, now=now)  # every pending job's priority, as the Slurm beat keeps them
    collect_statistics()
    deep = CustomJob.objects.filter(FINISHED_TAB.condition).order_by("-end_time", "-id")[2500]
    targets = _targets(running_job=running_job, finished_job=finished_job, resource_id=resource_id, cluster=cluster)
    values = {"deep_cursor": FINISHED_TAB.default_sort.ordering.encode(deep), "finished_job_id": finished_job.job_id,
              "week_ago": f"{now - dt.timedelta(days=7):%Y-%m-%d}"}
    return Dataset(user, slurm_admin, targets, values, time.perf_counter() - began)


def _targets(*, running_job: Any, finished_job: Any, resource_id: str, cluster: Any) -> dict[str, dict[str, Any]]:
    """The URL parameters of every object a sample page shows: the busiest finished study, a running
    one, a custom and a tuning pipeline, a resource, the Slurm cluster and its jobs and accounts."""
    from django.db.models import Count

    from trainhub.jobs import states
    from trainhub.slurm.models import Association, JobState, SlurmJob
    from trainhub.tuning.models import HyperparameterTuningJob, TrainingPipeline

    here = {"project": "bench", "location": LOCATION}
    studies = HyperparameterTuningJob.objects.filter(pipelines__isnull=True).annotate(trials_count=Count("trials"))
    pipelines = TrainingPipeline.objects.filter(state="PIPELINE_STATE_SUCCEEDED").order_by("pk")
    slurm = {"project": cluster.project.project_id, "location": cluster.location, "cluster": cluster.cluster_id}
    jobs = SlurmJob.objects.filter(cluster=cluster).order_by("job_id")
    return {
        "project": here,
        "job running": {**here, "project": running_job.project.project_id, "job_id": running_job.job_id},
        "job finished": {**here, "project": finished_job.project.project_id, "job_id": finished_job.job_id},
        "study finished": {**here, "tuning_job_id": studies.filter(state=states.SUCCEEDED)
                           .order_by("-trials_count", "pk").values_list("job_id", flat=True)[0]},
        "study running": {**here, "tuning_job_id": studies.filter(state__in=states.ACTIVE)
                          .order_by("-trials_count", "pk").values_list("job_id", flat=True)[0]},
        "pipeline custom": {**here, "pipeline_id": pipelines.filter(custom_job__isnull=False)[0].pipeline_id},
        "pipeline tuning": {**here, "pipeline_id": pipelines.filter(tuning_job__isnull=False)[0].pipeline_id},
        "resource": {**here, "resource_id": resource_id},
        "cluster": slurm,
        "partition": {**slurm, "partition": "a4"},
        "slurm job pending": {**slurm, "slurm_job_id": jobs.filter(state=JobState.PENDING)[0].job_id},
        "slurm job finished": {**slurm, "slurm_job_id": jobs.filter(state=JobState.COMPLETED)[0].job_id},
        "association": {**slurm, "pk": Association.objects.filter(cluster=cluster).exclude(user="")
                        .order_by("pk")[0].pk},
        "qos": {**slurm, "name": "normal"},
    }


#: Routes of the URL conf that are not pages a GET renders, and why the benchmark skips them.
NOT_PAGES = {
    "healthz": "the load balancer's JSON probe",
    "logout": "an action (POST) that redirects (logging out)",
    "iam:token_create": "an action (POST) that redirects",
    "iam:token_rotate": "an action (POST) that redirects",
    "jobs:cancel": "an action (POST) that redirects",
    "tuning:cancel": "an action (POST) that redirects",
    "pipelines:cancel": "an action (POST) that redirects",
    "resources:resize": "an action (POST) that redirects",
    "resources:reboot": "an action (POST) that redirects",
    "resources:delete": "an action (POST) that redirects",
    "slurm:node_state": "an action (POST) that redirects",
    "slurm:node_features": "an action (POST) that redirects",
    "slurm:node_memory": "an action (POST) that redirects",
    "slurm:node_weight": "an action (POST) that redirects",
    "slurm:job_action": "an action (POST) that redirects",
}


@dataclass(frozen=True)
class Sample:
    """One request of a page: the route's URL name, the dataset object that fills its parameters
    (a key of ``Dataset.targets``), a query string (``{name}`` takes ``Dataset.values``) and who asks."""

    route: str
    label: str
    target: str = ""
    query: str = ""
    kwargs: tuple[tuple[str, str], ...] = ()
    who: str = "member"
    #: 302 for a route that sends the browser to another page (the first project's form).
    status: int = 200

    def url(self, dataset: Dataset) -> str:
        from django.urls import reverse

        kwargs = {**(dataset.targets[self.target] if self.target else {}), **dict(self.kwargs)}
        query = self.query.format(**dataset.values)
        return reverse(self.route, kwargs=kwargs or None) + (f"?{query}" if query else "")


def _samples() -> list[Sample]:
    """Every page of the app, most in several states (tabs, filters, a deep page, live fragments)."""
    from trainhub.dashboards.charts import CHARTS
    from trainhub.dashboards.team import TEAM_CHARTS

    s = Sample
    samples = [
        s("jobs:list", "jobs: active"),
        s("jobs:list", "jobs: active, queue order", query="sort=oldest"),
        s("jobs:list", "jobs: active, most GPUs", query="sort=gpus"),
        s("jobs:list", "jobs: active, one project, H100, queued",
          query="project=bench&state=JOB_STATE_QUEUED&accelerator_type=NVIDIA_H100_80GB"),
        s("jobs:list_rows", "jobs: active rows (live refresh)"),
        s("jobs:list", "jobs: finished", query="tab=finished"),
        s("jobs:list", "jobs: finished, page 51 (keyset)", query="tab=finished&cursor={deep_cursor}"),
        s("jobs:list", "jobs: finished, oldest ended first", query="tab=finished&sort=ended-first"),
        s("jobs:list", "jobs: finished, failed H100 SPOT",
          query="tab=finished&state=JOB_STATE_FAILED&accelerator_type=NVIDIA_H100_80GB&strategy=SPOT"),
        s("jobs:list", "jobs: finished, one user", query="tab=finished&user=bench"),
        s("jobs:list", "jobs: finished, second project", query="tab=finished&project=bench-b"),
        s("jobs:list", "jobs: finished, search name prefix", query="tab=finished&q=bench-4242"),
        s("jobs:list", "jobs: finished, search job id", query="tab=finished&q={finished_job_id}"),
        s("jobs:detail", "job: running, detail", "job running"),
        s("jobs:detail_status", "job: running, status (live)", "job running"),
        s("jobs:detail_logs", "job: running, log tail (live)", "job running", query="after=0"),
        s("jobs:detail", "job: finished, detail", "job finished"),
        s("inventory:list", "nodes"),
        s("inventory:list_pools", "nodes: pools (live)"),
        s("inventory:list_reservations", "nodes: held for FLEX_START gangs (live)"),
        s("inventory:list_rows", "nodes: rows (live)"),
        s("inventory:machines", "machines: join tokens and joined machines", who="admin"),
        s("jobs:argv_preview", "job form: argument list preview (live)",
          query="prefix=pool0&pool0-command=python3+-c+%22print(1)%22&pool0-args=--steps+10"),
        s("scheduling:quotas", "quotas"),
        s("iam:token", "API token"),
        s("login", "login form", who="anonymous"),
        s("dashboards:overview", "dashboard"),
        s("dashboards:kpis", "dashboard: live figures"),
        s("tuning:detail", "tuning: finished study", "study finished"),
        s("tuning:detail", "tuning: finished study, by metric", "study finished", query="sort=metric"),
        s("tuning:detail_status", "tuning: running study, status (live)", "study running"),
        s("tuning:detail_charts", "tuning: finished study, charts", "study finished"),
        s("tuning:models", "models"),
        s("pipelines:detail", "pipeline: custom job, detail", "pipeline custom"),
        s("pipelines:detail", "pipeline: tuning, detail", "pipeline tuning"),
        s("pipelines:detail_status", "pipeline: status (live)", "pipeline custom"),
        s("resources:detail", "persistent resource: detail", "resource"),
        s("resources:detail_status", "persistent resource: status (live)", "resource"),
        s("resources:detail_chart", "persistent resource: chart", "resource"),
        s("slurm:list", "slurm: clusters", who="admin"),
        s("slurm:detail", "slurm: cluster", "cluster", who="admin"),
        s("slurm:slurm_conf", "slurm: slurm.conf download", "cluster", who="admin"),
        s("slurm:config", "slurm: slurm.conf keys form", "cluster", who="admin"),
        s("slurm:scripts", "slurm: prolog form", "cluster", kwargs=(("kind", "prolog"),), who="admin"),
        s("slurm:partition", "slurm: partition form", "partition", who="admin"),
        s("slurm:queue", "slurm: squeue", "cluster", who="admin"),
        s("slurm:queue", "slurm: squeue -l one user", "cluster", query="user=user3&long=on", who="admin"),
        s("slurm:priority", "slurm: sprio", "cluster", who="admin"),
        s("slurm:priority", "slurm: sprio -l", "cluster", query="long=on", who="admin"),
        s("slurm:priority", "slurm: sprio -u one user", "cluster", query="user=user3", who="admin"),
        s("slurm:fairshare", "slurm: sshare -a -l", "cluster", query="all=on&long=on", who="admin"),
        s("slurm:accounting", "slurm: sacct today, all users", "cluster", query="allusers=on", who="admin"),
        s("slurm:accounting", "slurm: sacct 7 days, all users", "cluster", query="allusers=on&starttime={week_ago}",
          who="admin"),
        s("slurm:nodes", "slurm: sinfo -N -l", "cluster", query="nodes=on&long=on", who="admin"),
        s("slurm:sacctmgr", "slurm: sacctmgr console", "cluster", who="admin"),
        s("slurm:accounts", "slurm: accounts admin", "cluster", who="admin"),
        s("slurm:association", "slurm: association form", "association", who="admin"),
        s("slurm:qos", "slurm: QOS form", "qos", who="admin"),
        s("slurm:submit", "slurm: sbatch form", "cluster", who="admin"),
        s("slurm:job", "slurm: pending job", "slurm job pending", who="admin"),
        s("slurm:job", "slurm: finished job", "slurm job finished", who="admin"),
        s("slurm:job_status", "slurm: job status (live)", "slurm job pending", who="admin"),
        s("slurm:job_log", "slurm: job log (live)", "slurm job finished", who="admin"),
        s("slurm:job_priority", "slurm: job priority factors", "slurm job pending", who="admin"),
    ]
    for app, title in (("tuning", "studies"), ("pipelines", "pipelines"), ("resources", "persistent resources")):
        samples += [s(f"{app}:list", title), s(f"{app}:list_rows", f"{title}: rows (live)")]
    for app, title in (("jobs", "job"), ("tuning", "study"), ("pipelines", "pipeline"),
                       ("resources", "persistent resource")):
        samples += [s(f"{app}:create", f"{title}: create form", "project"),
                    s(f"{app}:create_default", f"{title}: create form, first project (redirect)", status=302)]
    for key in CHARTS:
        for time_range in ("24h", "7d"):
            samples.append(s("dashboards:chart", f"chart {key} {time_range}", kwargs=(("key", key),),
                             query=f"range={time_range}"))
            if not CHARTS[key].over_time:
                break
        samples.append(s("dashboards:chart_csv", f"chart {key} CSV 7d", kwargs=(("key", key),), query="range=7d"))
    team = (("project", "bench"),)
    samples.append(s("dashboards:team", "team page", kwargs=team))
    for key in TEAM_CHARTS:
        samples.append(s("dashboards:team_chart", f"team chart {key} 24h", kwargs=(*team, ("key", key))))
    samples.append(s("dashboards:team_chart_csv", "team chart team-gpus CSV 7d", kwargs=(*team, ("key", "team-gpus")),
                     query="range=7d"))
    samples.append(s("jobs:argv_preview", "job form: argument list (live)",
                     query="prefix=pool0&pool0-command=python3+-c+%22print(1)%22&pool0-args=--lr+0.1"))
    return samples


def unsampled_routes(samples: list[Sample]) -> list[str]:
    """Page routes of the URL conf (API views, the admin site and NOT_PAGES aside) that no sample
    requests: a new page shows up here until the benchmark measures it."""
    from tests.security.urlconf import routes

    sampled = {sample.route for sample in samples}
    return [f"{route.name} (/{route.route})" for route in routes()
            if not route.is_api and route.name not in NOT_PAGES and route.name not in sampled]


def _measure(client: Any, sample: Sample, url: str, repeat: int) -> dict[str, Any]:
    from bench.scheduler_pass import counting_queries

    response = client.get(url)
    if response.status_code != sample.status:
        raise RuntimeError(f"{sample.label}: {url} answered {response.status_code}, not {sample.status}")
    times, cpu = [], []
    for _ in range(repeat):
        began, began_cpu = time.perf_counter(), time.process_time()
        client.get(url)
        times.append((time.perf_counter() - began) * 1000)
        cpu.append((time.process_time() - began_cpu) * 1000)
    _, queries = counting_queries(lambda: client.get(url))()
    times.sort()
    p95 = times[min(len(times) - 1, round(0.95 * (len(times) - 1)))]
    return {"page": sample.label, "route": sample.route, "url": url, "p50_ms": statistics.median(times),
            "p95_ms": p95, "max_ms": times[-1], "cpu_p50_ms": statistics.median(cpu), "runs": repeat,
            "queries": queries.total, "kb": len(response.content) / 1024, "under_target": p95 < TARGET_MS}


def bench_pages(sizes: Sizes) -> Section:
    import gc
    import sys

    from django.db import connection
    from django.test import Client

    samples = _samples()
    missing = unsampled_routes(samples)
    for route in missing:  # before the minutes of building: a new page must not go unmeasured unnoticed
        print(f"pages: NO SAMPLE for page route {route}: add one to bench/pages.py", file=sys.stderr)
    dataset = build_dataset(sizes)
    # Building the dataset left millions of objects in this process, which a web worker never holds;
    # frozen, they are not rescanned by every full garbage collection during the timed requests.
    gc.collect()
    gc.freeze()
    clients = {"member": Client(), "admin": Client(), "anonymous": Client()}
    clients["member"].force_login(dataset.user)
    clients["admin"].force_login(dataset.slurm_admin)
    section = Section(
        name="pages",
        key=("page",),
        title=(f"Server time per page: {sizes.page_active_jobs:,} active and {sizes.page_finished_jobs:,} finished "
               f"jobs, {sizes.page_nodes:,} nodes, {sizes.page_studies} studies, {sizes.page_pipelines} pipelines, "
               f"{sizes.page_resources} persistent resources, a Slurm cluster with {sizes.page_slurm_pending:,} "
               f"pending and {sizes.page_slurm_finished:,} finished jobs, a week of dashboard samples"),
        columns=[Column("page", "page"), Column("p50_ms", "p50 ms"), Column("p95_ms", "p95 ms"),
                 Column("max_ms", "max ms"), Column("cpu_p50_ms", "CPU p50 ms"), Column("queries", "SQL"),
                 Column("kb", "KB"),
                 Column("under_target", f"p95 < {TARGET_MS:.0f} ms")],
    )
    for sample in samples:
        section.rows.append(_measure(clients[sample.who], sample, sample.url(dataset), sizes.page_repeat))
    section.rows += [{"page": f"NO SAMPLE: {route}", "under_target": False} for route in missing]
    slow = [row["page"] for row in section.rows if not row["under_target"]]
    section.notes += [
        (f"Dataset built in {dataset.build_seconds:.0f} s (bulk inserts, studies, pipelines and resources through "
         "their services, a week of samples, one scheduler pass, one Slurm pass, ANALYZE)."),
        ("Django test client in-process: middleware, views, SQL and templates, no network. Logged in as a member "
         "of two projects (the Slurm pages as the cluster's administrator); the finished tab never counts its rows."),
        ("CPU p50 = this process's CPU time per request ("
         + ("SQLite runs in-process, so it includes the queries" if connection.vendor == "sqlite"
            else "PostgreSQL's own work on the queries is not in it")
         + "): unlike wall time, it does not grow when other work shares the machine."),
        (f"Every page under {TARGET_MS:.0f} ms at p95." if not slow else
         f"Over {TARGET_MS:.0f} ms at p95: {', '.join(slow)}."),
    ]
    if missing:
        section.notes.append(f"{len(missing)} page route(s) with no sample, not measured: {', '.join(missing)}.")
    section.extra.update(target_ms=TARGET_MS, unsampled_routes=missing,
                         skipped_routes=NOT_PAGES)
    return section
