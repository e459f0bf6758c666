"""REST submission: what one CustomJob create costs the server, and how many gunicorn accepts per second.

``rest_submit_cpu`` POSTs CustomJobs through Django's test client in this process: CPU time per
request (``time.process_time``: load from other processes hardly changes it, unlike wall time),
SQL queries and Redis commands per request. With ``--profile`` the loop runs under cProfile.

``rest_submit`` starts gunicorn (``gunicorn.conf.py``: threaded workers that keep connections
alive) on the benchmark's database - PostgreSQL when DATABASE_URL is set, else the temporary
SQLite file, printed as a note since SQLite serialises writers - and the benchmark's
Redis, and 2 client processes that each send their share of the workload's jobs one after another
over one kept-alive connection (a plain socket and whole requests encoded beforehand, so that the
clients take as little of the shared cores as they can). Every answer must be 200. Reported: accepted jobs
per second over the whole run, the p50/p99 latency of a request, and the CPU time each job cost
every process involved - gunicorn, the PostgreSQL backends, Redis, the clients - read from
/proc and Redis INFO, which other work on the machine does not inflate the way it does wall time.
Their sum bounds what the machine's cores can accept when nothing else runs.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import socket
import statistics
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from bench.environment import (
    CpuClock,
    free_port,
    gunicorn_settings,
    process_tree,
    shared_redis_notes,
    start_celery_worker,
    start_web,
)
from bench.report import Column, Section
from bench.scheduler_pass import (
    LOCATION,
    Sizes,
    bench_project,
    clear_jobs,
    counting_queries,
    inventory_for_the_workload,
)
from bench.timing import measure
from bench.workload import generate_jobs

CLIENTS = 2
WARM_UP_PER_CLIENT = 25
TARGET_JOBS_PER_SECOND = 500
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def _request_bytes(path: str, token: str, body: bytes) -> bytes:
    return (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n").encode() + body


def _read_response(connection: socket.socket, pending: bytearray) -> int:
    """Read one HTTP/1.1 response with a Content-Length off a kept-alive socket; return its status."""
    while (end := pending.find(b"\r\n\r\n")) < 0:
        pending += _receive(connection)
    head = bytes(pending[:end]).decode("latin-1")
    length = next((int(line.split(":", 1)[1]) for line in head.split("\r\n")[1:]
                   if line.lower().startswith("content-length:")), None)
    if length is None:
        raise RuntimeError(f"response without Content-Length: {head!r}")
    while len(pending) < end + 4 + length:
        pending += _receive(connection)
    del pending[:end + 4 + length]
    return int(head.split(" ", 2)[1])


def _receive(connection: socket.socket) -> bytes:
    chunk = connection.recv(65536)
    if not chunk:
        raise RuntimeError("the server closed the connection")
    return chunk


#: Where http_run's client processes (forked after it is set) wait for the timed run to begin.
_start_line: Any = None
#: Seconds a party waits at the start line before the run is given up.
START_LINE_TIMEOUT = 300


def _client(port: int, requests: list[bytes], warm_up: int) -> tuple[list[float], dict[int, int], float]:
    """Send the first ``warm_up`` of ``requests`` untimed, wait at the start line, then send all of
    ``requests`` (whole HTTP requests) one after another on the same kept-alive connection: each
    latency, the count per status, CPU seconds. The warm-up goes to the worker the timed requests
    go to (a kept-alive connection stays with the worker that accepted it), so a worker's first
    requests, which load what it loads lazily, are never timed. Plain sockets and requests encoded
    beforehand keep the client's share of the cores, which it takes from the server, small."""
    connection = socket.create_connection(("127.0.0.1", port), timeout=60)
    connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    pending = bytearray()
    for request in requests[:warm_up]:
        connection.sendall(request)
        _read_response(connection, pending)
    _start_line.wait(START_LINE_TIMEOUT)  # warmed up
    _start_line.wait(START_LINE_TIMEOUT)  # the server's CPU is read: go
    latencies, statuses = [], {}
    cpu = time.process_time()
    for request in requests:
        begun = time.perf_counter()
        connection.sendall(request)
        status = _read_response(connection, pending)
        latencies.append(time.perf_counter() - begun)
        statuses[status] = statuses.get(status, 0) + 1
    cpu = time.process_time() - cpu
    connection.close()
    return latencies, statuses, cpu


def _percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def _process_cpu(pid: int) -> float | None:
    """User + system CPU seconds of a process (all its threads), or None if it is gone or not ours to read."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS  # utime, stime: fields 14 and 15 of stat


def _database_backends(exclude: Iterable[int] = ()) -> list[int]:
    """The PostgreSQL backend processes connected to the benchmark's database, other than ours
    (this thread's) and ``exclude``."""
    from django.db import connection

    if connection.vendor != "postgresql":
        return []
    with connection.cursor() as cursor:
        cursor.execute("SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
                       "AND pid <> pg_backend_pid()")
        excluded = set(exclude)
        return [pid for (pid,) in cursor.fetchall() if pid not in excluded]


class _DatabaseCpu(threading.Thread):
    """CPU of the database's backends over a run, read every half second: gunicorn's connections
    are replaced after CONN_MAX_AGE, and a backend's CPU can only be read while it lives."""

    def __init__(self, exclude: Iterable[int] = ()) -> None:
        super().__init__(daemon=True)
        self._exclude = tuple(exclude)
        self._finished = threading.Event()
        self._initial: dict[int, float] | None = None
        self._last: dict[int, float] = {}
        #: The most backends seen at one reading (the excluded ones and this thread's own not counted).
        self.most_backends = 0

    def run(self) -> None:
        from django.db import connection

        try:
            while True:
                backends = _database_backends(self._exclude)
                self.most_backends = max(self.most_backends, len(backends))
                readings = _cpu_of(backends)
                if self._initial is None:
                    self._initial = readings
                self._last.update(readings)
                if self._finished.wait(0.5):
                    break
            self._last.update(_cpu_of(_database_backends(self._exclude)))
        finally:
            connection.close()

    def spent(self) -> float:
        """Seconds since the first reading; a backend that appeared later counts from its start."""
        self._finished.set()
        self.join()
        return _cpu_spent(self._initial or {}, self._last)


def _redis_cpu() -> float:
    from trainhub.common.redis import get_redis

    info = get_redis().info("cpu")
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


def _cpu_of(pids: Iterable[int]) -> dict[int, float]:
    readings = {pid: _process_cpu(pid) for pid in pids}
    return {pid: cpu for pid, cpu in readings.items() if cpu is not None}


def _cpu_spent(before: dict[int, float], after: dict[int, float]) -> float:
    """CPU seconds between two readings; a process that appeared in between counts from zero."""
    return sum(cpu - before.get(pid, 0.0) for pid, cpu in after.items())


def bench_rest_submit(sizes: Sizes) -> Section:
    with inventory_for_the_workload():
        return _bench_rest_submit(sizes)


def bench_rest_submit_cpu(sizes: Sizes) -> Section:
    with inventory_for_the_workload():
        return _bench_rest_submit_cpu(sizes)


@dataclass
class HttpRun:
    """What one timed run of client processes against gunicorn gave: the wall time, every request's
    latency, the answers by status and the CPU seconds of each party."""

    elapsed: float
    latencies: list[float]
    statuses: dict[int, int]
    server_cpu: float
    #: Each gunicorn worker's CPU seconds, largest first.
    worker_cpu: list[float]
    database_cpu: float
    redis_cpu: float
    client_cpu: float
    stolen: float | None
    load_before: tuple[float, float, float]
    load_after: tuple[float, float, float]
    #: What served the requests (bench.environment.Web's label).
    server_label: str = ""

    def figures(self, count: int) -> dict[str, Any]:
        """The row of a run of ``count`` requests: rate, latencies, CPU ms per request of each party
        and the CPU ceiling (the machine's cores over their sum)."""
        from django.db import connection

        total_cpu = self.server_cpu + self.database_cpu + self.redis_cpu + self.client_cpu
        accepted = self.statuses.get(200, 0)
        return {
            "seconds": self.elapsed, "accepted": accepted, "jobs_per_second": accepted / self.elapsed,
            "p50_ms": statistics.median(self.latencies) * 1000, "p99_ms": _percentile(self.latencies, 0.99) * 1000,
            "max_ms": max(self.latencies) * 1000, "statuses": {str(k): v for k, v in sorted(self.statuses.items())},
            "server_cpu_ms_per_job": self.server_cpu / count * 1000,
            "database_cpu_ms_per_job": self.database_cpu / count * 1000 if connection.vendor == "postgresql" else None,
            "redis_cpu_ms_per_job": self.redis_cpu / count * 1000, "client_cpu_ms_per_job": self.client_cpu / count * 1000,
            "total_cpu_ms_per_job": total_cpu / count * 1000,
            "worker_cpu_shares": [round(cpu / self.server_cpu, 2) for cpu in self.worker_cpu] if self.server_cpu else [],
            "cpu_ceiling_jobs_per_second": (os.cpu_count() or 1) / (total_cpu / count) if total_cpu else None,
            "load_average_before": self.load_before, "load_average_after": self.load_after,
            "cpu_stolen_share": self.stolen,
        }


def http_run(shares: list[list[bytes]], *, warm_up: int, before_timed: Callable[[], None] = lambda: None) -> HttpRun:
    """Start the web tier (bench.environment.start_web) on the benchmark's database and Redis, have each client
    process send its first ``warm_up`` requests untimed, call ``before_timed``, then time every client
    sending its whole share over the same kept-alive connection."""
    global _start_line
    from django.db import connection

    port = free_port()
    connection.close()  # the client processes are forked; they must not share this connection
    server = start_web(port)
    context = multiprocessing.get_context("fork")
    load_before = os.getloadavg()
    _start_line = context.Barrier(len(shares) + 1)
    try:
        with context.Pool(len(shares)) as pool:
            sent = pool.starmap_async(_client, [(port, share, warm_up) for share in shares])
            _start_line.wait(START_LINE_TIMEOUT)
            before_timed()
            workers, server_pids = server.workers(), server.pids()
            server_before, redis_before = _cpu_of(server_pids), _redis_cpu()
            database = _DatabaseCpu()
            database.start()
            _start_line.wait(START_LINE_TIMEOUT)
            begun, clock = time.perf_counter(), CpuClock.read()
            results = sent.get()
            elapsed = time.perf_counter() - begun
            stolen = CpuClock.stolen_share_from(clock)
            server_after = _cpu_of(server_pids)
            worker_cpu = sorted((server_after.get(pid, 0.0) - server_before.get(pid, 0.0) for pid in workers),
                                reverse=True)
            run = HttpRun(elapsed=elapsed, latencies=[], statuses={},
                          server_cpu=_cpu_spent(server_before, server_after), worker_cpu=worker_cpu,
                          database_cpu=database.spent(), redis_cpu=_redis_cpu() - redis_before,
                          client_cpu=sum(cpu for _, _, cpu in results), stolen=stolen, load_before=load_before,
                          load_after=load_before, server_label=server.label)
    finally:
        server.terminate()
        server.wait(timeout=30)
    run.load_after = os.getloadavg()
    for client_latencies, client_statuses, _ in results:
        run.latencies += client_latencies
        for status, n in client_statuses.items():
            run.statuses[status] = run.statuses.get(status, 0) + n
    return run


def _bench_rest_submit(sizes: Sizes) -> Section:
    from django.db import connection

    from trainhub.iam.services import api_token_rotate

    project, user = bench_project()
    token = api_token_rotate(user=user).key  # only digests are stored: a fresh token to send
    count = sizes.rest_jobs
    path = f"/v1/projects/{project.project_id}/locations/{LOCATION}/customJobs"
    requests = [_request_bytes(path, token, json.dumps(job.body()).encode()) for job in generate_jobs(count)]
    run = http_run([requests[index::CLIENTS] for index in range(CLIENTS)], warm_up=WARM_UP_PER_CLIENT,
                   before_timed=clear_jobs)
    from trainhub.jobs.models import CustomJob

    stored = CustomJob.objects.count()
    clear_jobs()
    gunicorn = gunicorn_settings()
    row = {"jobs": count, "clients": CLIENTS, **{f"gunicorn_{key}": value for key, value in gunicorn.items()},
           "stored": stored, **run.figures(count)}
    accepted, cores = row["accepted"], os.cpu_count() or 1
    load_before, load_after, stolen = run.load_before, run.load_after, run.stolen
    section = Section(
        name="rest_submit",
        key=("jobs",),
        title=f"REST submission: {count:,} CustomJobs, {CLIENTS} concurrent clients, {run.server_label}",
        columns=[Column("jobs", "jobs"), Column("accepted", "accepted"), Column("seconds", "s"),
                 Column("jobs_per_second", "jobs/s"), Column("p50_ms", "p50 ms"), Column("p99_ms", "p99 ms"),
                 Column("max_ms", "max ms"), Column("server_cpu_ms_per_job", "web CPU ms/job"),
                 Column("database_cpu_ms_per_job", "PG CPU ms/job"), Column("redis_cpu_ms_per_job", "Redis CPU ms/job"),
                 Column("client_cpu_ms_per_job", "clients CPU ms/job"),
                 Column("cpu_ceiling_jobs_per_second", f"CPU ceiling jobs/s ({cores} cores)")],
        rows=[row],
        extra={"target_jobs_per_second": TARGET_JOBS_PER_SECOND},
    )
    section.notes.append(f"target: at least {TARGET_JOBS_PER_SECOND} jobs/s accepted - "
                         + ("met" if row["jobs_per_second"] >= TARGET_JOBS_PER_SECOND else "NOT met"))
    if accepted != count or stored != accepted:
        section.notes.append(f"answers {row['statuses']}; {stored} jobs stored")
    if connection.vendor == "sqlite":
        section.notes.append("database: SQLite (DATABASE_URL not set) - one writer at a time, and its work is done "
                             "inside gunicorn; the figure that matters is on PostgreSQL: set DATABASE_URL to a "
                             "throwaway database")
    section.notes += [
        f"load average (1/5/15 min) before {_loads(load_before)}, after {_loads(load_after)}: clients, server, "
        f"database and Redis share this machine's {cores} cores with whatever else runs",
        "CPU ms/job: CPU time of each party over the timed run divided by the jobs sent (gunicorn master and "
        "workers from /proc; the database's PostgreSQL backends from pg_stat_activity and /proc, read every 0.5 s; "
        "Redis from INFO cpu; clients from their own process time); "
        f"CPU ceiling = {cores} cores / their sum, the rate this machine could accept with nothing else running",
        *([] if stolen is None else [
            f"CPU stolen by the hypervisor during the timed run: {stolen:.0%} of the machine's CPU time - on a "
            f"shared VM the accepted rate drops by about as much"]),
        f"each client is a process with one kept-alive connection (a plain socket) sending requests encoded "
        f"beforehand; {WARM_UP_PER_CLIENT} warm-up requests per client first",
        f"share of gunicorn's CPU per worker process: {row['worker_cpu_shares']} - a kept-alive connection stays "
        f"with the worker that accepted it, so a share near [1.0, 0.0] means one Python process (one core at a "
        f"time) served every request",
        *shared_redis_notes("Redis CPU ms/job (INFO cpu)"),
    ]
    return section


def _loads(loads: tuple[float, float, float]) -> str:
    return "/".join(f"{load:.1f}" for load in loads)


def _bench_rest_submit_cpu(sizes: Sizes) -> Section:
    """CustomJob creates through Django's test client in this process: CPU, SQL and Redis per request."""
    from django.test import Client

    from trainhub.common.redis import get_redis
    from trainhub.iam.services import api_token_rotate

    project, user = bench_project()
    token = api_token_rotate(user=user).key  # only digests are stored: a fresh token to send
    count = sizes.submit_jobs
    bodies = [json.dumps(job.body()) for job in generate_jobs(count)]
    client = Client(HTTP_AUTHORIZATION=f"Bearer {token}")
    path = f"/v1/projects/{project.project_id}/locations/{LOCATION}/customJobs"

    cpu_runs: list[float] = []

    def post_all() -> set[int]:
        cpu = time.process_time()
        statuses = {client.post(path, body, content_type="application/json").status_code for body in bodies}
        cpu_runs.append(time.process_time() - cpu)
        return statuses

    post_all()  # warm-up: imports, compiled queries, connections
    clear_jobs()
    cpu_runs.clear()
    timing = measure(post_all, repeat=3, setup=clear_jobs, label="rest_submit_cpu")
    clear_jobs()
    commands_before = get_redis().info("stats")["total_commands_processed"]
    statuses, queries = counting_queries(post_all)()
    # INFO itself is one command; the scheduler-pass task that the first submission enqueues (requests
    # coalesce) goes through the same Redis and counts too.
    redis_commands = get_redis().info("stats")["total_commands_processed"] - commands_before - 1
    clear_jobs()
    row = {
        "requests": count, "statuses": sorted(statuses), **timing.figures("s"),
        "cpu_ms_per_request": statistics.median(cpu_runs[:3]) / count * 1000,
        "best_cpu_ms_per_request": min(cpu_runs[:3]) / count * 1000,
        "wall_ms_per_request": timing.median / count * 1000,
        **queries.figures(count), "redis_commands_per_request": redis_commands / count,
    }
    section = Section(
        name="rest_submit_cpu",
        key=("requests",),
        title=f"REST create in-process: {count:,} POST .../customJobs through Django's test client",
        columns=[Column("requests", "requests"), Column("cpu_ms_per_request", "CPU ms/request"),
                 Column("best_cpu_ms_per_request", "best CPU ms/request"),
                 Column("wall_ms_per_request", "wall ms/request"), Column("queries_per_job", "SQL/request"),
                 Column("redis_commands_per_request", "Redis commands/request")],
        rows=[row],
    )
    section.notes += [
        "CPU ms/request: process time of this process (Django, DRF, the ORM, the database driver and the test "
        "client, and SQLite itself when DATABASE_URL is unset), median and best of 3 runs; wall time includes "
        "waiting for PostgreSQL and Redis, and for the cores when the machine is busy",
        f"answers: {sorted(statuses)} (must be [200]); SQL and Redis commands counted in one more, untimed, run",
        *shared_redis_notes("Redis commands/request (INFO stats)"),
    ]
    return section


#: rest_clients: how many client processes send at once.
CLIENT_COUNTS = (1, 4, 16)


def bench_rest_clients(sizes: Sizes) -> Section:
    with inventory_for_the_workload():
        return _bench_rest_clients(sizes)


def _bench_rest_clients(sizes: Sizes) -> Section:
    """CustomJobs POSTed by 1, 4 and 16 clients with a Celery worker running the scheduler passes
    the submissions request, as deployed."""
    from trainhub.iam.services import api_token_rotate

    project, user = bench_project()
    token = api_token_rotate(user=user).key
    count = sizes.rest_jobs // 10
    path = f"/v1/projects/{project.project_id}/locations/{LOCATION}/customJobs"
    requests = [_request_bytes(path, token, json.dumps(job.body()).encode()) for job in generate_jobs(count)]
    rows = []
    for clients in CLIENT_COUNTS:
        clear_jobs()  # with no worker running: a pass that writes while jobs are deleted breaks the delete
        worker = start_celery_worker()
        try:
            celery_before: dict[int, float] = {}
            # the worker's pool processes, read when the timed run starts (they fork after the worker does)
            run = http_run([requests[index::clients] for index in range(clients)], warm_up=10,
                           before_timed=lambda: celery_before.update(_cpu_of(process_tree(worker.pid))))  # noqa: B023
            celery_cpu = _cpu_spent(celery_before, _cpu_of(process_tree(worker.pid)))
        finally:
            worker.terminate()
            worker.wait(timeout=60)
        rows.append({"clients": clients, **run.figures(count), "celery_cpu_ms_per_job": celery_cpu / count * 1000,
                     "load": f"{_loads(run.load_before)} -> {_loads(run.load_after)}"})
    clear_jobs()
    cores = os.cpu_count() or 1
    section = Section(
        name="rest_clients",
        key=("clients",),
        title=f"REST submission with the Celery worker running the passes: {count:,} CustomJobs from 1, 4 and 16 "
              f"clients, {run.server_label}",
        columns=[Column("clients", "clients"),
                 Column("jobs_per_second", "jobs/s"), Column("p50_ms", "p50 ms"), Column("p99_ms", "p99 ms"),
                 Column("server_cpu_ms_per_job", "web CPU ms/job"),
                 Column("database_cpu_ms_per_job", "PG CPU ms/job"),
                 Column("celery_cpu_ms_per_job", "Celery CPU ms/job"),
                 Column("cpu_ceiling_jobs_per_second", f"CPU ceiling jobs/s ({cores} cores, without Celery)"),
                 Column("load", "load average before -> after")],
        rows=rows,
        extra={"target_jobs_per_second_at_4_clients": TARGET_JOBS_PER_SECOND},
    )
    at_4 = next(row["jobs_per_second"] for row in rows if row["clients"] == 4)
    section.notes += [
        f"target: {TARGET_JOBS_PER_SECOND} jobs/s at 4 clients - " + ("met" if at_4 >= TARGET_JOBS_PER_SECOND else "NOT met"),
        "a Celery worker as docker-compose starts it (--concurrency=2) runs the scheduler passes the "
        "submissions request, on the same cores; Celery CPU ms/job is its CPU over the timed run per job",
        "each client count gets a fresh Celery worker, started after the previous run's jobs are deleted; "
        "wall-clock rates on a shared machine move by tens of per cent between runs, CPU ms/job far less",
    ]
    return section
