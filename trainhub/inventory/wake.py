"""Wake-up counters that let node agents learn of new assignments at once, cheaply.

``trainhub:node:wake:<id>`` is bumped after every committed change to what a node must run (a
placement, a stop request, a Slurm job's next phase), and the node's id is published on
``trainhub:node:wakes`` in the same round trip. An agent sends the value it last saw as its
ETag: an unchanged counter answers 304 from Redis without touching the database, and the long
poll (``trainhub.inventory.longpoll``) waits for the publication instead of asking again - as
GitLab Workhorse's key watcher holds a runner's ``jobs/request`` on one Redis subscription for
the whole process. The counter is a hint, not the record: when Redis loses it, the next read
makes a fresh value, every agent fetches its assignments once, and agents also fetch
unconditionally now and then.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from typing import Any

import redis
from django.db import transaction

from trainhub.common.redis import best_effort

WAKE_PREFIX = "trainhub:node:wake:"
#: The channel every wake-up is published on: the node ids, comma-separated.
WAKE_CHANNEL = "trainhub:node:wakes"

logger = logging.getLogger(__name__)


def nodes_wake(node_ids: Iterable[int | None]) -> None:
    """Tell the agents of ``node_ids`` that their assignments changed, once the transaction commits."""
    ids = sorted({node_id for node_id in node_ids if node_id is not None})
    if ids:
        transaction.on_commit(lambda: best_effort(lambda pipe: _bump(pipe, ids), failed=_not_woken), robust=True)


def _bump(pipe: Any, ids: list[int]) -> None:
    for node_id in ids:
        pipe.incr(f"{WAKE_PREFIX}{node_id}")
    # After the counters, in the same pipeline: a waiter that reads its counter once woken sees the bump.
    pipe.publish(WAKE_CHANNEL, ",".join(map(str, ids)))


def woken_nodes(message: bytes | str) -> list[int]:
    """The node ids of one publication on WAKE_CHANNEL (a malformed one wakes nobody)."""
    text = message.decode() if isinstance(message, bytes) else message
    return [int(part) for part in text.split(",") if part.isdigit()]


def _not_woken(exc: Exception) -> None:
    logger.warning("node wake-up counters not bumped (agents catch up at their next full sync): %s", exc)


def wake_value_commands(pipe: Any, node_id: int) -> None:
    """Read the node's counter, first re-creating a lost one with a value no agent has seen (one
    round trip; the same commands for the blocking client and ``redis.asyncio``)."""
    key = f"{WAKE_PREFIX}{node_id}"
    pipe.set(key, int(time.time() * 1000), nx=True)
    pipe.get(key)


def wake_value_of(replies: list[Any]) -> str:
    value = replies[-1]
    return value.decode() if isinstance(value, bytes) else str(value)


def node_wake_value(client: redis.Redis, node_id: int) -> str:
    """The node's current counter; a lost one is re-created with a value no agent has seen."""
    pipe = client.pipeline(transaction=False)
    wake_value_commands(pipe, node_id)
    return wake_value_of(pipe.execute())
