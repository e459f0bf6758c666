"""sbatch over REST: how many Slurm jobs gunicorn accepts per second with 1 and with 2 clients, what
one costs each party in CPU, and what one costs in-process (CPU and SQL statements).

``slurm_submit`` uses the ``slurm_pages`` cluster (the seed's Slurm cluster on drained simulated
nodes, 20 users in 4 accounts), so every job stays pending and no scheduler pass starts one. sbatch
reads every node of its partition (16 here), so its in-process cost is measured on a partition of
256 nodes too. Each client is a process with one kept-alive plain-socket connection sending ``POST
.../slurmClusters/bench/jobs`` with ``-p a4 -A acct0 -t 10 --wrap hostname`` (what ``trainhub slurm
sbatch`` sends), as ``rest_submit`` sends CustomJobs (bench.submission.http_run). Real Slurm 22.05 on
this kind of machine accepted 264 sbatch/s from one submitter and 430/s from two (issue 21);
``bench/slurm_vs_real.py`` measures both sides in one run where the Slurm harness is running.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import statistics
import time

from bench.report import Column, Section
from bench.scheduler_pass import QUICK, Sizes, counting_queries
from bench.submission import _loads, _request_bytes, http_run

SBATCH_ARGS = ["-p", "a4", "-A", "acct0", "-t", "10", "--wrap", "hostname"]
CLIENT_COUNTS = (1, 2)
#: A partition this big too, in-process: sbatch reads every node of its partition, so its CPU grows with it.
WIDE_PARTITION_NODES = 256
WARM_UP_PER_CLIENT = 20


def sbatch_target(now: dt.datetime, nodes: int | None = None):
    """The ``slurm_pages`` cluster (its partition of ``nodes`` nodes; by default slurm_pages's) with its
    administrator as a user of acct0: (cluster, admin, path)."""
    from bench.slurm_pages import NODES, slurm_cluster
    from trainhub.slurm.services.accounting import user_add

    cluster, admin, _ = slurm_cluster(now, nodes or NODES)
    user_add(cluster=cluster, name=admin.get_username(), accounts=["acct0"], actor="bench", now=now)
    path = f"/v1/projects/{cluster.project.project_id}/locations/{cluster.location}/slurmClusters/{cluster.cluster_id}/jobs"
    return cluster, admin, path


def _in_process(path: str, token: str, count: int) -> dict:
    """CPU ms and SQL statements per sbatch through Django's test client in this process."""
    from django.test import Client

    client = Client(HTTP_AUTHORIZATION=f"Bearer {token}")
    body = json.dumps({"sbatchArgs": SBATCH_ARGS})

    def post_all() -> set[int]:
        return {client.post(path, body, content_type="application/json").status_code for _ in range(count)}

    post_all()  # warm-up
    cpu_runs = []
    for _ in range(3):
        cpu = time.process_time()
        post_all()
        cpu_runs.append(time.process_time() - cpu)
    statuses, queries = counting_queries(post_all)()
    return {"statuses": sorted(statuses), "cpu_ms_per_request": statistics.median(cpu_runs) / count * 1000,
            **queries.figures(count)}


def bench_slurm_submit(sizes: Sizes) -> Section:
    from trainhub.iam.services import api_token_rotate
    from trainhub.slurm.models import SlurmJob
    from trainhub.slurm.services.clusters import cluster_delete

    count = 200 if sizes == QUICK else 600
    cluster, admin, path = sbatch_target(dt.datetime.now(dt.UTC))
    token = api_token_rotate(user=admin).key
    request = _request_bytes(path, token, json.dumps({"sbatchArgs": SBATCH_ARGS}).encode())
    in_process = _in_process(path, token, 50 if sizes == QUICK else 100)
    rows = []
    for clients in CLIENT_COUNTS:
        before = SlurmJob.objects.filter(cluster=cluster).count()
        run = http_run([[request] * (count // clients) for _ in range(clients)], warm_up=WARM_UP_PER_CLIENT)
        sent = count // clients * clients
        stored = SlurmJob.objects.filter(cluster=cluster).count() - before - WARM_UP_PER_CLIENT * clients
        rows.append({"clients": clients, "jobs": sent, "stored": stored, **run.figures(sent),
                     "load": f"{_loads(run.load_before)} -> {_loads(run.load_after)}"})
    cluster_delete(cluster=cluster)
    wide, wide_admin, wide_path = sbatch_target(dt.datetime.now(dt.UTC), WIDE_PARTITION_NODES)
    wide_in_process = _in_process(wide_path, api_token_rotate(user=wide_admin).key, 50 if sizes == QUICK else 100)
    cluster_delete(cluster=wide)
    cores = os.cpu_count() or 1
    section = Section(
        name="slurm_submit",
        key=("clients",),
        title=f"sbatch over REST: {count:,} POST .../slurmClusters/bench/jobs, {run.server_label}",
        columns=[Column("clients", "clients"), Column("jobs", "jobs"), Column("jobs_per_second", "jobs/s"),
                 Column("p50_ms", "p50 ms"), Column("p99_ms", "p99 ms"),
                 Column("server_cpu_ms_per_job", "web CPU ms/job"),
                 Column("database_cpu_ms_per_job", "PG CPU ms/job"),
                 Column("client_cpu_ms_per_job", "clients CPU ms/job"),
                 Column("cpu_ceiling_jobs_per_second", f"CPU ceiling jobs/s ({cores} cores)"),
                 Column("load", "load average before -> after")],
        rows=rows,
        extra={"in_process": in_process, f"in_process_{WIDE_PARTITION_NODES}_nodes": wide_in_process,
               "real_slurm_22_05_jobs_per_second": {"1": 264, "2": 430}},
    )
    section.notes += [
        f"in-process (Django's test client, no HTTP): {in_process['cpu_ms_per_request']:.2f} CPU ms and "
        f"{in_process['queries_per_job']:.1f} SQL statements per sbatch (answers {in_process['statuses']}); "
        f"to a partition of {WIDE_PARTITION_NODES} nodes: {wide_in_process['cpu_ms_per_request']:.2f} CPU ms and "
        f"{wide_in_process['queries_per_job']:.1f} statements (answers {wide_in_process['statuses']})",
        "real Slurm 22.05 measured on this kind of machine, quiet (issue 21): 264 sbatch/s from 1 submitter, "
        "430/s from 2; bench/slurm_vs_real.py measures both in one run where the Slurm harness runs",
        "CPU ms/job as in rest_submit (gunicorn and PostgreSQL backends from /proc, clients their process time); "
        f"CPU ceiling = {cores} cores / (gunicorn + PostgreSQL + Redis + clients) per job",
        *[f"{row['clients']} client(s): answers {row['statuses']}, {row['stored']} jobs stored"
          for row in rows if row["stored"] != row["jobs"] or row["accepted"] != row["jobs"]],
    ]
    return section
