"""Signals other apps subscribe to instead of polling the jobs tables.

``job_state_changed`` is sent after the transaction that changed a job's state commits, with
``job`` (the CustomJob) and ``state`` (its new JobState name). Receivers must be quick (queue a
Celery task): they run in whichever process made the change (web, worker or node agent).
"""

from django.dispatch import Signal

job_state_changed = Signal()
