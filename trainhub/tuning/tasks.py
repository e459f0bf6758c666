"""Thin Celery wrappers around tuning.services."""

from celery import shared_task
from django.utils import timezone

from trainhub.tuning import services


@shared_task(autoretry_for=(ConnectionError,), retry_backoff=True, max_retries=5, ignore_result=True)
def owned_job_changed(job_pk: int) -> None:
    services.owned_job_changed(job_pk=job_pk, now=timezone.now())


@shared_task(ignore_result=True)
def live_work_advance() -> None:
    services.live_work_advance(now=timezone.now())
