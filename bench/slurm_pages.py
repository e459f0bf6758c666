"""sprio of a long queue through the database: the priority page, the sprio API and the report
behind both, over N pending jobs of one Slurm cluster (10,000 in the full run), and the scheduler
pass that computes their priorities.

The cluster is the seed's (PriorityWeightAge 1000, PriorityWeightFairshare 10000, preempt/
partition_prio) on 16 simulated B200x8 nodes, with 20 users in 4 accounts and some usage so Fair
Tree ranks them apart. Jobs are bulk-inserted pending (begin time reached, every node drained so
none starts); the first scheduler pass over them (every priority computed, main + backfill) and the
next one are timed, then each of the three reads. Target: the page and the API under 0.5 s at
10,000 jobs.
"""

from __future__ import annotations

import datetime as dt
import random
import statistics
import time
from collections.abc import Callable
from functools import partial
from typing import TypeVar

from bench.environment import collect_statistics
from bench.report import Column, Section
from bench.scheduler_pass import counting_queries
from bench.timing import measure

T = TypeVar("T")

NODES = 16
ACCOUNTS = 4
USERS = 20
RUNS = 5
TARGET_SECONDS = 0.5


def slurm_cluster(now: dt.datetime, nodes: int = NODES):
    """The seed's cluster on ``nodes`` drained nodes (its partition a4), its accounts and users with
    usage; (cluster, admin, users)."""
    from trainhub.iam.models import Project
    from trainhub.iam.roles import ADMIN
    from trainhub.iam.services import membership_set, project_create, user_ensure
    from trainhub.inventory.models import Executor, Node, NodeState
    from trainhub.inventory.services import node_pool_ensure
    from trainhub.slurm.demo import SEED_SLURM_SPEC
    from trainhub.slurm.models import Association, SlurmCluster
    from trainhub.slurm.services.accounting import account_add, user_add
    from trainhub.slurm.services.clusters import cluster_create, cluster_delete

    for earlier in SlurmCluster.objects.all():  # the page benchmark's, run before in the same database
        cluster_delete(cluster=earlier)
    admin = user_ensure(username="bench-admin", password="bench", is_staff=True)
    project = Project.objects.filter(project_id="bench-slurm").first() or project_create(project_id="bench-slurm")
    membership_set(project=project, user=admin, role=ADMIN)
    # a pool never shrinks (node_pool_ensure): another size is another pool
    pool = "bench-a4" if nodes == NODES else f"bench-a4-{nodes}"
    node_pool_ensure(name=pool, machine_type="a4-highgpu-8g", node_count=nodes, executor=Executor.SIMULATED)
    node_pool_ensure(name="bench-login", machine_type="n1-standard-4", node_count=1)
    body = {"orchestratorSpec": {"slurmSpec": {**SEED_SLURM_SPEC, "partitions": [
        {"id": "a4", "node_pool_ids": [pool]}], "login_node_pool_id": "bench-login"}}}
    cluster = cluster_create(project=project, location="us-central1", cluster_id="bench", body=body, user=admin,
                             now=now)
    Node.objects.filter(pool__name=pool).update(state=NodeState.DRAIN, state_reason="benchmark",
                                                      last_heartbeat=now)
    rng = random.Random(42)
    users = []
    for index in range(ACCOUNTS):
        account_add(cluster=cluster, name=f"acct{index}", actor="bench", shares=rng.randint(1, 5), now=now)
    for index in range(USERS):
        name = f"user{index}"
        user_add(cluster=cluster, name=name, accounts=[f"acct{index % ACCOUNTS}"], actor="bench", now=now)
        usage = rng.uniform(0, 1e6)
        Association.objects.filter(cluster=cluster, user=name).update(raw_usage=usage, decay_usage=usage)
        users.append(name)
    return cluster, admin, users


def slurm_queue(cluster, users: list[str], jobs: int, now: dt.datetime) -> None:
    """``jobs`` pending jobs spread over the users, submitted during the last week; the database's
    statistics then collected (environment.collect_statistics)."""
    from trainhub.slurm.models import SlurmJob

    rng = random.Random(7)
    rows = []
    for index in range(jobs):
        user = users[index % len(users)]
        submitted = now - dt.timedelta(seconds=rng.randint(0, 7 * 86400))
        rows.append(SlurmJob(cluster=cluster, job_id=index + 1, name=f"job{index}", user_name=user,
                             account=f"acct{users.index(user) % ACCOUNTS}", partition="a4", qos="normal",
                             num_nodes=rng.choice((1, 1, 2, 4)), gpus_per_node=rng.choice((1, 2, 4, 8)),
                             time_limit=rng.choice((60, 240, 1440)), script="#!/bin/sh\ntrue\n",
                             work_dir=f"/home/{user}", submit_time=submitted, begin_time=submitted,
                             accrue_time=submitted, reason="None"))
    SlurmJob.objects.bulk_create(rows, batch_size=2000)
    cluster.next_job_id = jobs + 1
    cluster.save(update_fields=["next_job_id"])
    collect_statistics()


def slurm_history(cluster, users: list[str], jobs: int, now: dt.datetime) -> None:
    """``jobs`` finished jobs (one run each, as sacct reads them) over the last 30 days, after
    the job ids already taken; a fifth ended today, so sacct's default window is not empty."""
    from trainhub.slurm.models import JobRun, JobState, SlurmJob

    rng = random.Random(9)
    first = cluster.next_job_id
    rows, runs = [], []
    for index in range(jobs):
        user = users[index % len(users)]
        ended = now - dt.timedelta(seconds=rng.uniform(60, (0.5 if index % 5 == 0 else 30) * 86400))
        started = ended - dt.timedelta(seconds=rng.uniform(60, 12 * 3600))
        submitted = started - dt.timedelta(seconds=rng.expovariate(1 / 1800))
        state = rng.choices((JobState.COMPLETED, JobState.FAILED, JobState.CANCELLED, JobState.TIMEOUT),
                            (80, 10, 7, 3))[0]
        nodes, gpus = rng.choice((1, 1, 2, 4)), rng.choice((1, 2, 4, 8))
        exit_code = 0 if state == JobState.COMPLETED else 1
        job = SlurmJob(cluster=cluster, job_id=first + index, name=f"done{index}", user_name=user,
                       account=f"acct{users.index(user) % ACCOUNTS}", partition="a4", qos="normal", num_nodes=nodes,
                       gpus_per_node=gpus, time_limit=1440, script="#!/bin/sh\ntrue\n", work_dir=f"/home/{user}",
                       state=state, reason="None", submit_time=submitted, begin_time=submitted,
                       accrue_time=submitted, start_time=started, end_time=ended, node_list=f"a4-[{index % 4}]",
                       exit_code=exit_code)
        rows.append(job)
        runs.append(JobRun(job=job, index=0, state=state, submit_time=submitted, start_time=started, end_time=ended,
                           node_list=job.node_list, num_nodes=nodes, alloc_cpus=nodes * 8, alloc_gpus=nodes * gpus,
                           billing=float(nodes * gpus), exit_code=exit_code, max_rss_kb=rng.randint(10**5, 10**8)))
    SlurmJob.objects.bulk_create(rows, batch_size=2000)
    JobRun.objects.bulk_create(runs, batch_size=2000)
    cluster.next_job_id = first + jobs
    cluster.save(update_fields=["next_job_id"])


def _fresh_queue(cluster) -> None:
    """The queue as it was loaded: no priority computed, no reason, no estimate (so the next pass is
    a first pass again)."""
    from trainhub.slurm.models import SlurmCluster, SlurmJob

    SlurmJob.objects.filter(cluster=cluster).update(
        priority=0, priority_time=None, reason="None", expected_start=None, factor_age=0.0, factor_assoc=0.0,
        factor_fairshare=0.0, factor_jobsize=0.0, factor_partition=0.0, factor_qos=0.0, factor_tres={})
    SlurmCluster.objects.filter(pk=cluster.pk).update(last_priority_time=None)


def _with_cpu(fn: Callable[[], T], cpu: list[float]) -> Callable[[], T]:
    """``fn``, appending the process CPU seconds of each call to ``cpu`` (wall time on a shared
    machine swings with the load; CPU time much less)."""
    def run() -> T:
        start = time.process_time()
        result = fn()
        cpu.append(time.process_time() - start)
        return result
    return run


def _pass_rows(cluster, jobs: int, now: dt.datetime) -> list[dict]:
    """The first pass over the fresh queue (3 runs, the queue reset before each) and the next pass
    5 s later with nothing changed (3 runs): wall and CPU seconds, SQL statements."""
    from trainhub.slurm.services.passes import cluster_pass

    def first_pass_done() -> None:
        _fresh_queue(cluster)
        cluster_pass(cluster=cluster, now=now)

    cases = (("scheduler pass, first (priorities + schedule)", partial(_fresh_queue, cluster), now, "first"),
             ("scheduler pass, next (5 s later, nothing changed)", first_pass_done, now + dt.timedelta(seconds=5),
              "next"))
    rows = []
    for what, setup, moment, label in cases:
        cpu: list[float] = []
        run = partial(cluster_pass, cluster=cluster, now=moment)
        timing = measure(_with_cpu(run, cpu), repeat=3, setup=setup, label=f"slurm_pages-pass-{label}-{jobs}")
        setup()
        _, queries = counting_queries(run)()
        rows.append({"what": what, "jobs": jobs, **timing.figures("s"), "cpu_s": statistics.median(cpu),
                     "queries": queries.total, "under_target": None})
    return rows


def bench_slurm_pages(sizes) -> Section:
    from django.test import Client
    from django.utils import timezone

    from trainhub.slurm import reports

    jobs = sizes.page_slurm_pending  # 10k pending (1k quick), the size the README states
    now = timezone.now().replace(microsecond=0)
    cluster, admin, users = slurm_cluster(now)
    slurm_queue(cluster, users, jobs, now)
    pass_rows = _pass_rows(cluster, jobs, now)
    client = Client()
    client.force_login(admin)
    base = "/slurm/projects/bench-slurm/locations/us-central1/clusters/bench"
    api = "/v1/projects/bench-slurm/locations/us-central1/slurmClusters/bench/sprio"
    cpu: dict[str, list[float]] = {"report": [], "api": [], "page": []}
    timings = {
        "report": measure(_with_cpu(lambda: reports.sprio(cluster, now=now), cpu["report"]), repeat=RUNS,
                          label=f"slurm_pages-report-{jobs}"),
        "api": measure(_with_cpu(lambda: client.get(api), cpu["api"]), repeat=RUNS, label=f"slurm_pages-api-{jobs}"),
        "page": measure(_with_cpu(lambda: client.get(f"{base}/priority"), cpu["page"]), repeat=RUNS,
                        label=f"slurm_pages-page-{jobs}"),
    }
    listed = len(timings["report"].result.text.splitlines()) - 1
    assert timings["api"].result.status_code == 200 and timings["page"].result.status_code == 200
    section = Section(
        name="slurm_pages",
        key=("what", "jobs"),
        title=f"sprio of {jobs:,} pending jobs through the database (Slurm cluster, {NODES} nodes, {USERS} users)",
        columns=[Column("what", "what"), Column("jobs", "jobs"), Column("median_s", "median s"),
                 Column("best_s", "best s"), Column("cpu_s", "CPU s"), Column("queries", "SQL"),
                 Column("under_target", f"under {TARGET_SECONDS} s")],
    )
    for what, timing in timings.items():
        section.rows.append({"what": f"sprio {what}", "jobs": listed, **timing.figures("s"),
                             "cpu_s": statistics.median(cpu[what]), "under_target": timing.median < TARGET_SECONDS})
    section.rows += pass_rows
    section.notes += [
        "report = trainhub.slurm.reports.sprio (query + PriorityBreakdown + sprio text); api = GET .../sprio "
        "(JSON text and rows); page = GET the priority page (its first 500 jobs, linked, and the total: the page "
        "shows the queue 500 jobs at a time).",
        "First pass: the queue as loaded (reset before each of 3 runs), every job's priority computed (Fair "
        "Tree over 25 associations), then main + backfill on drained nodes, reasons stored. Next pass: the "
        "same 5 s later, nothing changed (no priority due). CPU s = this process's CPU time (median), "
        "steadier than wall time on a shared machine; SQL counted in one more, untimed run.",
    ]
    return section
