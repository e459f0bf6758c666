"""The reliability drills. Each resets the cluster, starts real processes, does damage under a
submission load, and checks the invariants (bench.chaos.invariants) afterwards.

1. ``scheduler_kill``  - SIGKILL the Celery worker while it holds the scheduler leader lock (mid-pass).
2. ``redis_flush``     - FLUSHALL Redis (FLUSHDB of our database on a shared server) under load.
3. ``racing_workers``  - two worker processes compete for every pass; passes must never overlap.
4. ``agent_kill``      - SIGKILL a node agent: its nodes go DOWN after the heartbeat TTL, and its
                         jobs fail or restart as scheduling.restartJobOnWorkerRestart says.
5. ``agent_restart``   - SIGKILL a node agent while 2-replica jobs of real processes run, start it
                         again at once: the replicas ran on under their supervisors, every job
                         succeeds with its whole log, and no node ever ran two jobs' processes.
"""

from __future__ import annotations

import datetime as dt
import random
import re
import time
from dataclasses import dataclass, field
from typing import Callable

import requests

from bench.chaos.cluster import Cluster, Process, wait_until
from bench.chaos.invariants import Check, Sampler, end_checks, wait_for_final_states
from bench.chaos.load import JOBS_PATH, LOAD_POOLS, SubmissionLoad

#: Settings every drill's processes run with: passes every second, a leader lock that a killed
#: worker holds for 3 s, and STANDARD jobs that wait for capacity rather than fail with a stockout.
DRILL_ENV = {
    "TRAINHUB_SCHEDULER_INTERVAL_SECONDS": "1",
    "TRAINHUB_SCHEDULER_LOCK_SECONDS": "3",
    "TRAINHUB_STOCKOUT_RETRY_SECONDS": "900",
}
SUCCEEDED = "JOB_STATE_SUCCEEDED"
FAILED = "JOB_STATE_FAILED"


@dataclass(frozen=True)
class Sizes:
    kills: int
    flushes: int
    load_rate: float
    #: Seconds of load in the drills that do not count kills.
    load_seconds: float
    heartbeat_ttl: int
    settle_timeout: float


FULL = Sizes(kills=20, flushes=3, load_rate=2.0, load_seconds=40, heartbeat_ttl=5, settle_timeout=180)
SHORT = Sizes(kills=4, flushes=1, load_rate=2.0, load_seconds=12, heartbeat_ttl=4, settle_timeout=90)


@dataclass
class DrillResult:
    name: str
    title: str
    actions: list[str] = field(default_factory=list)
    checks: list[Check] = field(default_factory=list)
    figures: dict = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return all(check.ok for check in self.checks)

    def did(self, text: str) -> None:
        self.actions.append(text)
        print(f"  - {text}", flush=True)

    def to_json(self) -> dict:
        return {"title": self.title, "ok": self.ok, "seconds": round(self.seconds, 1), "actions": self.actions,
                "checks": [{"name": c.name, "ok": c.ok, "detail": c.detail} for c in self.checks],
                "figures": self.figures}


def _load_checks(load: SubmissionLoad) -> list[Check]:
    summary = load.summary()
    return [Check("the API answered every submission without a 5xx or a dropped connection",
                  not summary["server_errors"] and not summary["connection_errors"],
                  f"{summary['accepted']} accepted, {summary['refused']} refused"
                  + (f" {summary['refusals']}" if summary["refused"] else "")
                  + (f", connection errors {summary['connection_errors']}" if summary["connection_errors"] else ""))]


def _finish(result: DrillResult, load: SubmissionLoad, sampler: Sampler, sizes: Sizes,
            expected_states: set[str]) -> None:
    load.stop()
    result.did(f"stopped the load after {len(load.accepted)} accepted submissions; waiting for every job to finish")
    result.figures["load"] = load.summary()
    result.checks += _load_checks(load)
    _settle(result, load.accepted, sampler, sizes, expected_states)


def _settle(result: DrillResult, accepted: list[str], sampler: Sampler, sizes: Sizes,
            expected_states: set[str]) -> None:
    waited = wait_for_final_states(accepted, timeout=sizes.settle_timeout)
    result.figures["settle_seconds"] = round(waited, 1)
    checks, figures = end_checks(accepted, expected_states=expected_states)
    result.figures.update(figures)
    result.checks += [sampler.check()] + checks


def _start_stack(cluster: Cluster, result: DrillResult, *, workers: tuple[str, ...] = ("worker",)) -> list:
    cluster.start_web()
    cluster.start_beat()
    cluster.start_agent("agent", [pool["name"] for pool in LOAD_POOLS])
    started = [cluster.start_worker(name) for name in workers]
    result.did(f"started gunicorn (2 workers), Celery beat, one node agent and {len(workers)} Celery worker(s)")
    return started


def _load(cluster: Cluster, sizes: Sizes, limit: int) -> SubmissionLoad:
    return SubmissionLoad(cluster.web_url, cluster.token, rate=sizes.load_rate, limit=limit).start()


def scheduler_kill(cluster: Cluster, sizes: Sizes) -> DrillResult:
    from trainhub.scheduling.leader import LEADER_KEY

    result = DrillResult("scheduler_kill", f"kill -9 the scheduler worker mid-pass, {sizes.kills} times, under load")
    cluster.reset(pools=LOAD_POOLS, env=DRILL_ENV)
    (worker,) = _start_stack(cluster, result)
    redis = cluster.redis()
    rng = random.Random(1)
    load = _load(cluster, sizes, limit=100_000)
    result.did(f"submitting {sizes.load_rate:g} jobs/s over REST")
    killed_tokens: set[bytes] = set()
    mid_pass = attempts = 0
    restart_seconds: list[float] = []
    with Sampler() as sampler:
        while mid_pass < sizes.kills and attempts < sizes.kills * 4:
            attempts += 1
            token = wait_until(lambda: (t := redis.get(LEADER_KEY)) and t not in killed_tokens and t,
                               timeout=60, interval=0.002, what="the next scheduler pass to start")
            time.sleep(rng.uniform(0, _kill_window(worker)))
            worker.kill9()
            interrupted = redis.get(LEADER_KEY) == token
            killed_tokens.add(token)
            mid_pass += interrupted
            begun = time.monotonic()
            worker = cluster.wait_ready(cluster.restart(worker))
            restart_seconds.append(time.monotonic() - begun)
            time.sleep(rng.uniform(0, 2))  # let some passes complete before the next kill
        result.did(f"killed the worker {attempts} times, {mid_pass} of them while it held the leader lock "
                   f"(mid-pass); restarted it each time")
        _finish(result, load, sampler, sizes, {SUCCEEDED})
    result.figures.update(kills=attempts, kills_mid_pass=mid_pass,
                          worker_restart_seconds_median=round(sorted(restart_seconds)[len(restart_seconds) // 2], 2))
    result.checks.insert(0, Check(f"{sizes.kills} kills landed mid-pass", mid_pass >= sizes.kills,
                                  f"{mid_pass} of {attempts} kills"))
    return result


def _kill_window(worker: Process) -> float:
    """Seconds after a pass takes the leader lock within which a kill still lands mid-pass.

    Half the median of the last ten passes the worker's log reports, so that most kills interrupt a pass on a fast
    machine as on a slow one; a fixed window missed three kills in four where a pass took a few milliseconds."""
    durations = sorted(end - start for start, end, _ in passes_in(worker.log_text())[-10:])
    return durations[len(durations) // 2] / 2 if durations else 0.005


def redis_flush(cluster: Cluster, sizes: Sizes) -> DrillResult:
    verb = "FLUSHDB" if cluster.shared_redis else "FLUSHALL"
    result = DrillResult("redis_flush", f"{verb} Redis {sizes.flushes} time(s) under load")
    cluster.reset(pools=LOAD_POOLS, env=DRILL_ENV)
    _start_stack(cluster, result)
    redis = cluster.redis()
    load = _load(cluster, sizes, limit=int(sizes.load_rate * sizes.load_seconds))
    result.did(f"submitting {sizes.load_rate:g} jobs/s over REST for {sizes.load_seconds:g} s")
    recoveries: list[float] = []
    unqueued: list[str] = []
    with Sampler() as sampler:
        for flush in range(sizes.flushes):
            time.sleep(sizes.load_seconds / (sizes.flushes + 1))
            redis.flushdb() if cluster.shared_redis else redis.flushall()
            flushed_at = dt.datetime.now(dt.UTC)
            wait_until(lambda: _pass_since(redis, flushed_at), timeout=60, interval=0.05,
                       what="the scheduler to rebuild Redis and finish a pass")
            recoveries.append((dt.datetime.now(dt.UTC) - flushed_at).total_seconds())
            unqueued += _waiting_but_not_queued(redis, before=flushed_at)
            result.did(f"{verb} #{flush + 1}: working memory rebuilt and a pass completed {recoveries[-1]:.2f} s later")
        load.wait()
        _finish(result, load, sampler, sizes, {SUCCEEDED})
    result.figures.update(flushes=sizes.flushes, recovery_seconds=[round(r, 2) for r in recoveries])
    result.checks.insert(0, Check("after every flush, every job that was waiting was back in the Redis queue",
                                  not unqueued, f"missing {unqueued[:5]}" if unqueued else ""))
    return result


def _pass_since(redis, moment: dt.datetime) -> bool:
    """Redis is warm again and holds the summary of a pass that started after ``moment``."""
    from trainhub.common.wire import parse_timestamp
    from trainhub.scheduling import working_memory

    started = redis.hget(working_memory.LAST_PASS, "time")
    return bool(redis.exists(working_memory.EPOCH) and started and parse_timestamp(started.decode()) > moment)


def _waiting_but_not_queued(redis, *, before: dt.datetime) -> list[str]:
    """Jobs submitted before ``before`` that still wait without an allocation but are not queued.

    Redis is read first: a job that left the queue since was placed, so no longer waits."""
    from django.db.models import Exists, OuterRef

    from trainhub.jobs import states
    from trainhub.jobs.models import CustomJob, Replica
    from trainhub.scheduling import working_memory

    queued = set(working_memory.pending_ids(redis))
    waiting = (CustomJob.objects.filter(state__in=states.WAITING, create_time__lt=before)
               .exclude(Exists(Replica.objects.filter(job=OuterRef("pk"), active=True)))
               .values_list("pk", "job_id"))
    return [job_id for pk, job_id in waiting if pk not in queued]


_PASS_LINE = re.compile(r"scheduler pass led by (\S+) started=([\d.]+) ended=([\d.]+)")


def passes_in(log: str) -> list[tuple[float, float, str]]:
    """(start, end, leader) of every pass a worker log reports having led."""
    return [(float(start), float(end), leader) for leader, start, end in _PASS_LINE.findall(log)]


def racing_workers(cluster: Cluster, sizes: Sizes) -> DrillResult:
    result = DrillResult("racing_workers", "two worker processes race for every scheduler pass")
    cluster.reset(pools=LOAD_POOLS, env=DRILL_ENV)
    workers = _start_stack(cluster, result, workers=("worker-a", "worker-b"))
    load = _load(cluster, sizes, limit=int(sizes.load_rate * sizes.load_seconds))
    result.did(f"submitting {sizes.load_rate:g} jobs/s over REST for {sizes.load_seconds:g} s; every submission "
               f"and beat (every 1 s) asks for a pass, and both workers take such tasks")
    with Sampler() as sampler:
        load.wait()
        _finish(result, load, sampler, sizes, {SUCCEEDED})
    passes = sorted(p for worker in workers for p in passes_in(worker.log_text()))
    overlaps = [(a, b) for a, b in zip(passes, passes[1:]) if b[0] < a[1]]
    leaders = {leader for _, _, leader in passes}
    result.did(f"read {len(passes)} passes from the two workers' logs")
    result.figures.update(passes=len(passes), leaders=len(leaders),
                          pass_seconds_max=round(max((e - s for s, e, _ in passes), default=0), 3))
    result.checks[:0] = [
        Check("one pass at a time: no two passes overlapped", not overlaps,
              f"{len(passes)} passes" + (f"; overlapping {overlaps[:3]}" if overlaps else "")),
        Check("both workers led passes (the race was real)", len(leaders) == 2, f"leaders {sorted(leaders)}"),
    ]
    return result


def agent_kill(cluster: Cluster, sizes: Sizes) -> DrillResult:
    from trainhub.inventory.models import Node, NodeState
    from trainhub.jobs.models import CustomJob

    ttl = sizes.heartbeat_ttl
    result = DrillResult("agent_kill", f"kill -9 a node agent; heartbeat TTL {ttl} s")
    doomed = {"name": "doomed", "machine_type": "a2-highgpu-1g", "node_count": 2, "executor": "simulated",
              "simulated_runtime_seconds": 3600}
    spare = {"name": "spare", "machine_type": "a2-highgpu-1g", "node_count": 2, "executor": "simulated",
             "simulated_runtime_seconds": 1}
    cluster.reset(pools=[doomed, spare], env={**DRILL_ENV, "TRAINHUB_NODE_HEARTBEAT_TTL_SECONDS": str(ttl)})
    cluster.start_web()
    cluster.start_beat()
    cluster.start_worker()
    doomed_agent = cluster.start_agent("agent-doomed", ["doomed"])
    result.did("started gunicorn, beat, a worker and the agent of pool 'doomed' (2 nodes, replicas run for an hour)")
    restarting = _submit(cluster, "restarts", restart=True)
    failing = _submit(cluster, "fails", restart=False)
    result.did("submitted one job with scheduling.restartJobOnWorkerRestart=true and one without")

    ids = [name.rsplit("/", 1)[1] for name in (restarting, failing)]

    def both_running() -> bool:
        return CustomJob.objects.filter(job_id__in=ids, state="JOB_STATE_RUNNING").count() == 2

    wait_until(both_running, timeout=60, what="both jobs to run on the doomed nodes")
    cluster.start_agent("agent-spare", ["spare"])
    time.sleep(1.5)  # the spare agent's first heartbeats
    doomed_agent.kill9()
    killed = time.monotonic()
    result.did("both run on 'doomed'; started the agent of pool 'spare', then killed the doomed agent (SIGKILL)")
    doomed_nodes = Node.objects.filter(pool__name="doomed")
    last_beat = max(node.last_heartbeat for node in doomed_nodes)
    wait_until(lambda: doomed_nodes.filter(state=NodeState.DOWN).count() == 2, timeout=ttl + 60, interval=0.1,
               what="the doomed nodes to go DOWN")
    down_after = time.monotonic() - killed
    from django.utils import timezone

    silence = (timezone.now() - last_beat).total_seconds()
    result.did(f"both doomed nodes DOWN {down_after:.1f} s after the kill ({silence:.1f} s after their last heartbeat)")
    with Sampler() as sampler:
        _settle(result, [restarting, failing], sampler, sizes, {SUCCEEDED, FAILED})
    restarted = CustomJob.objects.get(job_id=ids[0])
    lost = CustomJob.objects.get(job_id=ids[1])
    sweep = max(1, min(15, ttl // 2))
    result.figures.update(heartbeat_ttl=ttl, down_after_kill_seconds=round(down_after, 1),
                          down_after_last_heartbeat_seconds=round(silence, 1))
    result.checks[:0] = [
        Check(f"nodes went DOWN after the TTL and within TTL + one sweep ({ttl}+{sweep} s)",
              ttl <= silence <= ttl + sweep + 2, f"{silence:.1f} s of silence"),
        Check("the job with restartJobOnWorkerRestart restarted on another node and succeeded",
              restarted.state == SUCCEEDED and restarted.restart_count == 1
              and restarted.replicas.filter(node__pool__name="spare").exists(),
              f"{restarted.state}, restarts {restarted.restart_count}"),
        Check("the job without it failed, saying its replica was lost",
              lost.state == FAILED and "lost" in (lost.error or {}).get("message", ""),
              f"{lost.state}: {(lost.error or {}).get('message', '')}"),
    ]
    return result


#: Each replica of the agent_restart drill prints this many numbered lines, one every 0.1 s.
RESTART_LINES = 40


def agent_restart(cluster: Cluster, sizes: Sizes) -> DrillResult:
    from trainhub.jobs.models import CustomJob, LogLine

    result = DrillResult("agent_restart", "kill -9 a node agent mid-job and start it again; real subprocess replicas")
    real = {"name": "real", "machine_type": "n1-standard-4", "node_count": 4, "executor": "subprocess"}
    cluster.reset(pools=[real], env=DRILL_ENV)
    cluster.start_web()
    cluster.start_beat()
    cluster.start_worker()
    agent = cluster.start_agent("agent-real", ["real"])
    script = f"import time\nfor i in range({RESTART_LINES}):\n    print('line', i, flush=True)\n    time.sleep(0.1)\n"
    pool = {"machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": 1,
            "containerSpec": {"imageUri": "python:3.11", "command": ["python3", "-c", script]}}
    names = []
    for index in range(4):
        body = {"displayName": f"restart-{index}", "jobSpec": {"workerPoolSpecs": [pool, pool]}}
        response = requests.post(f"{cluster.web_url}{JOBS_PATH}", json=body,
                                 headers={"Authorization": f"Bearer {cluster.token}"}, timeout=30)
        response.raise_for_status()
        names.append(response.json()["name"])
    ids = [name.rsplit("/", 1)[1] for name in names]
    result.did("started gunicorn, beat, a worker and the agent of pool 'real' (4 nodes); submitted 4 jobs of "
               f"2 replicas, each printing {RESTART_LINES} lines over {RESTART_LINES / 10:.0f} s")
    with Sampler() as sampler:
        wait_until(lambda: LogLine.objects.filter(job__job_id__in=ids).count() >= 8, timeout=60,
                   what="the first jobs' replicas to print")
        agent.kill9()
        result.did("killed the agent (SIGKILL) while the first two jobs ran")
        time.sleep(1.0)
        cluster.restart(agent)
        result.did("started the agent again")
        _settle(result, names, sampler, sizes, {SUCCEEDED})
    complete = [job_id for job_id in ids if sorted(LogLine.objects.filter(job__job_id=job_id, text__startswith="line")
                                                   .values_list("text", flat=True))
                == sorted(f"line {i}" for i in range(RESTART_LINES) for _ in range(2))]
    restarts = sum(CustomJob.objects.filter(job_id__in=ids).values_list("restart_count", flat=True))
    result.checks += [
        Check("every job has both replicas' whole log, each line once", len(complete) == len(ids),
              f"{len(complete)} of {len(ids)} complete"),
        Check("no job was restarted (the replicas outlived the agent)", restarts == 0, f"{restarts} restarts"),
    ]
    return result


def _submit(cluster: Cluster, name: str, *, restart: bool) -> str:
    """Submit a one-replica A100 job; returns its resource name."""
    body = {"displayName": name, "jobSpec": {
        "workerPoolSpecs": [{"machineSpec": {"machineType": "a2-highgpu-1g"}, "replicaCount": 1,
                             "containerSpec": {"imageUri": "python:3.11", "command": ["true"]}}],
        "scheduling": {"restartJobOnWorkerRestart": restart}}}
    response = requests.post(f"{cluster.web_url}{JOBS_PATH}", json=body,
                             headers={"Authorization": f"Bearer {cluster.token}"}, timeout=30)
    response.raise_for_status()
    return response.json()["name"]


DRILLS: dict[str, Callable[[Cluster, Sizes], DrillResult]] = {
    "scheduler_kill": scheduler_kill,
    "redis_flush": redis_flush,
    "racing_workers": racing_workers,
    "agent_kill": agent_kill,
    "agent_restart": agent_restart,
}
