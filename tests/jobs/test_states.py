"""Every JobState transition: the allowed ones happen through services, the rest are refused."""

import pytest

from tests.conftest import container_pool, job_body, later
from trainhub.jobs import services, states
from trainhub.jobs.models import JobEvent
from trainhub.scheduling.services import scheduler_pass


@pytest.mark.parametrize("current, target", [
    (states.SUCCEEDED, states.RUNNING), (states.FAILED, states.QUEUED), (states.CANCELLED, states.CANCELLING),
    (states.QUEUED, states.SUCCEEDED), (states.CANCELLING, states.RUNNING), (states.RUNNING, states.PENDING),
])
def test_illegal_transitions_are_refused(current, target):
    with pytest.raises(states.IllegalTransition):
        states.check_transition(current, target)


def test_terminal_states_have_no_successor():
    for state in states.TERMINAL:
        assert not states.ALLOWED_TRANSITIONS[state]


@pytest.fixture
def placed(cast, nodes, now):
    body = job_body(container_pool(), container_pool(replicas=2))
    job = services.job_submit(project=cast["alpha"], location="us-central1", user=cast["uma"], body=body, now=now)
    scheduler_pass(now=now)
    job.refresh_from_db()
    return job


def start_all(job, now):
    for replica in job.replicas.all():
        services.replica_started(replica=replica, now=now)
    job.refresh_from_db()


def test_queued_pending_running_succeeded_with_timestamps(placed, now):
    assert placed.state == states.PENDING
    first, *rest = list(placed.replicas.all())
    services.replica_started(replica=first, now=later(now, 1))
    placed.refresh_from_db()
    assert placed.state == states.PENDING  # RUNNING only once every worker is up
    start_all(placed, later(now, 2))
    assert placed.state == states.RUNNING
    assert placed.start_time == later(now, 2)
    services.replica_exited(replica=first, exit_code=0, now=later(now, 10))
    placed.refresh_from_db()
    assert placed.state == states.SUCCEEDED
    assert placed.end_time == later(now, 10)
    assert placed.error is None
    assert all(r.stop_requested for r in placed.replicas.filter(active=True))
    assert list(JobEvent.objects.filter(job=placed).exclude(state="").values_list("state", flat=True)) == [
        states.QUEUED, states.PENDING, states.RUNNING, states.SUCCEEDED]


def test_a_worker_exiting_zero_does_not_end_the_job(placed, now):
    start_all(placed, now)
    worker = placed.replicas.get(pool_index=1, replica_index=0)
    services.replica_exited(replica=worker, exit_code=0, now=later(now, 5))
    placed.refresh_from_db()
    assert placed.state == states.RUNNING


def test_a_worker_failing_in_its_own_code_fails_the_job_and_stops_the_rest(placed, now):
    start_all(placed, now)
    worker = placed.replicas.get(pool_index=1, replica_index=1)
    services.replica_exited(replica=worker, exit_code=2, now=later(now, 5))
    placed.refresh_from_db()
    assert placed.state == states.FAILED
    assert placed.error == {"code": 3, "message": "The replica workerpool1-1 exited with a non-zero status of 2. "
                                                  "Termination reason: Error."}
    assert placed.replicas.filter(active=True, stop_requested=False).count() == 0


def test_cancel_of_a_running_job_goes_through_cancelling(placed, now):
    start_all(placed, now)
    services.job_cancel(job=placed, now=later(now, 1))
    placed.refresh_from_db()
    assert placed.state == states.CANCELLING
    replicas = list(placed.replicas.all())
    for replica in replicas[:-1]:
        services.replica_exited(replica=replica, exit_code=143, now=later(now, 2))
    placed.refresh_from_db()
    assert placed.state == states.CANCELLING
    services.replica_exited(replica=replicas[-1], exit_code=143, now=later(now, 3))
    placed.refresh_from_db()
    assert placed.state == states.CANCELLED
    assert placed.error["code"] == 1


def test_a_primary_finishing_while_cancelling_still_ends_cancelled_once_all_stop(placed, now):
    start_all(placed, now)
    services.job_cancel(job=placed, now=now)
    for replica in placed.replicas.all():
        services.replica_exited(replica=replica, exit_code=0, now=later(now, 1))
    placed.refresh_from_db()
    assert placed.state == states.CANCELLED


def test_an_exit_reported_twice_is_recorded_once(placed, now):
    start_all(placed, now)
    primary = placed.replicas.get(pool_index=0)
    services.replica_exited(replica=primary, exit_code=0, now=later(now, 1))
    services.replica_exited(replica=primary, exit_code=1, now=later(now, 2))
    primary.refresh_from_db()
    assert primary.exit_code == 0
