"""A job goes from REST submission to a final state through real scheduler passes and a real
agent running real subprocesses. The agent is stepped with tick(); no test sleeps for a scheduler."""

import json
import time

import pytest

from tests.agent.harness import agents_on
from tests.conftest import container_pool, job_body, later
from trainhub.jobs import states
from trainhub.jobs.models import CustomJob
from trainhub.scheduling.services import scheduler_pass

pytestmark = pytest.mark.django_db(transaction=True)

BASE = "/v1/projects/alpha/locations/us-central1/customJobs"


def make_agent(tmp_path, grace=1):
    return agents_on(tmp_path, grace=grace)


def run_until(agent, job, moment, final_states=states.TERMINAL, limit=1000):
    """Tick the agent until the job reaches one of ``final_states`` (bounded: never hangs)."""
    for _ in range(limit):
        moment = later(moment, 0.05)
        agent.tick(now=moment)
        scheduler_pass(now=moment)
        job.refresh_from_db()
        if job.state in final_states:
            return job, moment
        time.sleep(0.02)  # let the child processes run; the scheduler itself is stepped explicitly
    raise AssertionError(f"job stuck in {job.state}")


def test_a_three_replica_job_sees_its_cluster_spec_and_succeeds(api, nodes, now, tmp_path):
    script = "import os; print(os.environ['CLUSTER_SPEC']); print('RANK', os.environ['RANK'], flush=True)"
    # The primary outlives the workers: once it exits 0 the job succeeds and the rest are stopped.
    primary = script + "; import time; time.sleep(4)"
    body = job_body(container_pool(replicas=1, command=["python3", "-c", primary]),
                    container_pool(replicas=2, command=["python3", "-c", script]), name="three")
    response = api("uma").post(BASE, body, format="json")
    assert response.status_code == 200, response.content
    job = CustomJob.objects.get(job_id=response.json()["name"].rsplit("/", 1)[1])
    agent = make_agent(tmp_path)
    scheduler_pass(now=now)
    job, moment = run_until(agent, job, now)
    assert job.state == states.SUCCEEDED
    logs = api("uma").get(f"{BASE}/{job.job_id}/logs").json()["entries"]
    specs = [json.loads(entry["text"]) for entry in logs if entry["text"].startswith("{")]
    assert len(specs) == 3
    assert {(s["task"]["type"], s["task"]["index"]) for s in specs} == {
        ("workerpool0", 0), ("workerpool1", 0), ("workerpool1", 1)}
    assert len(specs[0]["cluster"]["workerpool1"]) == 2
    ranks = sorted(entry["text"] for entry in logs if entry["text"].startswith("RANK"))
    assert ranks == ["RANK 0", "RANK 1", "RANK 2"]


def test_a_failing_replica_fails_the_job_with_its_exit_code(api, nodes, now, tmp_path):
    body = job_body(container_pool(command=["python3", "-c", "import sys; sys.exit(3)"]))
    job_id = api("uma").post(BASE, body, format="json").json()["name"].rsplit("/", 1)[1]
    job = CustomJob.objects.get(job_id=job_id)
    job, _ = run_until(make_agent(tmp_path), job, now)
    assert job.state == states.FAILED
    assert job.error["message"] == "The replica workerpool0-0 exited with a non-zero status of 3. Termination reason: Error."


def test_cancel_stops_a_running_replica(api, nodes, now, tmp_path):
    body = job_body(container_pool(command=["sleep", "60"]))
    job_id = api("uma").post(BASE, body, format="json").json()["name"].rsplit("/", 1)[1]
    job = CustomJob.objects.get(job_id=job_id)
    agent = make_agent(tmp_path)
    job, moment = run_until(agent, job, now, final_states={states.RUNNING})
    assert api("uma").post(f"{BASE}/{job_id}:cancel", {}, format="json").status_code == 200
    job, _ = run_until(agent, job, moment)
    assert job.state == states.CANCELLED
    assert job.error["code"] == 1
    assert not job.replicas.filter(active=True).exists()
