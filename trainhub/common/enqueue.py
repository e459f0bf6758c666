"""Services ask for background work by the task's name, after their transaction commits.

A service never imports a Celery task: tasks sit above services (they call them), so importing one
from below would make the two modules import each other. ``enqueue_after_commit`` sends the task
named ``module.function`` (the name ``@shared_task`` registers) through the project's Celery app;
under CELERY_TASK_ALWAYS_EAGER (the test suite) it runs it in process, as ``.delay()`` would.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

from celery import current_app
from django.db import transaction


def enqueue(task_name: str, *args: Any) -> None:
    if current_app.conf.task_always_eager:
        module, _, function = task_name.rpartition(".")
        getattr(import_module(module), function).delay(*args)
    else:
        current_app.send_task(task_name, args=args)


def enqueue_in(seconds: float, task_name: str, *args: Any) -> None:
    """Send the task to run ``seconds`` from now. Under CELERY_TASK_ALWAYS_EAGER nothing is sent: an
    eager task cannot wait, and the suite drives time itself (services take ``now``)."""
    if not current_app.conf.task_always_eager:
        current_app.send_task(task_name, args=args, countdown=seconds)


def enqueue_after_commit(task_name: str, *args: Any) -> None:
    """Send the task once the current transaction commits (at once outside one); a failure to
    send is logged by Django's robust on_commit, never raised into the committed request."""
    transaction.on_commit(lambda: enqueue(task_name, *args), robust=True)
