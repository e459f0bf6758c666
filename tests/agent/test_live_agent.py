"""A real `trainhub-agent` process over real HTTP (a live server): it joins with a join token,
runs a 2-replica job, is killed with SIGKILL mid-job and started again; the job succeeds with
its full log, because its replicas ran on under their supervisors."""

import datetime as dt
import os
import signal
import subprocess
import sys
import time

import pytest
from django.utils import timezone

from tests.conftest import container_pool, job_body
from trainhub.agent.main import without_control_plane_secrets
from trainhub.inventory.models import Node, NodePool
from trainhub.inventory.services import join_token_create
from trainhub.jobs import states
from trainhub.jobs.models import CustomJob, LogLine
from trainhub.scheduling.services import scheduler_pass

pytestmark = pytest.mark.django_db(transaction=True)
BASE = "/v1/projects/alpha/locations/us-central1/customJobs"


def start_agent(live_server, state_dir, work_dir, *extra):
    argv = [sys.executable, "-m", "trainhub.agent.main", "run", "--url", live_server.url, "--state-dir",
            str(state_dir), "--work-dir", str(work_dir), "--grace", "1", "--runtime", "subprocess", *extra]
    return subprocess.Popen(argv, env=without_control_plane_secrets(dict(os.environ)), start_new_session=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def wait_for(condition, seconds, what):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        scheduler_pass(now=timezone.now())
        if condition():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def test_a_killed_and_restarted_agent_process_finishes_its_job_with_the_full_log(api, live_server, tmp_path):
    pool = NodePool.objects.create(name="live", machine_type="n1-standard-4")
    _, token = join_token_create(pool=pool, created_by="test", now=timezone.now(), ttl=dt.timedelta(hours=1))
    state_dir = tmp_path / "state"
    agents = [start_agent(live_server, state_dir / name, tmp_path / "work", "--token", token, "--name", name)
              for name in ("live-0", "live-1")]
    wait_for(lambda: Node.objects.filter(pool=pool, joined_at__isnull=False).count() == 2, 60, "both nodes to join")
    assert Node.objects.get(name="live-0").facts["cpus"] == os.cpu_count()
    counting = "import time\nfor i in range(40):\n    print('{} line', i)\n    time.sleep(0.1)\n"
    body = job_body(container_pool(command=["python3", "-c", counting.format("chief")]),
                    container_pool(command=["python3", "-c", counting.format("worker")]))
    response = api("uma").post(BASE, body, format="json")
    assert response.status_code == 200, response.content
    job = CustomJob.objects.get(job_id=response.json()["name"].rsplit("/", 1)[1])
    wait_for(lambda: LogLine.objects.filter(job=job).count() >= 4, 60, "the replicas to print")
    for agent in agents:
        os.killpg(agent.pid, signal.SIGKILL)
        agent.wait(timeout=10)
    time.sleep(1)
    agents = [start_agent(live_server, state_dir / name, tmp_path / "work") for name in ("live-0", "live-1")]
    try:
        wait_for(lambda: CustomJob.objects.get(pk=job.pk).state in states.TERMINAL, 90, "the job to end")
        job.refresh_from_db()
        assert job.state == states.SUCCEEDED, job.error
        texts = list(LogLine.objects.filter(job=job).values_list("text", flat=True))
        assert sorted(t for t in texts if t.startswith("chief")) == sorted(f"chief line {i}" for i in range(40))
    finally:
        for agent in agents:
            os.killpg(agent.pid, signal.SIGTERM)
            agent.wait(timeout=20)
