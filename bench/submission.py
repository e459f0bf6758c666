"""REST submission: CustomJobs POSTed by 2 concurrent clients to gunicorn, as users would send them.

The server is gunicorn (sync workers) on the benchmark's database - PostgreSQL when DATABASE_URL
is set, else the temporary SQLite file, which is printed as a note since SQLite serialises writers
- and the benchmark's embedded Redis. Each client is a process with one keep-alive HTTP session
and a bearer token, sending the workload's job bodies one after another; every answer must be
200. Reported: accepted jobs per second over the whole run, and the p50/p99 latency of a request.
"""

from __future__ import annotations

import multiprocessing
import os
import socket
import statistics
import subprocess
import sys
import time
from typing import Any

import requests

from bench.report import Column, Section
from bench.scheduler_pass import LOCATION, Sizes, bench_project, clear_jobs
from bench.workload import generate_jobs

CLIENTS = 2
GUNICORN_WORKERS = 3
WARM_UP_PER_CLIENT = 25
TARGET_JOBS_PER_SECOND = 500


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _client(url: str, token: str, bodies: list[dict[str, Any]]) -> tuple[list[float], dict[int, int]]:
    """Send ``bodies`` one after another; the latency of each request and the count per status."""
    session = requests.Session()
    session.headers["Authorization"] = f"Bearer {token}"
    latencies, statuses = [], {}
    for body in bodies:
        begun = time.perf_counter()
        status = session.post(url, json=body, timeout=60).status_code
        latencies.append(time.perf_counter() - begun)
        statuses[status] = statuses.get(status, 0) + 1
    return latencies, statuses


def _percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def _start_gunicorn(port: int) -> subprocess.Popen:
    server = subprocess.Popen(  # noqa: S603 - our own argv
        [sys.executable, "-m", "gunicorn", "trainhub.wsgi:application", "--bind", f"127.0.0.1:{port}",
         "--workers", str(GUNICORN_WORKERS), "--log-level", "warning"],
        env={**os.environ, "DEBUG": "false", "SECRET_KEY": "trainhub-bench"}, stdin=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if requests.get(f"http://127.0.0.1:{port}/healthz", timeout=2).status_code == 200:
                return server
        except requests.RequestException:
            time.sleep(0.2)
    server.kill()
    raise RuntimeError("gunicorn did not answer /healthz within 60 s")


def bench_rest_submit(sizes: Sizes) -> Section:
    from django.db import connection

    from trainhub.iam.services import api_token_get_or_create

    project, user = bench_project()
    token = api_token_get_or_create(user=user).key
    count = sizes.rest_jobs
    bodies = [job.body() for job in generate_jobs(count)]
    shares = [bodies[index::CLIENTS] for index in range(CLIENTS)]
    port = _free_port()
    url = f"http://127.0.0.1:{port}/v1/projects/{project.project_id}/locations/{LOCATION}/customJobs"
    connection.close()  # the client processes are forked; they must not share this connection
    server = _start_gunicorn(port)
    context = multiprocessing.get_context("fork")
    try:
        with context.Pool(CLIENTS) as pool:
            pool.starmap(_client, [(url, token, share[:WARM_UP_PER_CLIENT]) for share in shares])
            clear_jobs()
            connection.close()
            begun = time.perf_counter()
            results = pool.starmap(_client, [(url, token, share) for share in shares])
            elapsed = time.perf_counter() - begun
    finally:
        server.terminate()
        server.wait(timeout=30)
    latencies = [latency for client_latencies, _ in results for latency in client_latencies]
    statuses: dict[int, int] = {}
    for _, client_statuses in results:
        for status, n in client_statuses.items():
            statuses[status] = statuses.get(status, 0) + n
    from trainhub.jobs.models import CustomJob

    stored = CustomJob.objects.count()
    clear_jobs()
    accepted = statuses.get(200, 0)
    row = {
        "jobs": count, "clients": CLIENTS, "gunicorn_workers": GUNICORN_WORKERS, "seconds": elapsed,
        "accepted": accepted, "stored": stored, "jobs_per_second": accepted / elapsed,
        "p50_ms": statistics.median(latencies) * 1000, "p99_ms": _percentile(latencies, 0.99) * 1000,
        "max_ms": max(latencies) * 1000, "statuses": {str(k): v for k, v in sorted(statuses.items())},
    }
    section = Section(
        name="rest_submit",
        title=f"REST submission: {count:,} CustomJobs, {CLIENTS} concurrent clients, gunicorn "
              f"({GUNICORN_WORKERS} sync workers)",
        columns=[Column("jobs", "jobs"), Column("accepted", "accepted"), Column("seconds", "s"),
                 Column("jobs_per_second", "jobs/s"), Column("p50_ms", "p50 ms"), Column("p99_ms", "p99 ms"),
                 Column("max_ms", "max ms")],
        rows=[row],
        extra={"target_jobs_per_second": TARGET_JOBS_PER_SECOND},
    )
    section.notes.append(f"target: at least {TARGET_JOBS_PER_SECOND} jobs/s accepted - "
                         + ("met" if row["jobs_per_second"] >= TARGET_JOBS_PER_SECOND else "NOT met"))
    if accepted != count or stored != accepted:
        section.notes.append(f"answers {row['statuses']}; {stored} jobs stored")
    if connection.vendor == "sqlite":
        section.notes.append("database: SQLite (DATABASE_URL not set) - one writer at a time; the figure that "
                             "matters is on PostgreSQL: set DATABASE_URL to a throwaway database")
    section.notes.append(f"clients and server share this machine's {os.cpu_count()} cores; each client is a process "
                         f"with one keep-alive connection; {WARM_UP_PER_CLIENT} warm-up requests per client first")
    return section
