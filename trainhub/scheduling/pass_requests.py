"""Requests for a scheduler pass coalesce: one waiting pass task serves every request made before it starts.

Every submission, cancel, exit and quota change asks for a pass. Sending one Celery task per
request made a burst of 10,000 submissions queue 10,000 passes, and cost every request a broker
publish. Instead a request sets ``trainhub:scheduler:pass-requested`` (SET NX) and sends a task
only if the flag was not already set. The pass that runs clears the flag before it reads the queue,
so whatever is asked after that point sets it again; a leading pass that finds the flag set when it
ends sends one more task. The flag expires after REQUEST_TTL_SECONDS so that a task lost with a
killed worker or a flushed Redis does not silence requests for long; beat's periodic pass covers
the gap meanwhile. A Slurm cluster's passes coalesce the same way under a flag of their own
(``request_coalesced``).
"""

from __future__ import annotations

import logging
from typing import Any

import redis
from django.db import transaction

from trainhub.common.enqueue import enqueue
from trainhub.common.redis import best_effort

PASS_REQUESTED = "trainhub:scheduler:pass-requested"
SCHEDULER_PASS_TASK = "trainhub.scheduling.tasks.scheduler_pass"
REQUEST_TTL_SECONDS = 10

logger = logging.getLogger(__name__)


def request_pass() -> None:
    """Ask for a scheduler pass once the current transaction commits."""
    transaction.on_commit(_send, robust=True)


def _send() -> None:
    send_coalesced(PASS_REQUESTED, SCHEDULER_PASS_TASK)


def request_coalesced(flag: str, task_name: str, *args: Any) -> None:
    """Ask for task ``task_name(*args)`` once the current transaction commits, coalesced as the
    scheduler's passes are under ``flag`` (a Slurm cluster's passes, under a flag of its own)."""
    transaction.on_commit(lambda: send_coalesced(flag, task_name, *args), robust=True)


def send_coalesced(flag: str, task_name: str, *args: Any) -> None:
    """Send the task unless ``flag`` says one is already waiting (set it if not)."""

    def send_if_first(replies: list) -> None:
        (first,) = replies
        if first:
            enqueue(task_name, *args)

    def send_anyway(exc: Exception) -> None:
        logger.warning("pass request flag not set: Redis did not answer (%s); sending the task anyway", exc)
        enqueue(task_name, *args)

    best_effort(lambda pipe: pipe.set(flag, 1, nx=True, ex=REQUEST_TTL_SECONDS), answered=send_if_first,
                failed=send_anyway)


def claim(client: redis.Redis, flag: str = PASS_REQUESTED) -> None:
    """A pass is starting: requests from now on need another pass."""
    client.delete(flag)


def requested_meanwhile(client: redis.Redis, flag: str = PASS_REQUESTED) -> bool:
    return bool(client.exists(flag))
