"""A node's last contact through the agents' long poll: kept in Redis, flushed to the database.

An agent waiting in the long poll (``trainhub.inventory.longpoll``) is in contact with the control
plane, as GitLab counts a runner's ``POST /api/v4/jobs/request`` as its contact: Ci::Runner#heartbeat
caches ``contacted_at`` in Redis and writes the column only now and then, and the online check
reads the cache. Here the long-poll process records, every ``record_period`` (5 s), the nodes that asked or
are still waiting in one ``ZADD`` to ``trainhub:node:contacts`` (node id -> epoch seconds; a score
only moves forward), and the heartbeat sweep takes what was recorded since its last pass and writes
it to ``Node.last_heartbeat`` in one UPDATE. So contact costs no database write per request and no
Redis write per request, however many agents wait, and a node that only long-polls stays UP.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import redis

CONTACTS = "trainhub:node:contacts"
#: How often the long-poll process records its agents' contact (each node at most once a period).
RECORD_SECONDS = 5.0


def record_period(heartbeat_ttl_seconds: float) -> float:
    """RECORD_SECONDS, or a quarter of a short heartbeat TTL: a recorded contact must reach the
    database (at the next sweep, every TTL/2 at most) before the TTL runs out."""
    return min(RECORD_SECONDS, heartbeat_ttl_seconds / 4)


def contacts_commands(pipe: Any, contacts: Mapping[int, float]) -> None:
    """Record ``contacts`` (node id -> epoch seconds); an older time never replaces a newer one.
    The same command for the blocking client and ``redis.asyncio``."""
    if contacts:
        pipe.zadd(CONTACTS, {str(node_id): moment for node_id, moment in contacts.items()}, gt=True)


def contacts_take(client: redis.Redis) -> dict[int, float]:
    """Every contact recorded since the last take, removed in the same transaction (each is written
    to the database once; one recorded meanwhile waits for the next take)."""
    pipe = client.pipeline(transaction=True)
    pipe.zrange(CONTACTS, 0, -1, withscores=True)
    pipe.delete(CONTACTS)
    rows, _ = pipe.execute()
    return {int(member): score for member, score in rows}


def contacts_restore(client: redis.Redis, contacts: Mapping[int, float]) -> None:
    """Put back contacts taken but not written (the database write failed)."""
    pipe = client.pipeline(transaction=False)
    contacts_commands(pipe, contacts)
    pipe.execute()
