"""The one Redis connection of a process (Celery broker and scheduler working memory), and
best-effort writes that share one round trip.

Several services write to Redis after their database work without depending on the answer for
correctness - a job put in the scheduler's queue (reconcile repairs a miss), a pass requested
(beat's periodic pass covers a miss), the live-page counter bumped. Sent one by one, a submission
paid three round trips for them. ``best_effort`` queues such a write; inside ``one_round_trip()``
every write queued until the block ends goes in one pipeline, and outside it the write is sent at
once, as before.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import redis
from django.conf import settings
from redis.exceptions import RedisError

logger = logging.getLogger(__name__)


class RedisNotConfigured(RuntimeError):
    pass


@lru_cache(maxsize=4)
def _client(url: str) -> redis.Redis:
    return redis.Redis.from_url(url, socket_timeout=5, socket_connect_timeout=5, health_check_interval=30)


def get_redis() -> redis.Redis:
    url = settings.REDIS_URL
    if not url:
        raise RedisNotConfigured(
            "REDIS_URL is not set: start trainhub with `make run` (embedded Redis) or set REDIS_URL."
        )
    return _client(url)


@dataclass(frozen=True)
class _Write:
    #: Adds this write's commands to a pipeline.
    commands: Callable[[Any], None]
    #: Told the replies to those commands once they are in.
    answered: Callable[[list[Any]], None]
    #: Told the error when Redis did not answer (or is not configured); the write is then lost.
    failed: Callable[[Exception], None]


_batch: ContextVar[list[_Write] | None] = ContextVar("trainhub_redis_batch", default=None)


def _ignore(_: Any) -> None:
    return None


def best_effort(commands: Callable[[Any], None], *, answered: Callable[[list[Any]], None] = _ignore,
                failed: Callable[[Exception], None]) -> None:
    """Send a write whose loss the caller can survive: now, or at the end of ``one_round_trip()``."""
    write = _Write(commands, answered, failed)
    batch = _batch.get()
    if batch is None:
        _send([write])
    else:
        batch.append(write)


@contextmanager
def one_round_trip() -> Iterator[None]:
    """Every best-effort write queued in this block is sent in one pipeline when it ends."""
    batch: list[_Write] = []
    token = _batch.set(batch)
    try:
        yield
    finally:
        _batch.reset(token)
        if batch:
            _send(batch)


def _send(writes: list[_Write]) -> None:
    try:
        pipe = get_redis().pipeline(transaction=False)
        counts = []
        for write in writes:
            queued = len(pipe)
            write.commands(pipe)
            counts.append(len(pipe) - queued)
        replies = pipe.execute()
    except (RedisError, RedisNotConfigured) as exc:
        for write in writes:
            _robustly(write.failed, exc)
        return
    start = 0
    for write, count in zip(writes, counts):
        _robustly(write.answered, replies[start:start + count])
        start += count


def _robustly(callback: Callable[[Any], None], argument: Any) -> None:
    # As Django's robust on_commit hooks: the database work is committed, so a failing
    # follow-up is logged, not raised into a request that already succeeded.
    try:
        callback(argument)
    except Exception:
        logger.exception("Redis write follow-up %r failed", callback)
