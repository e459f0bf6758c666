"""Thin Celery wrappers: take the leader lock, call one service."""

import logging
import os
import socket
import time

from celery import shared_task
from celery.signals import worker_ready
from django.conf import settings
from django.utils import timezone

from trainhub.common.redis import get_redis
from trainhub.scheduling import pass_requests, services
from trainhub.scheduling.leader import leader_lock

logger = logging.getLogger(__name__)


@shared_task(autoretry_for=(ConnectionError,), retry_backoff=True, max_retries=5, ignore_result=True)
def scheduler_pass() -> None:
    client = get_redis()
    with leader_lock(client, ttl_seconds=settings.TRAINHUB_SCHEDULER_LOCK_SECONDS) as leading:
        if not leading:
            logger.debug("another worker is running the scheduler pass")
            return
        started = time.time()
        pass_requests.claim(client)
        result = services.scheduler_pass(now=timezone.now())
        # One line per pass led, with wall-clock bounds: which worker led when, and how long it took
        # (`make chaos` reads these lines to prove that passes never overlap).
        logger.info("scheduler pass led by %s:%d started=%.6f ended=%.6f considered=%d placed=%d failed=%d "
                    "preempted=%d", socket.gethostname(), os.getpid(), started, time.time(), result.considered,
                    result.placed, result.failed, result.preempted)
    if pass_requests.requested_meanwhile(client):
        scheduler_pass.delay()


@shared_task(ignore_result=True)
def node_heartbeat_sweep() -> None:
    services.nodes_sweep_heartbeats(now=timezone.now())


@shared_task(autoretry_for=(ConnectionError,), retry_backoff=True, max_retries=5, ignore_result=True)
def flex_start_deadline_sweep() -> None:
    services.flex_start_deadline_sweep(now=timezone.now())


@shared_task(ignore_result=True)
def working_memory_resync() -> None:
    services.working_memory_reconcile(now=timezone.now(), rebuild=False)


@worker_ready.connect
def rebuild_working_memory_at_start(**_kwargs) -> None:
    services.working_memory_reconcile(now=timezone.now())
