"""Thin Celery wrappers: take the leader lock, call one service."""

import logging

from celery import shared_task
from celery.signals import worker_ready
from django.utils import timezone

from trainhub.common.redis import get_redis
from trainhub.scheduling import services
from trainhub.scheduling.leader import leader_lock

logger = logging.getLogger(__name__)


@shared_task(autoretry_for=(ConnectionError,), retry_backoff=True, max_retries=5, ignore_result=True)
def scheduler_pass() -> None:
    with leader_lock(get_redis()) as leading:
        if not leading:
            logger.debug("another worker is running the scheduler pass")
            return
        result = services.scheduler_pass(now=timezone.now())
        if result.placed or result.failed:
            logger.info("scheduler pass: %s", result)


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
