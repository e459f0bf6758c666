"""Wake-up counters that let node agents poll for their assignments cheaply.

``trainhub:node:wake:<id>`` is bumped after every committed change to what a node must run (a
placement, a stop request, a Slurm job's next phase). An agent polls with the value it last saw
as its ETag; an unchanged counter answers 304 from Redis without touching the database. The
counter is a hint, not the record: when Redis loses it, the next read makes a fresh value, every
agent fetches its assignments once, and agents also fetch unconditionally now and then.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable

import redis
from django.db import transaction

from trainhub.common.redis import best_effort

WAKE_PREFIX = "trainhub:node:wake:"

logger = logging.getLogger(__name__)


def nodes_wake(node_ids: Iterable[int | None]) -> None:
    """Tell the agents of ``node_ids`` that their assignments changed, once the transaction commits."""
    keys = sorted({f"{WAKE_PREFIX}{node_id}" for node_id in node_ids if node_id is not None})
    if keys:
        transaction.on_commit(lambda: best_effort(lambda pipe: [pipe.incr(key) for key in keys],
                                                  failed=_not_woken), robust=True)


def _not_woken(exc: Exception) -> None:
    logger.warning("node wake-up counters not bumped (agents catch up at their next full sync): %s", exc)


def node_wake_value(client: redis.Redis, node_id: int) -> str:
    """The node's current counter; a lost one is re-created with a value no agent has seen."""
    key = f"{WAKE_PREFIX}{node_id}"
    value = client.get(key)
    if value is None:
        client.set(key, int(time.time() * 1000), nx=True)
        value = client.get(key)
    return value.decode() if isinstance(value, bytes) else str(value)
