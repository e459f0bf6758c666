"""Worker restarts and per-job ports as the node agent sees them: a restarted replica is a new id on
the same node, which the agent starts like any listed replica; the ports of the assignment reach
the replica's environment; a spec's own PYTHONUNBUFFERED wins over the agent's default."""

import json

import pytest

from tests.agent.harness import agents_on
from tests.agent.test_node_agent import BASE, step, submit
from tests.conftest import container_pool
from trainhub.inventory.models import Node
from trainhub.jobs import states
from trainhub.jobs.models import CustomJob

FAILS_ONCE = ("import os, pathlib, signal\n"
              "marker = pathlib.Path('ran-before')\n"
              "if not marker.exists():\n"
              "    marker.touch()\n"
              "    print('first run', flush=True)\n"
              "    os.kill(os.getpid(), signal.SIGTERM)\n"
              "print('second run')\n")

SHOWS_ENV = ("import json, os\n"
             "print('ENV', json.dumps({k: os.environ.get(k) for k in "
             "('MASTER_PORT', 'CLUSTER_SPEC', 'TF_CONFIG', 'PYTHONUNBUFFERED')}))\n")


def texts(api, job):
    return [entry["text"] for entry in api("uma").get(f"{BASE}/{job.job_id}/logs?pageSize=1000").json()["entries"]]


@pytest.mark.django_db(transaction=True)
def test_a_replica_killed_by_a_signal_is_restarted_on_its_node_and_the_job_succeeds(api, nodes, now, tmp_path):
    job = submit(api, container_pool(command=["python3", "-c", FAILS_ONCE]))
    group = agents_on(tmp_path, list(Node.objects.filter(pool=nodes["t4"])))
    step(group, now, lambda: CustomJob.objects.get(pk=job.pk).state in states.TERMINAL)
    job.refresh_from_db()
    assert job.state == states.SUCCEEDED, job.error
    first, second = job.replicas.order_by("restart")
    assert (first.exit_code, first.restart, second.exit_code, second.restart) == (-15, 0, 0, 1)
    assert first.node_id == second.node_id and first.pk != second.pk
    assert job.retry_count == 0
    assert {"first run", "second run"} <= set(texts(api, job))
    status = api("uma").get(f"{BASE}/{job.job_id}").json()["trainhubStatus"]
    assert status["workerRestartCount"] == 1 and status["replicas"][0]["restartCount"] == 1


@pytest.mark.django_db(transaction=True)
def test_the_replicas_get_the_jobs_ports_and_the_specs_own_pythonunbuffered(api, nodes, now, tmp_path, settings):
    settings.TRAINHUB_RENDEZVOUS_PORTS = "31000-31099"
    t4 = list(Node.objects.filter(pool=nodes["t4"]))
    job = submit(api, container_pool(command=["python3", "-c", SHOWS_ENV],
                                     env=[{"name": "PYTHONUNBUFFERED", "value": "from-the-spec"}]),
                 container_pool(command=["python3", "-c", SHOWS_ENV]))
    group = agents_on(tmp_path, t4)
    step(group, now, lambda: CustomJob.objects.get(pk=job.pk).state in states.TERMINAL)
    job.refresh_from_db()
    assert job.state == states.SUCCEEDED, job.error
    envs = [json.loads(text.removeprefix("ENV ")) for text in texts(api, job) if text.startswith("ENV ")]
    assert len(envs) == 2
    assert {env["MASTER_PORT"] for env in envs} == {"31000"}
    cluster = json.loads(envs[0]["CLUSTER_SPEC"])["cluster"]
    assert [peer.rsplit(":", 1)[1] for pool in ("workerpool0", "workerpool1") for peer in cluster[pool]] == ["31001"] * 2
    # The primary's spec sets PYTHONUNBUFFERED; the worker gets the agent's default.
    assert sorted(env["PYTHONUNBUFFERED"] for env in envs) == ["1", "from-the-spec"]
