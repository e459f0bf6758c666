"""``agent_fleet``: N simulated node agents against gunicorn, while jobs are submitted and placed.

Issue 16, item 7: 1,000 agents at the default sync period must see a round trip p99 under 100 ms,
cost the control plane under half a core, keep PostgreSQL's connections flat, and start a placed
replica within 2 s (p99).

1. A simulated node pool of N nodes (``a3-megagpu-8g``, a type no other benchmark uses, so every
   job lands on a node that has an agent); every node joins in-process through ``join_token_create``
   and ``node_join``, and the bench keeps each raw credential.
2. gunicorn with ``gunicorn.conf.py`` (bench.environment's ``start_gunicorn``), and CLIENT_PROCESSES
   forked client processes that play the N agents together: each process runs
   CONNECTIONS_PER_PROCESS threads, each with one kept-alive ``http.client`` connection, and each
   thread plays its share of agents in turn from a timetable. Every agent does what
   ``trainhub.agent.node.NodeAgent.tick`` does each poll period (1 s; agents start staggered over
   the first period): a conditional GET of its assignments with its last ETag (a full one every
   ``full_sync_seconds``, 30 s, also staggered; an exit report's answer carries the node's assignments, as
   the agent takes them);
   ``POST .../started`` for a listed replica it has not started; ``POST .../exited`` with exit code 0
   once a replica has run its time (N s for a ``sleep N`` command, else the pool's simulated 2 s); a
   heartbeat with the replicas it runs when that set changed other than by those two reports (which
   stand for a heartbeat, as in trainhub-agent), else every ``long_poll_heartbeat_seconds``
   (300 s: the held long poll counts as the node's contact), spread evenly over that period as in a
   fleet that has been running a while. Every request's round trip is recorded.
3. Meanwhile this process submits 1-replica CustomJobs for the pool (``job_submit``, SUBMIT_PER_SECOND)
   and runs ``scheduler_pass`` every second, so placements happen throughout.
4. The first WARM_UP_SECONDS (every agent's first, unconditional fetch) are left out of every figure.
   Control-plane CPU over the measured window: gunicorn (master and workers), the PostgreSQL backends
   of the database other than this process's own (whose work is the scheduler's and the submissions',
   given apart), and Redis (INFO cpu). PostgreSQL connections: rows of pg_stat_activity for the
   database, before the agents start and the most seen during the window. Placement to start:
   ``started_at - assigned_at`` of every replica placed in the window (``started_at`` is the agent's
   clock when it saw the replica; this machine's clock for both).
5. In-process, through Django's test client: CPU and SQL per conditional poll (304), full poll
   (200) and heartbeat - what the server spends on each, profiled with ``--profile``.
"""

from __future__ import annotations

import datetime as dt
import http.client
import json
import math
import multiprocessing
import os
import random
import statistics
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from bench.environment import free_port, gunicorn_settings, shared_redis_notes, start_long_poll, start_web
from bench.report import Column, Section
from bench.scheduler_pass import LOCATION, Sizes, bench_project, counting_queries
from bench.submission import (
    _cpu_of,
    _cpu_spent,
    _DatabaseCpu,
    _percentile,
    _redis_cpu,
)
from bench.timing import measure
from bench.workload import WorkloadJob
from trainhub.agent.node import NodeSettings, spread_wait

CLIENT_PROCESSES = 4
SUBMIT_PER_SECOND = 5.0
PASS_SECONDS = 1.0
POOL = "fleet"
MACHINE_TYPE, ACCELERATOR_TYPE = "a3-megagpu-8g", "NVIDIA_H100_MEGA_80GB"
SIMULATED_RUNTIME_SECONDS = 2
#: trainhub-agent's defaults (trainhub.agent.node.NodeSettings): a full fetch every FULL_SYNC_SECONDS
#: (while long-polling), a heartbeat every HEARTBEAT_SECONDS while long-polling (the long poll is the
#: node's contact), rounds every POLL_SECONDS while a replica runs, and long polls of at most
#: LONG_POLL_SECONDS (an idle one asks for a random LONG_POLL_SPREAD..1 share of it, MEAN_LONG_POLL_SECONDS
#: on average). Agents start spread over START_SECONDS (the polling heartbeat period).
_DEFAULTS = NodeSettings.__dataclass_fields__
FULL_SYNC_SECONDS = _DEFAULTS["long_poll_full_sync_seconds"].default
HEARTBEAT_SECONDS = _DEFAULTS["long_poll_heartbeat_seconds"].default
START_SECONDS = _DEFAULTS["heartbeat_seconds"].default
POLL_SECONDS = _DEFAULTS["poll_seconds"].default
LONG_POLL_SECONDS = _DEFAULTS["long_poll_seconds"].default
MEAN_LONG_POLL_SECONDS = spread_wait(LONG_POLL_SECONDS, 0.5)
#: Agents start spread over START_SECONDS, each with a full fetch: the first WARM_UP_SECONDS
#: (that burst and its backlog on a loaded machine) are left out.
WARM_UP_SECONDS = START_SECONDS + 15
#: gunicorn.conf.py's keepalive: a connection idle longer is closed by gunicorn.
GUNICORN_KEEPALIVE_SECONDS = 5
KINDS = ("poll", "heartbeat", "report")
IN_PROCESS_REQUESTS = 200
WARM_UP_REQUESTS = 10

#: Issue 16's targets, for this many agents.
TARGET_AGENTS = 1_000
TARGET_P99_MS = 100.0
TARGET_CORES = 0.5
TARGET_START_P99_S = 2.0


# --- the agents (client processes; no Django) --------------------------------------------------

@dataclass
class _Agent:
    credential: str
    #: When it starts (within the first START_SECONDS), from the start.
    offset: float
    #: When it last heart-beat (its beats spread over the period, as in a fleet running a while).
    last_heartbeat: float
    etag: str = ""
    last_full: float = 0.0
    reported_running: list[int] = field(default_factory=list)
    #: replica id -> when it exits (by this agent's clock): its start plus its run time.
    running: dict[int, float] = field(default_factory=dict)
    seen: set[int] = field(default_factory=set)
    #: The assignments the last long poll brought, for the next round.
    assignments: dict | None = None


@dataclass
class _Record:
    """What one client process saw: per kind, the round trips (s) of the requests sent in the window
    (a long poll's less the wait it asked for, when it waited it out; one woken by a change counts
    in ``woken``, its delay in placement-to-start), their statuses, and errors."""

    window_start: float
    latencies: dict[str, list[float]] = field(default_factory=lambda: {kind: [] for kind in KINDS})
    statuses: dict[str, Counter] = field(default_factory=lambda: {kind: Counter() for kind in KINDS})
    errors: list[str] = field(default_factory=list)
    woken: int = 0
    #: Seconds every long poll asked to wait, for the mean wait.
    waits: list[float] = field(default_factory=list)

    def add(self, kind: str, begun: float, seconds: float) -> None:
        if begun >= self.window_start:
            self.latencies[kind].append(seconds)


class _Connection:
    """One kept-alive HTTP/1.1 connection; a broken one is reopened on the next request, and one idle
    longer than the server keeps it (``idle_seconds``) is reopened before it is used."""

    def __init__(self, port: int, idle_seconds: float = math.inf) -> None:
        self.port = port
        self.idle_seconds = idle_seconds
        self.used = time.time()
        self.http = http.client.HTTPConnection("127.0.0.1", port, timeout=LONG_POLL_SECONDS + 30)

    def request(self, record: _Record, kind: str, method: str, path: str, agent: _Agent, *,
                body: Any = None, etag: str = "") -> tuple[int, str, Any, float] | None:
        """(status, ETag, JSON body of a 200, seconds) of one request; None after a failure (recorded)."""
        headers = {"Authorization": f"Bearer {agent.credential}", "Accept": "application/json"}
        payload = None
        if body is not None:
            payload = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        if etag:
            headers["If-None-Match"] = etag
        begun = time.time()
        if begun - self.used > self.idle_seconds:
            self.http.close()
        try:
            self.http.request(method, path, body=payload, headers=headers)
            response = self.http.getresponse()
            content = response.read()
        except (OSError, http.client.HTTPException) as exc:
            self.http.close()
            if begun >= record.window_start:
                record.statuses[kind]["error"] += 1
                record.errors.append(f"{method} {path}: {type(exc).__name__}: {exc}")
            return None
        self.used = time.time()
        if begun >= record.window_start:
            record.statuses[kind][response.status] += 1
        return (response.status, response.getheader("ETag", ""),
                json.loads(content) if response.status == 200 else None, self.used - begun)

    def report(self, record: _Record, kind: str, path: str, agent: _Agent,
               body: dict) -> tuple[int, str, Any, float] | None:
        begun = time.time()
        answer = self.request(record, kind, "POST", path, agent, body=body)
        if answer is not None:
            record.add(kind, begun, answer[3])
        return answer


def replica_runtime(doc: dict[str, Any]) -> float:
    """Seconds a simulated replica runs: N when its container's command is ``sleep N`` (what a real
    executor would run for that long), else the pool's ``simulatedRuntimeSeconds``."""
    context = doc.get("context") or {}
    try:
        pool = context["spec"]["jobSpec"]["workerPoolSpecs"][context["poolIndex"]]
        command = (pool.get("containerSpec") or {}).get("command") or []
    except (KeyError, IndexError, TypeError):
        command = []
    if len(command) == 2 and command[0] == "sleep":
        try:
            return float(command[1])
        except ValueError:
            pass
    return float(doc.get("simulatedRuntimeSeconds", SIMULATED_RUNTIME_SECONDS))


def _agent_round(web: _Connection, agent: _Agent, record: _Record) -> None:
    """What NodeAgent.tick does for a simulated node, in its order, with the assignments the last long
    poll brought: start what is listed, report exits, heartbeat."""
    now = time.time()
    for doc in (agent.assignments or {}).get("replicas", []):
        if doc["id"] not in agent.seen:
            agent.seen.add(doc["id"])
            answer = web.report(record, "report", f"/agent/v1/replicas/{doc['id']}/started", agent, {"time": now})
            agent.running[doc["id"]] = now + replica_runtime(doc)
            if answer is not None and answer[0] == 200:  # the report stands for a heartbeat, as the agent's
                agent.reported_running = sorted({*agent.reported_running, doc["id"]})
    agent.assignments = None
    for replica_id, exits_at in list(agent.running.items()):
        if now >= exits_at:
            answer = web.report(record, "report", f"/agent/v1/replicas/{replica_id}/exited", agent,
                                {"time": now, "exitCode": 0})
            if answer is not None and answer[0] in (200, 404):
                del agent.running[replica_id]
                agent.reported_running = [known for known in agent.reported_running if known != replica_id]
                # The exit's answer is the node's assignments, taken as a full fetch (404: none, fetch).
                if answer[0] == 200:
                    agent.assignments, agent.etag, agent.last_full = answer[2], answer[1], now
                else:
                    agent.etag = ""
    running = sorted(agent.running)
    if running != agent.reported_running or now - agent.last_heartbeat >= HEARTBEAT_SECONDS:
        answer = web.report(record, "heartbeat", "/agent/v1/heartbeat", agent, {"time": now, "running": running})
        if answer is not None and answer[0] == 200:
            agent.reported_running, agent.last_heartbeat = running, now


def _wait_for_work(watch: _Connection, agent: _Agent, record: _Record) -> bool:
    """What NodeAgent.wait_for_work does: long-poll for ``poll_seconds`` while a replica runs, else
    until the next heartbeat (or full sync) is due; False after a failure. A replica due to exit
    sooner than ``poll_seconds`` shortens the wait to its exit, so a sub-second run ends on time.

    The wait is never cut at the run's end: cutting every agent's last wait there would answer a
    thousand long polls in the same instant, a herd no fleet sends, and the run would measure it."""
    now = time.time()
    if agent.running:
        wait = min(POLL_SECONDS, min(agent.running.values()) - now)
    else:
        wait = min(spread_wait(LONG_POLL_SECONDS, random.random()), agent.last_heartbeat + HEARTBEAT_SECONDS - now,
                   agent.last_full + FULL_SYNC_SECONDS - now)
    wait = max(0.0, wait)
    full = not agent.etag or now - agent.last_full >= FULL_SYNC_SECONDS
    answer = watch.request(record, "poll", "GET", f"/agent/v1/assignments?wait={wait:.3f}", agent,
                           etag="" if full else agent.etag)
    if answer is None:
        return False
    status, etag, body, seconds = answer
    if now >= record.window_start:
        record.waits.append(wait)
    if status == 200:
        agent.assignments, agent.etag = body, etag
        if full:
            agent.last_full = now
            record.add("poll", now, seconds)
        elif now >= record.window_start:
            record.woken += 1
    elif status == 304:
        record.add("poll", now, max(0.0, seconds - wait))
    return status in (200, 304)


def _live(ports: tuple[int, int], agent: _Agent, begin: float, end: float, record: _Record) -> None:
    """One agent from ``begin`` + its offset until ``end`` (its last long poll
    runs its whole wait): rounds and long polls, as trainhub-agent's
    node thread runs them (a failed long poll is followed by a pause of ``poll_seconds``)."""
    web, watch = _Connection(ports[0], idle_seconds=GUNICORN_KEEPALIVE_SECONDS - 1), _Connection(ports[1])
    time.sleep(max(0.0, begin + agent.offset - time.time()))
    while time.time() < end:
        _agent_round(web, agent, record)
        if not _wait_for_work(watch, agent, record):
            time.sleep(POLL_SECONDS)
    web.http.close()
    watch.http.close()


def _client_process(ports: tuple[int, int], agents: list[_Agent], begin: float, end: float,
                    window_start: float) -> _Record:
    """One client process: a thread per agent (each mostly waiting on its long poll)."""
    record = _Record(window_start)
    lock = threading.Lock()

    def live(agent: _Agent) -> None:
        try:
            _live(ports, agent, begin, end, record)
        except Exception as exc:  # noqa: BLE001 - a client's own failure is reported, never silent
            with lock:
                record.statuses["poll"]["client failure"] += 1
                record.errors.append(f"agent thread stopped: {type(exc).__name__}: {exc}")

    threads = [threading.Thread(target=live, args=(agent,), daemon=True) for agent in agents]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return record


# --- the control plane side (this process) ----------------------------------------------------

def fleet_join(agents: int, *, pool_name: str = POOL, machine_type: str = MACHINE_TYPE) -> list[str]:
    """A simulated pool of ``agents`` nodes, every one joined as its agent would: their credentials."""
    from django.utils import timezone

    from trainhub.inventory.models import Executor
    from trainhub.inventory.services import join_token_create, node_join, node_pool_ensure

    pool = node_pool_ensure(name=pool_name, machine_type=machine_type, node_count=agents,
                            executor=Executor.SIMULATED, simulated_runtime_seconds=SIMULATED_RUNTIME_SECONDS)
    now = timezone.now()
    _, token = join_token_create(pool=pool, created_by="bench", now=now, ttl=dt.timedelta(hours=1), max_uses=agents,
                                 description="agent_fleet benchmark")
    facts = {"simulated": True, "address": "127.0.0.1"}
    return [node_join(raw_token=token, name=f"{pool_name}-{index}", facts=facts, now=now)[1]
            for index in range(agents)]


def _postgres_value(sql: str) -> int | None:
    """The one value ``sql`` selects, on PostgreSQL (None on SQLite)."""
    from django.db import connection

    if connection.vendor != "postgresql":
        return None
    with connection.cursor() as cursor:
        cursor.execute(sql)
        return cursor.fetchone()[0]


#: Rows of pg_stat_activity for this database: every connection to it.
CONNECTIONS_SQL = "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"


@dataclass
class _Control:
    """This process's part: submissions and scheduler passes, and what they cost it."""

    submitted: int = 0
    passes: list[float] = field(default_factory=list)
    placed: int = 0
    errors: list[str] = field(default_factory=list)


def _drive(control: _Control, begin: float, end: float, on_window: Any, window_start: float) -> None:
    """Until ``end``: a job every 1/SUBMIT_PER_SECOND s and a scheduler pass every PASS_SECONDS, at
    fixed times; ``on_window()`` once at ``window_start``."""
    from django.utils import timezone

    from trainhub.jobs.services import job_submit
    from trainhub.scheduling.services import scheduler_pass

    project, user = bench_project()
    next_submit = next_pass = begin
    window_opened = False
    while (now := time.time()) < end:
        if not window_opened and now >= window_start:
            on_window()
            window_opened = True
        elif now >= next_submit:
            body = WorkloadJob(control.submitted, MACHINE_TYPE, ACCELERATOR_TYPE, 1, "STANDARD").body()
            try:
                job_submit(project=project, location=LOCATION, user=user, body=body)
            except Exception as exc:  # noqa: BLE001 - counted and shown, the run goes on
                control.errors.append(f"job_submit: {exc}")
            control.submitted += 1
            next_submit += 1 / SUBMIT_PER_SECOND
        elif now >= next_pass:
            begun = time.perf_counter()
            try:
                control.placed += scheduler_pass(now=timezone.now()).placed
            except Exception as exc:  # noqa: BLE001
                control.errors.append(f"scheduler_pass: {exc}")
            control.passes.append(time.perf_counter() - begun)
            next_pass += PASS_SECONDS
        else:
            time.sleep(min(next_submit, next_pass, window_start if not window_opened else end, end) - now)


def _starts(window_start: float, end: float) -> tuple[list[float], int]:
    """Placement-to-start seconds of the fleet's replicas placed in the window up to TARGET_START_P99_S
    before its end (later ones had no time to start), and how many of those never started."""
    from trainhub.jobs.models import Replica

    rows = list(Replica.objects.filter(
        node__pool__name=POOL, assigned_at__gte=dt.datetime.fromtimestamp(window_start, dt.UTC),
        assigned_at__lt=dt.datetime.fromtimestamp(end - TARGET_START_P99_S, dt.UTC))
        .values_list("assigned_at", "started_at"))
    delays = [(started - assigned).total_seconds() for assigned, started in rows if started is not None]
    return delays, sum(1 for _, started in rows if started is None)


def _nominal_requests_per_second(agents: int) -> float:
    """What the agents send when every round is on time: per idle agent a long poll every
    MEAN_LONG_POLL_SECONDS and a heartbeat every HEARTBEAT_SECONDS, and per job placed two reports
    (which stand for the heartbeats its start and end would send) and about two long polls (a second
    each while it runs; the exit report's answer brings the assignments after it)."""
    return agents / MEAN_LONG_POLL_SECONDS + agents / HEARTBEAT_SECONDS + 4 * SUBMIT_PER_SECOND


def nominal_cores(costs: dict[str, float], agents: int) -> float:
    """The cores the Django side of the server needs when every agent's round is on time, from the
    in-process CPU seconds per request ``costs`` (keys as ``request_costs`` names them): a long poll
    per agent per MEAN_LONG_POLL_SECONDS (one in FULL_SYNC_SECONDS in full, the rest 304; a full one after
    each exit report too), a heartbeat per HEARTBEAT_SECONDS, and per job two reports, costed as
    heartbeats (a write each). The HTTP servers' own work is not in it: a lower bound."""
    polls = agents / MEAN_LONG_POLL_SECONDS
    full_polls = agents / FULL_SYNC_SECONDS + SUBMIT_PER_SECOND
    return ((polls - full_polls) * costs["poll 304"] + full_polls * costs["poll 200"]
            + (agents / HEARTBEAT_SECONDS + 2 * SUBMIT_PER_SECOND) * costs["heartbeat"])


def _milliseconds(values: list[float], fraction: float | None) -> float | None:
    if not values:
        return None
    return (statistics.median(values) if fraction is None else _percentile(values, fraction)) * 1000


def fleet_agents(credentials: list[str], first: float) -> list[_Agent]:
    """One simulated agent per credential: starts spread over START_SECONDS, last heartbeats spread
    over the heartbeat period before ``first``, as in a fleet that has been running a while."""
    count = len(credentials)
    return [_Agent(credential, offset=index / count * START_SECONDS,
                   last_heartbeat=first - index / count * HEARTBEAT_SECONDS)
            for index, credential in enumerate(credentials)]


def fleet_run(*, agents: int, seconds: float, clients: int = CLIENT_PROCESSES) -> dict[str, Any]:
    """The live run: join, start gunicorn, the long poll and the client processes, submit and
    schedule; its row."""
    from django.db import connection

    fleet = fleet_agents(fleet_join(agents), time.time())
    ports = (free_port(), free_port())
    connection.close()  # the client processes are forked; they must not share this connection
    server = start_web(ports[0])
    watch = start_long_poll(ports[1])
    connections_before = _postgres_value(CONNECTIONS_SQL)
    load_before = os.getloadavg()
    context = multiprocessing.get_context("fork")
    control = _Control()
    try:
        with context.Pool(clients) as pool:
            client_pids = [process.pid for process in pool._pool]  # noqa: SLF001 - their CPU, from /proc
            begin = time.time() + 0.5
            window_start = begin + WARM_UP_SECONDS
            end = window_start + seconds
            pending = pool.starmap_async(_client_process, [
                (ports, fleet[index::clients], begin, end, window_start) for index in range(clients)])
            own_backend = _postgres_value("SELECT pg_backend_pid()")
            readings: dict[str, Any] = {}

            def open_window() -> None:
                readings["server_pids"] = server.pids()
                readings["server"] = _cpu_of(readings["server_pids"])
                readings["watch"] = _cpu_of([watch.pid])
                readings["clients"] = _cpu_of(client_pids)
                readings["redis"] = _redis_cpu()
                readings["self"] = time.process_time()
                readings["own_backend"] = _cpu_of([own_backend] if own_backend else [])
                readings["database"] = _DatabaseCpu(exclude=[own_backend] if own_backend else [])
                readings["database"].start()

            _drive(control, begin, end, open_window, window_start)
            server_after = _cpu_of(readings["server_pids"])
            watch_after = _cpu_of([watch.pid])
            clients_after = _cpu_of(client_pids)
            redis_cpu = _redis_cpu() - readings["redis"]
            self_cpu = time.process_time() - readings["self"]
            own_backend_cpu = _cpu_spent(readings["own_backend"], _cpu_of([own_backend] if own_backend else []))
            database = readings["database"]
            database_cpu = database.spent()
            load_after = os.getloadavg()
            records = pending.get(timeout=LONG_POLL_SECONDS + 120)
    finally:
        for process in (server, watch):
            process.terminate()
            process.wait(timeout=30)
    server_cpu = _cpu_spent(readings["server"], server_after)
    watch_cpu = _cpu_spent(readings["watch"], watch_after)
    client_cpu = _cpu_spent(readings["clients"], clients_after)
    latencies = {kind: [value for record in records for value in record.latencies[kind]] for kind in KINDS}
    statuses = {kind: sum((record.statuses[kind] for record in records), Counter()) for kind in KINDS}
    errors = [error for record in records for error in record.errors]
    waits = [wait for record in records for wait in record.waits]
    requests = sum(sum(counts.values()) for counts in statuses.values())
    failed = sum(n for kind in KINDS for status, n in statuses[kind].items() if status not in (200, 304))
    delays, never_started = _starts(window_start, end)
    on_postgres = connection.vendor == "postgresql"
    control_cpu = server_cpu + watch_cpu + (database_cpu if on_postgres else 0.0) + redis_cpu
    minutes = seconds / 60
    polls = sum(statuses["poll"].values())
    return {
        "agents": agents, "client_processes": clients, "seconds": seconds, "requests": requests,
        "requests_per_second": requests / seconds, "nominal_requests_per_second": _nominal_requests_per_second(agents),
        "polls_per_second": polls / seconds, "mean_wait_s": statistics.fmean(waits) if waits else None,
        "woken": sum(record.woken for record in records),
        "failed": failed, "statuses": {kind: {str(k): v for k, v in sorted(statuses[kind].items(), key=str)}
                                       for kind in KINDS},
        "errors": errors[:10],
        "poll_p50_ms": _milliseconds(latencies["poll"], None), "poll_p99_ms": _milliseconds(latencies["poll"], 0.99),
        "heartbeat_p50_ms": _milliseconds(latencies["heartbeat"], None),
        "heartbeat_p99_ms": _milliseconds(latencies["heartbeat"], 0.99),
        "report_p50_ms": _milliseconds(latencies["report"], None),
        "report_p99_ms": _milliseconds(latencies["report"], 0.99),
        "all_p50_ms": _milliseconds([value for values in latencies.values() for value in values], None),
        "all_p99_ms": _milliseconds([value for values in latencies.values() for value in values], 0.99),
        "not_modified_share": statuses["poll"][304] / polls if polls else None,
        "gunicorn_cores": server_cpu / seconds, "long_poll_cores": watch_cpu / seconds,
        "database_cores": database_cpu / seconds if on_postgres else None,
        "redis_cores": redis_cpu / seconds, "control_plane_cores": control_cpu / seconds,
        "control_plane_cpu_seconds": control_cpu,
        "control_plane_cpu_ms_per_agent_minute": control_cpu * 1000 / agents / minutes,
        "control_plane_cpu_ms_per_request": control_cpu * 1000 / requests if requests else None,
        "client_cores": client_cpu / seconds,
        "scheduler_cores": (self_cpu + (own_backend_cpu if on_postgres else 0.0)) / seconds,
        "load_before": round(load_before[0], 2), "load_after": round(load_after[0], 2),
        "pg_connections_before": connections_before,
        "pg_connections_peak": database.most_backends + 2 if on_postgres else None,
        "jobs_submitted": control.submitted, "placed": control.placed, "started": len(delays),
        "never_started": never_started, "control_errors": control.errors[:10],
        "pass_p50_ms": _milliseconds(control.passes, None), "pass_max_ms": max(control.passes, default=0) * 1000,
        "start_p50_s": statistics.median(delays) if delays else None,
        "start_p99_s": _percentile(delays, 0.99) if delays else None,
    }


# --- what one request costs the server, in-process --------------------------------------------

def request_costs(credential: str, count: int) -> list[dict[str, Any]]:
    """CPU ms and SQL per conditional poll (304), full poll (200) and heartbeat of one idle node,
    through Django's test client (all of Django, DRF, the ORM and the drivers; no gunicorn)."""
    from django.test import Client

    client = Client(HTTP_AUTHORIZATION=f"Bearer {credential}")
    etag = client.get("/agent/v1/assignments")["ETag"]
    calls = {
        "poll 304": lambda: client.get("/agent/v1/assignments", HTTP_IF_NONE_MATCH=etag).status_code,
        "poll 200": lambda: client.get("/agent/v1/assignments").status_code,
        "heartbeat": lambda: client.post("/agent/v1/heartbeat", {"time": time.time(), "running": []},
                                         content_type="application/json").status_code,
    }
    rows = []
    for what, call in calls.items():
        def loop(call=call) -> set[int]:
            return {call() for _ in range(count)}

        for _ in range(WARM_UP_REQUESTS):
            call()
        timing = measure(loop, repeat=3, label=f"agent_fleet-{what.replace(' ', '-')}")
        statuses, queries = counting_queries(loop)()
        rows.append({"what": what, "requests": count, "statuses": sorted(statuses | timing.result),
                     "cpu_ms_per_request": statistics.median(timing.cpu_runs) / count * 1000,
                     "wall_ms_per_request": timing.median / count * 1000, **queries.figures(count)})
    return rows


# --- the benchmark ----------------------------------------------------------------------------

def _verdict(met: bool) -> str:
    return "met" if met else "NOT met"


def bench_agent_fleet(sizes: Sizes) -> Section:
    return fleet_section(agents=sizes.fleet_agents, seconds=sizes.fleet_seconds)


def fleet_section(*, agents: int, seconds: float, clients: int = CLIENT_PROCESSES,
                  cost_requests: int = IN_PROCESS_REQUESTS) -> Section:
    from django.conf import settings
    from django.db import connection

    row = fleet_run(agents=agents, seconds=seconds, clients=clients)
    gunicorn = gunicorn_settings()
    cores = os.cpu_count() or 1
    section = Section(
        name="agent_fleet",
        key=("agents",),
        title=f"Agent fleet: {agents:,} simulated agents (a thread each in {clients} client processes) long-polling "
              f"the agent-watch process (uvicorn) and reporting to gunicorn ({gunicorn['workers']} workers x "
              f"{gunicorn['threads']} threads), {SUBMIT_PER_SECOND:g} jobs/s placed by a scheduler pass every "
              f"{PASS_SECONDS:g} s",
        columns=[Column("agents", "agents"), Column("client_processes", "client procs"), Column("seconds", "s"),
                 Column("requests_per_second", "req/s"), Column("failed", "failed"),
                 Column("all_p50_ms", "round trip p50 ms"), Column("all_p99_ms", "round trip p99 ms"),
                 Column("poll_p99_ms", "poll p99 ms"), Column("heartbeat_p99_ms", "hb p99 ms"),
                 Column("report_p99_ms", "report p99 ms"), Column("not_modified_share", "304 share"),
                 Column("control_plane_cpu_seconds", "control-plane CPU s"),
                 Column("control_plane_cores", "control-plane cores"),
                 Column("control_plane_cpu_ms_per_agent_minute", "CPU ms/agent/min"),
                 Column("nominal_cores_lower_bound", "cores on time (min)"),
                 Column("client_cores", "clients cores"), Column("load_before", "load before"),
                 Column("load_after", "load after"),
                 Column("pg_connections_before", "PG conns before"), Column("pg_connections_peak", "PG conns peak"),
                 Column("start_p50_s", "start p50 s"), Column("start_p99_s", "start p99 s")],
        rows=[row],
        extra={"targets": {"p99_ms": TARGET_P99_MS, "control_plane_cores": TARGET_CORES,
                           "start_p99_s": TARGET_START_P99_S}},
    )
    on_postgres = connection.vendor == "postgresql"
    p99 = row["all_p99_ms"]
    bound = gunicorn["workers"] * gunicorn["threads"] + settings.TRAINHUB_LONG_POLL_DB_THREADS + 2
    section.notes += [
        f"target: sync round trip p99 < {TARGET_P99_MS:g} ms - every request {_ms(p99)} ms (p50 "
        f"{_ms(row['all_p50_ms'])}; a long poll that waited its wait out counts its answer's delay past the wait, "
        f"one woken by a change counts in placement-to-start), long polls {_ms(row['poll_p99_ms'])} ms, heartbeats "
        f"{_ms(row['heartbeat_p99_ms'])} ms, reports {_ms(row['report_p99_ms'])} ms: "
        f"{_verdict(p99 is not None and p99 < TARGET_P99_MS)}",
        f"target: control-plane CPU < {TARGET_CORES:g} core - {row['control_plane_cpu_seconds']:.1f} CPU s over "
        f"{seconds:g} s = {row['control_plane_cores']:.2f} cores (gunicorn {row['gunicorn_cores']:.2f}, long poll "
        f"{row['long_poll_cores']:.2f}, PostgreSQL {_cores(row['database_cores'])}, Redis {row['redis_cores']:.2f}): "
        f"{_verdict(row['control_plane_cores'] < TARGET_CORES)}"
        + ("" if on_postgres else " (SQLite: the database's work is inside the servers' figures)")
        + (f"; {row['control_plane_cpu_ms_per_request']:.2f} CPU ms per request of this run's mix"
           if row["requests"] else "")
        + f"; CPU seconds do not depend on the machine's load (1-minute load average {row['load_before']} before, "
          f"{row['load_after']} after, on {cores} cores)",
        f"target: placement to start p99 < {TARGET_START_P99_S:g} s - "
        + (f"{row['start_p99_s']:.2f} s over {row['started']} replicas (p50 {row['start_p50_s']:.2f} s): "
           f"{_verdict(row['start_p99_s'] < TARGET_START_P99_S and not row['never_started'])}"
           if row["start_p99_s"] is not None else "no replica started: NOT met")
        + (f"; {row['never_started']} placed replicas never started" if row["never_started"] else ""),
        "target: PostgreSQL connections do not grow with the agents - "
        + (f"{row['pg_connections_before']} before the agents, at most {row['pg_connections_peak']} during the run, "
           f"bounded by gunicorn's {gunicorn['workers'] * gunicorn['threads']} threads (each keeps one), the long "
           f"poll's {settings.TRAINHUB_LONG_POLL_DB_THREADS} database threads and this process's 2 (the scheduler's, "
           f"the sampler's), whatever the number of agents: {_verdict(row['pg_connections_peak'] <= bound)}"
           if on_postgres else "not measured (SQLite)"),
        f"load: {row['requests_per_second']:.0f} requests/s of the nominal {row['nominal_requests_per_second']:.0f} "
        f"(per agent a long poll every {MEAN_LONG_POLL_SECONDS:g} s and a heartbeat every {HEARTBEAT_SECONDS:g} s; "
        f"long polls asked to wait "
        f"{_seconds(row['mean_wait_s'])} s on average); {row['woken']} long polls were answered by a placement or a "
        f"stop while they waited; the client processes used {row['client_cores']:.2f} cores of this machine's "
        f"{cores}, shared with the servers, PostgreSQL, Redis and this process (scheduler and submissions: "
        f"{row['scheduler_cores']:.2f} cores, not counted in the control-plane figure)",
        f"requests by kind and status: {row['statuses']}"
        + (f"; first errors: {row['errors']}" if row["errors"] else ""),
        f"{row['jobs_submitted']} jobs submitted, {row['placed']} placed; scheduler pass p50 {row['pass_p50_ms']:.0f} ms, "
        f"max {row['pass_max_ms']:.0f} ms" + (f"; errors: {row['control_errors']}" if row["control_errors"] else ""),
        f"agents start spread over the first {START_SECONDS:g} s, each with a full fetch, their heartbeats spread over "
        f"{HEARTBEAT_SECONDS:g} s; the first "
        f"{WARM_UP_SECONDS:g} s are left out; agents fetch in full every {FULL_SYNC_SECONDS:g} s, and take the assignments an exit report answers with, as trainhub-agent does",
        *shared_redis_notes("Redis cores (INFO cpu)"),
    ]
    costs = request_costs(_idle_credential(), cost_requests)
    section.extra["request_costs"] = costs
    seconds_per_request = {cost["what"]: cost["cpu_ms_per_request"] / 1000 for cost in costs}
    row["nominal_cores_lower_bound"] = nominal_cores(seconds_per_request, agents)
    target_cores = nominal_cores(seconds_per_request, TARGET_AGENTS)
    section.notes.append("server cost per request in-process (Django test client, no HTTP server): " + "; ".join(
        f"{cost['what']} {cost['cpu_ms_per_request']:.2f} CPU ms, {cost['queries_per_job']:.1f} SQL"
        for cost in costs)
        + f"; so {agents:,} agents on time need at least {row['nominal_cores_lower_bound']:.2f} cores of Django alone"
        + (f", and {TARGET_AGENTS:,} agents (the target's) {target_cores:.2f} cores" if agents != TARGET_AGENTS else "")
        + f": target < {TARGET_CORES:g} core {_verdict(target_cores < TARGET_CORES)}")
    return section


def _idle_credential() -> str:
    """A fresh credential of a node with nothing to run, for the in-process request costs."""
    from django.utils import timezone

    from trainhub.inventory.models import NodePool
    from trainhub.inventory.services import join_token_create, node_join

    now = timezone.now()
    _, token = join_token_create(pool=NodePool.objects.get(name=POOL), created_by="bench", now=now,
                                 ttl=dt.timedelta(hours=1))
    return node_join(raw_token=token, name=f"{POOL}-costs", facts={"simulated": True, "address": "127.0.0.1"},
                     now=now)[1]


def _cores(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"
