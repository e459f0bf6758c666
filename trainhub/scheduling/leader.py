"""One scheduler pass at a time across every worker: a Redis lock with an owner token.

SET NX PX takes the lock; only the owner's token releases it (compare-and-delete in Lua), and
the expiry frees it if the worker holding it dies mid-pass.
"""

from __future__ import annotations

import secrets
from contextlib import contextmanager
from typing import Iterator

import redis

LEADER_KEY = "trainhub:scheduler:leader"
_RELEASE = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end"


@contextmanager
def leader_lock(client: redis.Redis, *, ttl_seconds: int = 60, key: str = LEADER_KEY) -> Iterator[bool]:
    """Yield True if this process leads the pass, False if another one already does."""
    token = secrets.token_hex(16)
    acquired = bool(client.set(key, token, nx=True, px=ttl_seconds * 1000))
    try:
        yield acquired
    finally:
        if acquired:
            client.eval(_RELEASE, 1, key, token)
