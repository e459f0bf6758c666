"""Requests for a scheduler pass coalesce into one waiting task, and none is lost to a running pass."""

import pytest

from trainhub.scheduling import pass_requests, tasks
from trainhub.scheduling.services import PassResult


@pytest.fixture
def sent(monkeypatch):
    calls = []
    monkeypatch.setattr(tasks.scheduler_pass, "delay", lambda: calls.append(1))
    return calls


def test_many_requests_before_a_pass_starts_send_one_task(sent):
    for _ in range(5):
        pass_requests._send()
    assert len(sent) == 1


def test_a_request_after_a_pass_started_sends_another_task(sent, redis_client):
    pass_requests._send()
    pass_requests.claim(redis_client)
    pass_requests._send()
    assert len(sent) == 2


def test_a_pass_asked_for_while_one_runs_follows_it(sent, monkeypatch, db):
    def pass_during_which_a_job_arrives(*, now):
        pass_requests._send()  # the flag was cleared when this pass started: a task is sent...
        pass_requests._send()  # ...once
        return PassResult(considered=0, placed=0, failed=0)

    monkeypatch.setattr(tasks.services, "scheduler_pass", pass_during_which_a_job_arrives)
    tasks.scheduler_pass()
    assert len(sent) == 2  # the one sent during the pass, and one more because the flag is still set


def test_passes_start_at_most_the_configured_number_of_times_a_second():
    """Under a burst of submissions a pass places a batch: Celery's rate_limit on the task spaces
    passes 1/TRAINHUB_SCHEDULER_PASSES_PER_SECOND s apart on a worker (without it they ran back to
    back, about 50 a second at 450 submissions/s, and took a quarter of a core from the web)."""
    from celery.utils.time import rate
    from django.conf import settings

    from trainhub.celery import app

    task = app.tasks[pass_requests.SCHEDULER_PASS_TASK]
    assert settings.TRAINHUB_SCHEDULER_PASSES_PER_SECOND == 10
    assert rate(task.rate_limit) == 10
