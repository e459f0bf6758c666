"""The scheduler's working memory in Redis, like slurmctld's memory or Kueue's cache.

The database stays the record; everything here can be rebuilt from it by ``reconcile``:
- ``trainhub:pending``          sorted set, waiting job id -> submit time: the pass's queue
- ``trainhub:pending:details``  hash, waiting job id -> "<submit time> <Gang as JSON>": what a pass
                                needs of a job that never changes once it is submitted (project,
                                strategy, quota demand, worker pools), so a pass decodes no spec
- ``trainhub:flex:deadlines``   sorted set, FLEX_START job id -> maxWaitDuration deadline, swept by beat
- ``trainhub:wait``             hash, job id -> why it waits, its position and estimated start
- ``trainhub:stockout:from``    hash, STANDARD job id -> when its stockout retry window started
                                (POSIX seconds), or "" while it waits for quota; absent: at submission.
                                Lost with Redis, a window counts from submission again
- ``trainhub:node:hb:<id>``     one key per node: its last heartbeat, expiring after the heartbeat TTL
- ``trainhub:capacity:free``    hash, node id -> free GPUs, as the last pass saw it
- ``trainhub:quota:usage``      hash, "project:location:metric" -> GPUs in use, as the last pass saw it
- ``trainhub:scheduler:last-pass`` hash, summary of the last pass
- ``trainhub:epoch``            set by reconcile; its absence means Redis lost its memory (FLUSHALL,
                                restart) and must be rebuilt before the next pass
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import asdict, dataclass
from functools import lru_cache
from typing import Iterable, Mapping

import redis

from trainhub.jobs.spec import PoolRequest, ReplicaShape

EPOCH = "trainhub:epoch"
PENDING = "trainhub:pending"
DETAILS = "trainhub:pending:details"
FLEX_DEADLINES = "trainhub:flex:deadlines"
WAIT = "trainhub:wait"
RETRY_FROM = "trainhub:stockout:from"
HEARTBEAT_PREFIX = "trainhub:node:hb:"
FREE_CAPACITY = "trainhub:capacity:free"
QUOTA_USAGE = "trainhub:quota:usage"
LAST_PASS = "trainhub:scheduler:last-pass"
#: job id -> the idle nodes the last pass held for that FLEX_START gang (a Reservation)
RESERVATIONS = "trainhub:reservations"


@lru_cache(maxsize=1024)
def _shape(machine_type: str, accelerator_type: str, accelerator_count: int) -> ReplicaShape:
    # A cluster has a handful of node kinds: every decoded gang shares one object per shape.
    return ReplicaShape(machine_type, accelerator_type, accelerator_count)


@dataclass(frozen=True)
class Gang:
    """What the scheduler needs of a waiting job that cannot change after submission."""

    project_id: int
    location: str
    strategy: str
    #: (quota metric, GPUs) pairs, sorted
    quota_demand: tuple[tuple[str, int], ...]
    pools: tuple[PoolRequest, ...]
    #: The job names a persistent resource (jobSpec.persistentResourceId).
    on_resource: bool = False

    def encode(self) -> str:
        pools = [[p.index, p.replica_count, p.shape.machine_type, p.shape.accelerator_type, p.shape.accelerator_count]
                 for p in self.pools]
        return json.dumps([self.project_id, self.location, self.strategy, self.quota_demand, pools,
                           self.on_resource], separators=(",", ":"))

    @classmethod
    def decode(cls, raw: bytes | str) -> "Gang":
        project_id, location, strategy, demand, pools, on_resource = json.loads(raw)
        return cls(project_id, location, strategy, tuple((metric, gpus) for metric, gpus in demand),
                   tuple(PoolRequest(index, count, _shape(machine, accel, gpus))
                         for index, count, machine, accel, gpus in pools),
                   on_resource)


@dataclass(frozen=True)
class QueuedJob:
    pk: int
    submitted: dt.datetime
    #: FLEX_START jobs only, and only when they do not wait forever.
    deadline: dt.datetime | None = None
    #: Written next to the queue entry when known; a pass reads it back from the database if missing.
    gang: Gang | None = None

    def details(self) -> str:
        assert self.gang is not None
        return f"{self.submitted.timestamp()!r} {self.gang.encode()}"


@dataclass(frozen=True)
class WaitExplanation:
    reasons: list[str]
    position: int | None
    estimated_start: str | None
    computed_at: str

    @classmethod
    def empty(cls) -> "WaitExplanation":
        return cls([], None, None, "")


@dataclass(frozen=True)
class Reservation:
    """Idle nodes a pass holds for a starving FLEX_START gang, with what the Nodes page and the
    jobs waiting behind it show (so the page needs no query for it)."""

    job_pk: int
    project_pk: int
    project: str
    location: str
    job_id: str
    display_name: str
    #: (node name, node pool name) of each held node
    nodes: list[tuple[str, str]]
    #: RFC 3339: the first pass that held nodes for this gang (kept while it goes on holding)
    since: str
    #: RFC 3339: when its maxWaitDuration ends and it fails (None: "0s", it waits forever)
    until: str | None


def _reservation(raw: bytes) -> Reservation:
    fields = json.loads(raw)
    return Reservation(**{**fields, "nodes": [(name, pool) for name, pool in fields["nodes"]]})


def reservations_read(client: redis.Redis) -> dict[int, Reservation]:
    """The nodes the last pass held, by job id."""
    return {int(pk): _reservation(raw) for pk, raw in client.hgetall(RESERVATIONS).items()}


def is_warm(client: redis.Redis) -> bool:
    return bool(client.exists(EPOCH))


def pending_add(pipe, jobs: Iterable[QueuedJob]) -> None:
    """Queue, on a pipeline, the commands that put jobs in the waiting queue with their details."""
    for job in jobs:
        pipe.zadd(PENDING, {job.pk: job.submitted.timestamp()})
        if job.deadline is not None:
            pipe.zadd(FLEX_DEADLINES, {job.pk: job.deadline.timestamp()})
        if job.gang is not None:
            pipe.hset(DETAILS, job.pk, job.details())


def pending_remove(client: redis.Redis, pks: Iterable[int]) -> None:
    pipe = client.pipeline(transaction=False)
    if _forget(pipe, pks):
        pipe.execute()


def _forget(pipe, pks: Iterable[int]) -> bool:
    pks = list(pks)
    if pks:
        pipe.zrem(PENDING, *pks)
        pipe.zrem(FLEX_DEADLINES, *pks)
        pipe.hdel(WAIT, *pks)
        pipe.hdel(DETAILS, *pks)
        pipe.hdel(RETRY_FROM, *pks)
    return bool(pks)


def pending_ids(client: redis.Redis) -> list[int]:
    """Waiting job ids, oldest submission first."""
    return [int(pk) for pk in client.zrange(PENDING, 0, -1)]


# The whole queue with each entry's details as one reply: 10,000s of separate elements cost the
# client far more to parse than one string of lines "<id> <details or nothing>".
_READ_QUEUE = """
local ids = redis.call('ZRANGE', KEYS[1], 0, -1)
local out = {}
local n = 0
for first = 1, #ids, 4000 do
  local last = math.min(first + 3999, #ids)
  local details = redis.call('HMGET', KEYS[2], unpack(ids, first, last))
  for j = first, last do
    out[n + 1] = ids[j]
    out[n + 2] = ' '
    out[n + 3] = details[j - first + 1] or ''
    out[n + 4] = '\\n'
    n = n + 4
  end
end
return table.concat(out)
"""


def pending_read(client: redis.Redis) -> list[tuple[int, float | None, Gang | None]]:
    """(job id, submit time as a POSIX timestamp, Gang) for every queued job, in no particular
    order; (job id, None, None) for one whose details are not stored."""
    entries: list[tuple[int, float | None, Gang | None]] = []
    decoded: dict[bytes, Gang] = {}  # jobs submitted alike (same project, pools, strategy) share one
    for line in client.eval(_READ_QUEUE, 2, PENDING, DETAILS).splitlines():
        pk, details = line.split(b" ", 1)
        if not details:
            entries.append((int(pk), None, None))
            continue
        submitted, raw = details.split(b" ", 1)
        gang = decoded.get(raw)
        if gang is None:
            gang = decoded[raw] = Gang.decode(raw)
        entries.append((int(pk), float(submitted), gang))
    return entries


def details_write(client: redis.Redis, jobs: Iterable[QueuedJob]) -> None:
    """Store the details of queued jobs (each with its Gang) without touching the queue itself."""
    mapping = {job.pk: job.details() for job in jobs}
    if mapping:
        client.hset(DETAILS, mapping=mapping)


def flex_expired(client: redis.Redis, now: dt.datetime) -> list[int]:
    return [int(pk) for pk in client.zrangebyscore(FLEX_DEADLINES, "-inf", now.timestamp())]


def waits_write(client: redis.Redis, explanations: Mapping[int, WaitExplanation]) -> None:
    if explanations:
        client.hset(WAIT, mapping=_encoded(explanations))


def _encoded(explanations: Mapping[int, WaitExplanation]) -> dict[int, str]:
    return {pk: json.dumps(e.__dict__) for pk, e in explanations.items()}


def waits_read(client: redis.Redis, pks: list[int]) -> dict[int, WaitExplanation]:
    if not pks:
        return {}
    values = client.hmget(WAIT, pks)
    return {pk: WaitExplanation(**json.loads(raw)) for pk, raw in zip(pks, values) if raw}


def retry_marks_read(client: redis.Redis) -> dict[int, float | None]:
    """STANDARD job id -> when its stockout retry window started, None while it waits for quota;
    jobs never held up by quota are absent (their window starts at submission)."""
    return {int(pk): float(raw) if raw else None for pk, raw in client.hgetall(RETRY_FROM).items()}


def heartbeat(client: redis.Redis, node_ids: Iterable[int], at: dt.datetime, ttl_seconds: int) -> None:
    """Each node's key holds when it last heart-beat and expires ``ttl_seconds`` later."""
    pipe = client.pipeline(transaction=False)
    for node_id in node_ids:
        pipe.set(f"{HEARTBEAT_PREFIX}{node_id}", at.timestamp(), ex=max(1, ttl_seconds))
    pipe.execute()


def alive(client: redis.Redis, node_ids: list[int], since: dt.datetime) -> set[int]:
    """The nodes whose key still exists and holds a heartbeat at or after ``since``."""
    if not node_ids:
        return set()
    beats = client.mget([f"{HEARTBEAT_PREFIX}{node_id}" for node_id in node_ids])
    return {node_id for node_id, beat in zip(node_ids, beats) if beat and float(beat) >= since.timestamp()}


def pass_end(client: redis.Redis, *, done: Iterable[int], explanations: Mapping[int, WaitExplanation],
             free_gpus: Mapping[int, int], quota_usage: Mapping[str, int], summary: Mapping[str, str | int],
             reservations: Iterable[Reservation] = (), retry_marks: Mapping[int, float | None] | None = None,
             stale_marks: Iterable[int] = ()) -> None:
    """Everything a pass leaves in Redis, in one round trip: jobs that stopped waiting leave the
    queue, waiting jobs get their explanation and changed stockout retry marks (see
    ``retry_marks_read``; ``stale_marks``, those of jobs that no longer wait, are dropped), and the
    snapshot of free capacity, quota usage and the nodes held for FLEX_START gangs."""
    pipe = client.pipeline(transaction=True)
    _forget(pipe, done)
    if explanations:
        pipe.hset(WAIT, mapping=_encoded(explanations))
    stale_marks = list(stale_marks)
    if stale_marks:
        pipe.hdel(RETRY_FROM, *stale_marks)
    if retry_marks:
        pipe.hset(RETRY_FROM, mapping={pk: "" if mark is None else repr(mark) for pk, mark in retry_marks.items()})
    pipe.delete(FREE_CAPACITY, QUOTA_USAGE, RESERVATIONS)
    held = {reservation.job_pk: json.dumps(asdict(reservation)) for reservation in reservations}
    if held:
        pipe.hset(RESERVATIONS, mapping=held)
    if free_gpus:
        pipe.hset(FREE_CAPACITY, mapping=dict(free_gpus))
    if quota_usage:
        pipe.hset(QUOTA_USAGE, mapping=dict(quota_usage))
    pipe.hset(LAST_PASS, mapping=dict(summary))
    pipe.execute()


def snapshot_read(client: redis.Redis) -> dict:
    return {
        "lastPass": {k.decode(): v.decode() for k, v in client.hgetall(LAST_PASS).items()},
        "pendingJobs": client.zcard(PENDING),
        "freeNodes": client.hlen(FREE_CAPACITY),
        "quotaUsage": {k.decode(): int(v) for k, v in client.hgetall(QUOTA_USAGE).items()},
    }


def reconcile(client: redis.Redis, *, waiting: Iterable[QueuedJob], heartbeats: Mapping[int, dt.datetime],
              heartbeat_ttl: int, now: dt.datetime, rebuild: bool) -> None:
    """Bring the queue, deadlines and heartbeats in line with the database; then mark Redis warm.

    ``rebuild`` starts the queue from empty (Redis lost its memory); otherwise missing entries are
    only added, so a submission queued but not yet committed is never dropped, and entries that no
    longer wait are left for the pass to forget. ``heartbeats`` maps node id -> its last heartbeat,
    whose key gets what remains of ``heartbeat_ttl``. Wait explanations and snapshots are recomputed by the next pass, and so
    is the Gang of a queued job that has none.
    """
    pipe = client.pipeline(transaction=True)
    if rebuild:
        pipe.delete(PENDING, FLEX_DEADLINES, DETAILS)
    pending_add(pipe, waiting)
    for node_id, beat in heartbeats.items():
        remaining = int(heartbeat_ttl - (now - beat).total_seconds())
        if remaining > 0:
            pipe.set(f"{HEARTBEAT_PREFIX}{node_id}", beat.timestamp(), ex=remaining)
    pipe.set(EPOCH, now.isoformat())
    pipe.execute()
