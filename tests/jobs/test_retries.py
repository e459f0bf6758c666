"""Vertex's retries: a worker restarts on its node after a non-permanent failure (5 times), then the
job is retried (3 times); SIGABRT/SIGSEGV retry the job; OOM and user-code errors end it at once."""

import pytest

from tests.conftest import container_pool, job_body, later
from trainhub.jobs import retries, services, states
from trainhub.jobs.models import CustomJob, Replica
from trainhub.jobs.retries import ExitKind, classify_exit
from trainhub.scheduling.services import scheduler_pass


@pytest.mark.parametrize("exit_code, kind", [
    (0, ExitKind.SUCCEEDED),
    (1, ExitKind.USER_ERROR), (2, ExitKind.USER_ERROR), (127, ExitKind.USER_ERROR), (255, ExitKind.USER_ERROR),
    (134, ExitKind.RETRY_JOB), (-6, ExitKind.RETRY_JOB), (139, ExitKind.RETRY_JOB), (-11, ExitKind.RETRY_JOB),
    (137, ExitKind.OUT_OF_MEMORY), (-9, ExitKind.OUT_OF_MEMORY),
    (143, ExitKind.RESTART_WORKER), (-15, ExitKind.RESTART_WORKER), (129, ExitKind.RESTART_WORKER),
    (135, ExitKind.RESTART_WORKER), (-7, ExitKind.RESTART_WORKER),
])
def test_each_exit_status_is_classified_as_vertex_treats_it(exit_code, kind):
    assert classify_exit(exit_code) is kind


def test_a_worker_restarts_five_times_then_the_job_is_retried_three_times_then_it_fails():
    def decide(restarts, retried):
        return retries.decide(task="workerpool0-0", exit_code=143, worker_restarts=restarts, job_retries=retried)

    assert [decide(n, 0).action for n in range(6)] == [retries.RESTART_WORKER] * 5 + [retries.RETRY_JOB]
    assert [decide(5, n).action for n in range(4)] == [retries.RETRY_JOB] * 3 + [retries.FAIL]
    assert decide(5, 3).message == ("The replica workerpool0-0 exited with a non-zero status of 143. Termination "
                                    "reason: killed by SIGTERM. The job was already retried 3 times.")


def test_disable_retries_ends_the_job_at_the_first_failure_of_any_kind():
    for code in (143, 134, -11):
        decision = retries.decide(task="workerpool0-0", exit_code=code, worker_restarts=0, job_retries=0,
                                  disable_retries=True, restart_job_on_worker_restart=True)
        assert decision.action == retries.FAIL


@pytest.fixture
def running(cast, nodes, now):
    def submit(**scheduling):
        body = job_body(container_pool(), container_pool(replicas=2), scheduling=scheduling or None)
        job = services.job_submit(project=cast["alpha"], location="us-central1", user=cast["uma"], body=body, now=now)
        scheduler_pass(now=now)
        for replica in job.replicas.all():
            services.replica_started(replica=replica, now=now)
        job.refresh_from_db()
        assert job.state == states.RUNNING
        return job
    return submit


def active(job, pool_index, replica_index):
    return job.replicas.get(pool_index=pool_index, replica_index=replica_index, active=True)


def test_a_worker_killed_by_sigterm_restarts_on_its_node_as_a_new_replica(running, now):
    job = running()
    first = active(job, 1, 0)
    services.replica_exited(replica=first, exit_code=143, now=later(now, 5))
    job.refresh_from_db()
    assert job.state == states.RUNNING and job.retry_count == 0 and job.restart_count == 0
    again = active(job, 1, 0)
    assert again.pk != first.pk
    assert (again.node_id, again.gpu_indices, again.attempt, again.restart) == (first.node_id, first.gpu_indices, 0, 1)
    assert (again.master_port, again.state) == (first.master_port, states.REPLICA_ASSIGNED)
    assert not job.replicas.filter(stop_requested=True).exists()  # the other workers keep running
    assert "Restarting it on its node (restart 1 of 5)" in job.events.last().message


def test_after_five_restarts_the_job_is_retried_from_the_queue(running, now, django_capture_on_commit_callbacks):
    job = running()
    for n in range(6):
        with django_capture_on_commit_callbacks(execute=True):
            services.replica_exited(replica=active(job, 0, 0), exit_code=-15, now=later(now, n + 1))
    job.refresh_from_db()
    assert (job.retry_count, job.restart_count) == (1, 1)
    assert job.events.filter(state=states.QUEUED).last().message.endswith("Retrying the job (retry 1 of 3).")
    assert job.replicas.filter(pool_index=0, attempt=0).count() == 6
    assert not job.replicas.filter(active=True, attempt=0).exists()
    # The pass the retry asked for placed the gang again: a new attempt, every task from restart 0.
    assert job.state == states.PENDING
    assert set(job.replicas.filter(active=True).values_list("attempt", "restart")) == {(1, 0)}


@pytest.mark.parametrize("exit_code", [134, 139, -6, -11])
def test_sigabrt_and_sigsegv_retry_the_whole_job_at_once(running, now, exit_code):
    job = running()
    services.replica_exited(replica=active(job, 1, 1), exit_code=exit_code, now=later(now, 5))
    job.refresh_from_db()
    assert job.state == states.QUEUED and job.retry_count == 1
    assert "Retrying the job (retry 1 of 3)" in job.events.filter(state=states.QUEUED).last().message


def test_the_fourth_transient_failure_fails_the_job(running, now, django_capture_on_commit_callbacks):
    job = running()
    for attempt in range(4):
        scheduler_pass(now=later(now, attempt))
        with django_capture_on_commit_callbacks(execute=True):
            services.replica_exited(replica=active(job, 0, 0), exit_code=139, now=later(now, attempt + 0.5))
    job.refresh_from_db()
    assert job.state == states.FAILED and job.retry_count == 3
    assert job.error == {"code": 3, "message": "The replica workerpool0-0 exited with a non-zero status of 139. "
                                               "Termination reason: killed by SIGSEGV. The job was already retried 3 times."}


@pytest.mark.parametrize("exit_code", [137, -9])
def test_out_of_memory_ends_the_job_with_vertexs_message(running, now, exit_code):
    job = running()
    services.replica_exited(replica=active(job, 1, 0), exit_code=exit_code, now=later(now, 5))
    job.refresh_from_db()
    assert job.state == states.FAILED
    assert job.error["message"] == (f"The replica workerpool1-0 ran out of memory and exited with a non-zero status "
                                    f"of {exit_code}.")
    assert job.replicas.filter(active=True, stop_requested=False).count() == 0


def test_a_user_code_error_ends_the_job_with_vertexs_message(running, now):
    job = running()
    services.replica_exited(replica=active(job, 0, 0), exit_code=1, now=later(now, 5))
    job.refresh_from_db()
    assert job.state == states.FAILED and job.retry_count == 0
    assert job.error["message"] == "The replica workerpool0-0 exited with a non-zero status of 1. Termination reason: Error."


def test_disable_retries_fails_the_job_instead_of_restarting_the_worker(running, now):
    job = running(disableRetries=True)
    services.replica_exited(replica=active(job, 1, 0), exit_code=143, now=later(now, 5))
    job.refresh_from_db()
    assert job.state == states.FAILED
    assert Replica.objects.filter(job=job, restart__gt=0).count() == 0


def test_restart_job_on_worker_restart_retries_the_whole_job_instead(running, now):
    job = running(restartJobOnWorkerRestart=True)
    services.replica_exited(replica=active(job, 1, 0), exit_code=143, now=later(now, 5))
    job.refresh_from_db()
    assert job.state == states.QUEUED and job.retry_count == 1
    assert Replica.objects.filter(job=job, restart__gt=0).count() == 0


def test_a_replica_stopped_by_the_control_plane_is_not_restarted(running, now):
    job = running()
    services.job_cancel(job=job, now=later(now, 1))
    services.replica_exited(replica=active(job, 1, 0), exit_code=137, now=later(now, 2))
    assert not Replica.objects.filter(job=job, restart__gt=0).exists()
    assert CustomJob.objects.get(pk=job.pk).state == states.CANCELLING


def test_a_restarted_primary_that_exits_zero_succeeds_the_job(running, now):
    job = running()
    services.replica_exited(replica=active(job, 0, 0), exit_code=143, now=later(now, 1))
    restarted = active(job, 0, 0)
    services.replica_started(replica=restarted, now=later(now, 2))
    services.replica_exited(replica=restarted, exit_code=0, now=later(now, 3))
    job.refresh_from_db()
    assert job.state == states.SUCCEEDED


def test_restarts_are_shown_in_the_rest_resource_and_on_the_job_page(running, now, api, client, cast):
    job = running()
    services.replica_exited(replica=active(job, 1, 1), exit_code=143, now=later(now, 1))
    services.replica_exited(replica=active(job, 1, 1), exit_code=143, now=later(now, 2))
    body = api("uma").get(f"/v1/{job.resource_name}").json()["trainhubStatus"]
    assert [(r["taskName"], r["restartCount"]) for r in body["replicas"]] == [
        ("workerpool0-0", 0), ("workerpool1-0", 0), ("workerpool1-1", 2)]
    assert (body["workerRestartCount"], body["retryCount"]) == (2, 0)
    client.force_login(cast["uma"])
    page = client.get(f"/projects/alpha/locations/us-central1/jobs/{job.job_id}/").content.decode()
    assert "Restarts on its node after a non-permanent failure" in page
    assert page.count('<th scope="row" class="mono">workerpool1-1</th>') == 1


def test_a_lost_worker_restarts_the_job_only_while_job_retries_are_left(running, now):
    job = running(restartJobOnWorkerRestart=True)
    CustomJob.objects.filter(pk=job.pk).update(retry_count=retries.MAX_JOB_RETRIES)
    services.replica_exited(replica=active(job, 1, 0), exit_code=None, now=later(now, 5), lost_reason="node gone")
    job.refresh_from_db()
    assert job.state == states.FAILED and job.error["message"] == "The replica workerpool1-0 was lost: node gone."
