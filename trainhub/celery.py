"""Celery application. Every periodic schedule is declared in settings.CELERY_BEAT_SCHEDULE."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "trainhub.settings")

app = Celery("trainhub")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
