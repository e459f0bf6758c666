"""Thin Celery wrappers: take the scheduler's leader lock (node reservations must not race a
scheduler pass), call one service."""

import logging

from celery import shared_task
from django.utils import timezone

from trainhub.common.redis import get_redis
from trainhub.resources import services
from trainhub.scheduling.leader import leader_lock

logger = logging.getLogger(__name__)


@shared_task(bind=True, autoretry_for=(ConnectionError,), retry_backoff=True, max_retries=5, ignore_result=True)
def persistent_resources_advance(self) -> None:
    with leader_lock(get_redis()) as leading:
        if not leading:
            # A pass holds the lock; try again shortly (beat also runs this every 10 s).
            raise self.retry(countdown=2, max_retries=3)
        changed = services.persistent_resources_advance(now=timezone.now())
        if changed:
            logger.info("persistent resources: %d changed state", changed)
