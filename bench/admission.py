"""Admission on a Kueue-like load: many small jobs over 30 projects, bounded by per-project quotas.

Every pass admits what the quotas allow; the admitted jobs are then finished at once (replicas
released and jobs marked SUCCEEDED with bulk UPDATEs: finishing is not what is measured) and the
clock moves on, until every job has been admitted. The figure is jobs admitted per second of time
spent inside ``scheduler_pass``. After every pass the GPUs held per project are read back from the
database and compared with the limits.
"""

from __future__ import annotations

import datetime as dt
import random
import time
from typing import TYPE_CHECKING

from bench.report import Column, Section

if TYPE_CHECKING:
    from bench.scheduler_pass import Sizes

PROJECTS = 30
QUOTA_GPUS = 16
NODES = 1_000
METRIC = "custom_model_training_nvidia_a100_gpus"
LOCATION = "us-central1"


def _setup(job_count: int, now: dt.datetime) -> None:
    from bench.scheduler_pass import clear_jobs
    from trainhub.iam.services import project_create, user_ensure
    from trainhub.inventory.models import Executor, Node
    from trainhub.inventory.services import node_heartbeat, node_pool_ensure
    from trainhub.jobs.models import CustomJob
    from trainhub.jobs.spec import parse_custom_job
    from trainhub.scheduling.models import Quota
    from trainhub.scheduling.quota import quota_demand
    from trainhub.scheduling.services import working_memory_reconcile

    clear_jobs()  # another benchmark's queue (run before this one in the same database) would compete
    user = user_ensure(username="admission", password="admission-password")
    projects = [project_create(project_id=f"team-{index:02d}") for index in range(PROJECTS)]
    Quota.objects.bulk_create(Quota(project=p, location=LOCATION, metric=METRIC, limit=QUOTA_GPUS) for p in projects)
    node_pool_ensure(name="admission-a100", machine_type="a2-highgpu-1g", node_count=NODES,
                     executor=Executor.SIMULATED)
    node_heartbeat(node_ids=list(Node.objects.filter(pool__name="admission-a100").values_list("pk", flat=True)),
                   now=now + dt.timedelta(days=1))  # alive for the whole simulated run
    rng = random.Random(42)
    rows = []
    for index in range(job_count):
        workers = rng.choice((0, 0, 0, 1, 3))  # mostly single-replica jobs, some small gangs
        pools = [{"machineSpec": {"machineType": "a2-highgpu-1g"}, "replicaCount": 1,
                  "containerSpec": {"imageUri": "img", "command": ["true"]}}]
        if workers:
            pools.append({**pools[0], "replicaCount": workers})
        parsed = parse_custom_job({"displayName": f"adm-{index}", "jobSpec": {"workerPoolSpecs": pools}})
        created = now - dt.timedelta(seconds=job_count - index) / 1000
        rows.append(CustomJob(
            project=projects[rng.randrange(PROJECTS)], location=LOCATION, job_id=str(2 * 10**17 + index),
            display_name=parsed.document["displayName"], spec=parsed.document, labels={}, strategy=parsed.strategy,
            gpu_count=1 + workers, replica_count=1 + workers,
            quota_demand=quota_demand(((p.replica_count, p.shape) for p in parsed.pools), parsed.strategy),
            timeout_seconds=parsed.timeout_seconds, created_by=user, create_time=created, update_time=created))
    CustomJob.objects.bulk_create(rows, batch_size=1000)
    working_memory_reconcile(now=now)


def _finish_admitted(now: dt.datetime) -> None:
    from django.db import transaction

    from trainhub.jobs import states
    from trainhub.jobs.models import CustomJob, Replica

    with transaction.atomic():
        running = list(Replica.objects.filter(active=True).values_list("job_id", flat=True).distinct())
        Replica.objects.filter(active=True).update(active=False, state=states.REPLICA_EXITED, exit_code=0, ended_at=now)
        CustomJob.objects.filter(pk__in=running).update(state=states.SUCCEEDED, start_time=now, end_time=now,
                                                        update_time=now)


def _max_over_limit() -> int:
    """The largest excess of GPUs held over a quota limit, read from the database (<= 0: held)."""
    from trainhub.scheduling.selectors import quota_limits, quota_usage

    limits = quota_limits()
    return max((gpus - limits[key] for key, gpus in quota_usage().items() if key in limits), default=0)


def bench_admission(sizes: "Sizes") -> Section:
    from django.utils import timezone

    from trainhub.scheduling.services import scheduler_pass

    job_count = sizes.admission_jobs
    now = timezone.now()
    _setup(job_count, now)
    admitted = passes = 0
    pass_seconds = pass_cpu_seconds = 0.0
    worst_excess = 0
    while admitted < job_count and passes < 10 * job_count:
        started, cpu_started = time.perf_counter(), time.process_time()
        result = scheduler_pass(now=now)
        pass_seconds += time.perf_counter() - started
        pass_cpu_seconds += time.process_time() - cpu_started
        passes += 1
        admitted += result.placed
        worst_excess = max(worst_excess, _max_over_limit())
        _finish_admitted(now)
        now += dt.timedelta(seconds=1)
    section = Section(
        name="admission",
        key=("jobs",),
        title=(f"Admission, Kueue-like load: {job_count:,} jobs over {PROJECTS} projects "
               f"({QUOTA_GPUS} A100 quota each, {NODES:,} nodes)"),
        columns=[Column("jobs", "jobs"), Column("admitted", "admitted"), Column("passes", "passes"),
                 Column("pass_seconds", "time in passes s"), Column("jobs_per_second", "admitted jobs/s"),
                 Column("pass_cpu_seconds", "cpu s"), Column("jobs_per_cpu_second", "admitted jobs/cpu s"),
                 Column("quota_never_exceeded", "quota never exceeded")],
    )
    section.rows.append({"jobs": job_count, "admitted": admitted, "passes": passes, "pass_seconds": pass_seconds,
                         "jobs_per_second": admitted / pass_seconds if pass_seconds else None,
                         "pass_cpu_seconds": pass_cpu_seconds,
                         "jobs_per_cpu_second": admitted / pass_cpu_seconds if pass_cpu_seconds else None,
                         "quota_never_exceeded": "yes" if worst_excess <= 0 else f"no (+{worst_excess})"})
    section.notes += [
        "Each pass admits what the quotas allow; admitted jobs are then finished with bulk UPDATEs (not timed).",
        "Kueue's own scalability test admits about 43 jobs/s; the target here is at least 1,000 jobs/s.",
        ("cpu s: CPU seconds of this process inside the passes (with SQLite that includes the database; never "
         "Redis), steadier than wall time on a busy machine."),
    ]
    return section
