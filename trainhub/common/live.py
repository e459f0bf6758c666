"""Live pages: a change counter in Redis, so browsers refresh their fragments only when something changed.

Pages poll one cheap endpoint (``/v1/scheduler:status``, served from Redis) and refetch their
live fragments when its ``version`` moves. The version combines this counter, which every job
timeline event bumps once its transaction commits, with the time of the last scheduler pass.
Best effort: without Redis the version stays put and the pages fall back to their periodic refresh.
"""

from __future__ import annotations

import logging

from django.db import transaction
from redis.exceptions import RedisError

from trainhub.common.redis import RedisNotConfigured, best_effort, get_redis

LIVE_VERSION = "trainhub:live:version"
logger = logging.getLogger(__name__)


def _bump() -> None:
    best_effort(lambda pipe: pipe.incr(LIVE_VERSION),
                failed=lambda exc: logger.debug("live version not bumped: Redis did not answer (%s)", exc))


def live_changed() -> None:
    """Count one change visible on live pages, after the current transaction commits."""
    transaction.on_commit(_bump, robust=True)


def live_version(last_pass_time: str) -> str:
    """The version browsers compare between polls: changes counted so far and the last pass."""
    try:
        changes = int(get_redis().get(LIVE_VERSION) or 0)
    except (RedisError, RedisNotConfigured):
        changes = 0
    return f"{changes}/{last_pass_time}"
