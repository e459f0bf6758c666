"""The scheduler's working memory in Redis, like slurmctld's memory or Kueue's cache.

The database stays the record; everything here can be rebuilt from it by ``reconcile``:
- ``trainhub:pending``          sorted set, waiting job id -> submit time: the pass's queue
- ``trainhub:flex:deadlines``   sorted set, FLEX_START job id -> maxWaitDuration deadline, swept by beat
- ``trainhub:wait``             hash, job id -> why it waits, its position and estimated start
- ``trainhub:node:hb:<id>``     one key per node with the heartbeat TTL
- ``trainhub:capacity:free``    hash, node id -> free GPUs, as the last pass saw it
- ``trainhub:quota:usage``      hash, "project:location:metric" -> GPUs in use, as the last pass saw it
- ``trainhub:scheduler:last-pass`` hash, summary of the last pass
- ``trainhub:epoch``            set by reconcile; its absence means Redis lost its memory (FLUSHALL,
                                restart) and must be rebuilt before the next pass
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass
from typing import Iterable, Mapping

import redis

EPOCH = "trainhub:epoch"
PENDING = "trainhub:pending"
FLEX_DEADLINES = "trainhub:flex:deadlines"
WAIT = "trainhub:wait"
HEARTBEAT_PREFIX = "trainhub:node:hb:"
FREE_CAPACITY = "trainhub:capacity:free"
QUOTA_USAGE = "trainhub:quota:usage"
LAST_PASS = "trainhub:scheduler:last-pass"


@dataclass(frozen=True)
class QueuedJob:
    pk: int
    submitted: dt.datetime
    #: FLEX_START jobs only, and only when they do not wait forever.
    deadline: dt.datetime | None = None


@dataclass(frozen=True)
class WaitExplanation:
    reasons: list[str]
    position: int | None
    estimated_start: str | None
    computed_at: str

    @classmethod
    def empty(cls) -> "WaitExplanation":
        return cls([], None, None, "")


def is_warm(client: redis.Redis) -> bool:
    return bool(client.exists(EPOCH))


def pending_add(client: redis.Redis, jobs: Iterable[QueuedJob]) -> None:
    pipe = client.pipeline(transaction=False)
    for job in jobs:
        pipe.zadd(PENDING, {job.pk: job.submitted.timestamp()})
        if job.deadline is not None:
            pipe.zadd(FLEX_DEADLINES, {job.pk: job.deadline.timestamp()})
    pipe.execute()


def pending_remove(client: redis.Redis, pks: Iterable[int]) -> None:
    pks = list(pks)
    if pks:
        pipe = client.pipeline(transaction=False)
        pipe.zrem(PENDING, *pks)
        pipe.zrem(FLEX_DEADLINES, *pks)
        pipe.hdel(WAIT, *pks)
        pipe.execute()


def pending_ids(client: redis.Redis) -> list[int]:
    """Waiting job ids, oldest submission first."""
    return [int(pk) for pk in client.zrange(PENDING, 0, -1)]


def flex_expired(client: redis.Redis, now: dt.datetime) -> list[int]:
    return [int(pk) for pk in client.zrangebyscore(FLEX_DEADLINES, "-inf", now.timestamp())]


def waits_write(client: redis.Redis, explanations: Mapping[int, WaitExplanation]) -> None:
    if explanations:
        client.hset(WAIT, mapping={pk: json.dumps(e.__dict__) for pk, e in explanations.items()})


def waits_read(client: redis.Redis, pks: list[int]) -> dict[int, WaitExplanation]:
    if not pks:
        return {}
    values = client.hmget(WAIT, pks)
    return {pk: WaitExplanation(**json.loads(raw)) for pk, raw in zip(pks, values) if raw}


def heartbeat(client: redis.Redis, node_ids: Iterable[int], ttl_seconds: int) -> None:
    pipe = client.pipeline(transaction=False)
    for node_id in node_ids:
        pipe.set(f"{HEARTBEAT_PREFIX}{node_id}", 1, ex=max(1, ttl_seconds))
    pipe.execute()


def alive(client: redis.Redis, node_ids: list[int]) -> set[int]:
    if not node_ids:
        return set()
    flags = client.mget([f"{HEARTBEAT_PREFIX}{node_id}" for node_id in node_ids])
    return {node_id for node_id, flag in zip(node_ids, flags) if flag}


def snapshot_write(client: redis.Redis, *, free_gpus: Mapping[int, int], quota_usage: Mapping[str, int],
                   summary: Mapping[str, str | int]) -> None:
    pipe = client.pipeline(transaction=True)
    pipe.delete(FREE_CAPACITY, QUOTA_USAGE)
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


def reconcile(client: redis.Redis, *, waiting: Iterable[QueuedJob], heartbeats: Mapping[int, int],
              now: dt.datetime, rebuild: bool) -> None:
    """Bring the queue, deadlines and heartbeats in line with the database; then mark Redis warm.

    ``rebuild`` starts the queue from empty (Redis lost its memory); otherwise missing entries are
    only added, so a submission queued but not yet committed is never dropped, and entries that no
    longer wait are left for the pass to forget. ``heartbeats`` maps node id -> seconds its last
    heartbeat stays valid. Wait explanations and snapshots are recomputed by the next pass.
    """
    pipe = client.pipeline(transaction=True)
    if rebuild:
        pipe.delete(PENDING, FLEX_DEADLINES)
    for job in waiting:
        pipe.zadd(PENDING, {job.pk: job.submitted.timestamp()})
        if job.deadline is not None:
            pipe.zadd(FLEX_DEADLINES, {job.pk: job.deadline.timestamp()})
    for node_id, ttl in heartbeats.items():
        if ttl > 0:
            pipe.set(f"{HEARTBEAT_PREFIX}{node_id}", 1, ex=ttl)
    pipe.set(EPOCH, now.isoformat())
    pipe.execute()
