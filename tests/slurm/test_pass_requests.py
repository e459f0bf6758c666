"""A Slurm cluster's pass requests coalesce as the scheduler's do (scheduling.pass_requests): a burst
of sbatch before a pass starts sends one task, and a request made while a pass runs gets another."""

import datetime as dt

import pytest

from tests.slurm.conftest import SCHED_DELAY, make_job, run_pass
from trainhub.slurm import tasks
from trainhub.slurm.services.clusters import request_pass


@pytest.fixture
def sent(monkeypatch, redis_client):
    calls = []
    monkeypatch.setattr(tasks.cluster_pass, "delay", calls.append)
    return calls


def test_many_requests_before_the_pass_starts_send_one_task_per_cluster(sent, accounts,
                                                                       django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        for _ in range(5):
            request_pass(accounts)
    assert sent == [accounts.pk]


def test_a_request_while_the_pass_runs_sends_another_after_it(sent, accounts, monkeypatch,
                                                             django_capture_on_commit_callbacks):
    def pass_during_which_a_job_arrives(*, cluster_pk, now):
        with django_capture_on_commit_callbacks(execute=True):
            request_pass(accounts)  # the flag was cleared when this pass started: a task is sent...
            request_pass(accounts)  # ...once

    monkeypatch.setattr(tasks.passes, "cluster_pass_recorded", pass_during_which_a_job_arrives)
    tasks.cluster_pass(accounts.pk)
    assert sent == [accounts.pk, accounts.pk]  # the one sent during the pass, and one more: the flag is set


def test_a_pass_that_skips_the_main_scheduler_asks_for_one_when_it_is_due(accounts, monkeypatch):
    """slurmctld's background loop runs the main scheduler batch_sched_delay (3 s) after its last run:
    a pass within it (and within bf_interval of the last backfill) leaves the new job pending and asks
    for a pass then, not at beat's next."""
    from django.utils import timezone

    from trainhub.slurm.models import JobState, SlurmCluster

    due = []
    monkeypatch.setattr(tasks, "enqueue_in", lambda seconds, name, *args: due.append((round(seconds), name, args)))
    second_ago = timezone.now() - dt.timedelta(seconds=1)
    SlurmCluster.objects.filter(pk=accounts.pk).update(last_main_time=second_ago, last_backfill_time=second_ago)
    job = make_job(accounts)
    tasks.cluster_pass(accounts.pk)
    job.refresh_from_db()
    assert job.state == JobState.PENDING
    assert due == [(2, "trainhub.slurm.tasks.cluster_pass", (accounts.pk,))]

    due.clear()
    run_pass(accounts, now=timezone.now() + SCHED_DELAY)  # that pass: the main scheduler runs
    job.refresh_from_db()
    assert job.state == JobState.RUNNING and due == []


def test_a_salloc_request_a_pass_saw_before_its_submission_is_still_tried_at_once(accounts):
    """A pass begun (by another request) just before a salloc's submission reads the new job with
    BeginTime still ahead of the pass's moment: that was no try, so the next pass allocates it at once
    (job_allocate) rather than waiting batch_sched_delay for the main scheduler."""
    from django.utils import timezone

    from trainhub.slurm.models import JobState, SlurmCluster

    submitted = timezone.now()
    second_ago = submitted - dt.timedelta(seconds=1)
    SlurmCluster.objects.filter(pk=accounts.pk).update(last_main_time=second_ago, last_backfill_time=second_ago)
    job = make_job(accounts, now=submitted, interactive=True, sched_eval_time=submitted - dt.timedelta(milliseconds=5))
    run_pass(accounts, now=submitted + SCHED_DELAY)  # the main scheduler's next run
    job.refresh_from_db()
    assert job.state == JobState.RUNNING


def test_a_job_submitted_after_the_pass_began_is_left_to_the_next(accounts):
    """A pass whose moment came before a job's submission (it read the queue later) neither starts
    the job nor gives it a reason, an evaluation or an expected start: slurmctld's schedulers test the
    queue they built when they began (fixtures/22.05/ntasks scontrol-9: StartTime=Unknown)."""
    from django.utils import timezone

    from trainhub.slurm.models import JobState

    submitted = timezone.now()
    job = make_job(accounts, now=submitted, reason="None")
    run_pass(accounts, now=submitted - dt.timedelta(milliseconds=50))
    job.refresh_from_db()
    assert (job.state, job.reason, job.sched_eval_time, job.expected_start) == (JobState.PENDING, "None", None, None)
    run_pass(accounts, now=submitted + SCHED_DELAY)  # the main scheduler's next run
    job.refresh_from_db()
    assert job.state == JobState.RUNNING
