"""Thin Celery wrappers (scheduled in settings.CELERY_BEAT_SCHEDULE)."""

from celery import shared_task
from django.utils import timezone

from trainhub.dashboards import services


@shared_task(ignore_result=True)
def record_samples() -> None:
    now = timezone.now()
    services.samples_record(now=now)
    services.samples_prune(now=now)
