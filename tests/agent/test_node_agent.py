"""The node agent as a machine runs it: replicas under supervisors that outlive the agent,
re-adoption after a restart, fencing of replicas the control plane no longer lists, one replica's
failure kept to itself, and discovery of the machine's GPUs."""

import json
import os
import time
from pathlib import Path

import pytest

from tests.agent.harness import agents_on
from tests.conftest import container_pool, job_body, later
from trainhub.agent.discovery import machine_facts, parse_nvidia_smi
from trainhub.inventory.facts import accelerator_type_of, facts_problem
from trainhub.inventory.models import Node, NodeState
from trainhub.jobs import states
from trainhub.jobs.models import CustomJob
from trainhub.scheduling.services import nodes_sweep_heartbeats, scheduler_pass

FIXTURES = Path(__file__).parent / "fixtures"
BASE = "/v1/projects/alpha/locations/us-central1/customJobs"


def submit(api, *pools, **spec):
    response = api("uma").post(BASE, job_body(*pools, **spec), format="json")
    assert response.status_code == 200, response.content
    return CustomJob.objects.get(job_id=response.json()["name"].rsplit("/", 1)[1])


def step(group, moment, until, limit=600):
    for _ in range(limit):
        moment = later(moment, 0.05)
        group.tick(now=moment)
        scheduler_pass(now=moment)
        if until():
            return moment
        time.sleep(0.02)
    raise AssertionError("condition never held")


def alive(pid: int) -> bool:
    """Running and not a zombie (a process reaped between the two checks is not alive)."""
    try:
        os.kill(pid, 0)
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (ProcessLookupError, FileNotFoundError):
        return False
    return stat[stat.rindex(")") + 2] != "Z"


def child_pid(tmp_path, replica) -> int | None:
    path = tmp_path / "agent" / "replicas" / replica.node.name / str(replica.pk) / "child.json"
    return json.loads(path.read_text())["pid"] if path.exists() else None


@pytest.mark.django_db(transaction=True)
def test_a_killed_agents_replicas_keep_running_and_a_new_agent_finishes_the_job(api, nodes, now, tmp_path):
    counting = "import time\nfor i in range(30):\n    print('step', i)\n    time.sleep(0.05)\n"
    job = submit(api, container_pool(command=["python3", "-c", counting]),
                 container_pool(command=["python3", "-c", counting.replace("step", "worker")]))
    first = agents_on(tmp_path)
    moment = step(first, now, lambda: CustomJob.objects.get(pk=job.pk).state == states.RUNNING)
    del first  # kill -9: no shutdown, nothing told to the replicas
    second = agents_on(tmp_path)
    step(second, later(moment, 1), lambda: CustomJob.objects.get(pk=job.pk).state in states.TERMINAL)
    job.refresh_from_db()
    assert job.state == states.SUCCEEDED, job.error
    texts = [entry["text"] for entry in api("uma").get(f"{BASE}/{job.job_id}/logs?pageSize=1000").json()["entries"]]
    assert sorted(t for t in texts if t.startswith("step")) == sorted(f"step {i}" for i in range(30))


@pytest.mark.django_db(transaction=True)
def test_a_restarted_agent_kills_the_replica_of_a_lost_node_before_anything_new_runs_there(api, nodes, now, tmp_path):
    a100 = list(Node.objects.filter(pool__name="a100"))
    old = submit(api, container_pool(machine_type="a2-highgpu-1g", command=["sleep", "300"]))
    first = agents_on(tmp_path, a100)
    moment = step(first, now, lambda: CustomJob.objects.get(pk=old.pk).state == states.RUNNING
                  and child_pid(tmp_path, old.replicas.select_related("node").get()))
    old_replica = old.replicas.select_related("node").get()
    old_pid = child_pid(tmp_path, old_replica)
    del first
    # The agent is silent: its node goes DOWN, the job's replica is lost and the job fails.
    nodes_sweep_heartbeats(now=later(moment, 600))
    old.refresh_from_db()
    assert old.state == states.FAILED and alive(old_pid)
    # FLEX_START: it waits for both nodes however long the (simulated) clock says the node was lost.
    new = submit(api, container_pool(machine_type="a2-highgpu-1g", command=["sleep", "1"]),
                 container_pool(machine_type="a2-highgpu-1g", command=["sleep", "1"]),
                 scheduling={"strategy": "FLEX_START", "maxWaitDuration": "0s"})
    second = agents_on(tmp_path, a100)
    moment = later(moment, 601)
    for _ in range(400):
        moment = later(moment, 0.25)
        second.tick(now=moment)
        scheduler_pass(now=moment)
        for replica in new.replicas.select_related("node"):
            pid = child_pid(tmp_path, replica)
            assert not (pid and alive(pid) and alive(old_pid)), "two jobs' processes ran on one node"
        new.refresh_from_db()
        if new.state in states.TERMINAL:
            break
        time.sleep(0.02)
    assert new.state == states.SUCCEEDED and not alive(old_pid), (new.error, list(new.events.values_list("message", flat=True)))
    assert Node.objects.get(pk=old_replica.node_id).state == NodeState.UP


@pytest.mark.django_db(transaction=True)
def test_one_replicas_bad_output_directory_fails_that_job_alone(api, nodes, now, tmp_path):
    bad = submit(api, container_pool(command=["true"]), baseOutputDirectory={"outputUriPrefix": "file:///etc/"})
    good = submit(api, container_pool(command=["python3", "-c", "print('fine')"]))
    group = agents_on(tmp_path)
    step(group, now, lambda: all(j.state in states.TERMINAL for j in CustomJob.objects.filter(pk__in=[bad.pk, good.pk])))
    bad.refresh_from_db(), good.refresh_from_db()
    assert good.state == states.SUCCEEDED
    assert bad.state == states.FAILED
    logs = [entry["text"] for entry in api("uma").get(f"{BASE}/{bad.job_id}/logs").json()["entries"]]
    assert any("outside the directories this node writes outputs to" in text for text in logs)
    assert not Path("/etc/model").exists()


@pytest.mark.django_db(transaction=True)
def test_after_an_exit_report_the_agent_takes_the_assignments_it_is_answered_instead_of_fetching_them(
        api, nodes, now, tmp_path):
    group = agents_on(tmp_path)
    calls = []
    for agent in group.agents:
        def recording(method, path, body=None, *, etag="", agent=agent, send=agent.api.call):
            calls.append((agent.name, method, path, etag))
            return send(method, path, body, etag=etag)
        agent.api.call = recording
    job = submit(api, container_pool(command=["true"]))
    moment = step(group, now, lambda: CustomJob.objects.get(pk=job.pk).state in states.TERMINAL)
    group.tick(now=later(moment, 0.05))
    replica = job.replicas.get()
    assert CustomJob.objects.get(pk=job.pk).state == states.SUCCEEDED
    served = [call for call in calls if call[0] == replica.node.name]
    exit_at = served.index((replica.node.name, "POST", f"/agent/v1/replicas/{replica.pk}/exited", ""))
    fetches_after = [etag for _, method, path, etag in served[exit_at + 1:] if path == "/agent/v1/assignments"]
    assert fetches_after and all(fetches_after), "a full fetch of the assignments followed the exit report"
    agent = next(agent for agent in group.agents if agent.name == replica.node.name)
    assert agent.assignments["replicas"] == [] and not agent.handles


@pytest.mark.django_db(transaction=True)
def test_a_replicas_start_and_exit_reports_stand_for_the_heartbeats_those_changes_would_send(api, nodes, now, tmp_path):
    group = agents_on(tmp_path)
    calls = []
    for agent in group.agents:
        def recording(method, path, body=None, *, etag="", agent=agent, send=agent.api.call):
            calls.append((agent.name, path))
            return send(method, path, body, etag=etag)
        agent.api.call = recording
    group.tick(now=now)  # every agent's first heartbeat
    job = submit(api, container_pool(command=["python3", "-c", "import time; time.sleep(0.3)"]))
    moment = step(group, now, lambda: CustomJob.objects.get(pk=job.pk).state in states.TERMINAL)
    group.tick(now=later(moment, 0.05))
    replica = job.replicas.get()
    assert CustomJob.objects.get(pk=job.pk).state == states.SUCCEEDED
    served = [path for name, path in calls if name == replica.node.name]
    started = served.index(f"/agent/v1/replicas/{replica.pk}/started")
    assert f"/agent/v1/replicas/{replica.pk}/exited" in served[started:]
    assert "/agent/v1/heartbeat" not in served[started:], "a heartbeat repeated what a report had said"
    assert Node.objects.get(pk=replica.node_id).state == NodeState.UP


@pytest.mark.django_db(transaction=True)
def test_a_replica_that_ends_after_its_round_supervised_it_is_told_by_its_exit_report_not_a_heartbeat(
        api, nodes, now, tmp_path):
    group = agents_on(tmp_path)
    group.tick(now=now)  # every agent's first heartbeat
    job = submit(api, container_pool(command=["python3", "-c", "import time; time.sleep(0.2)"]))
    scheduler_pass(now=later(now, 0.05))
    replica = job.replicas.select_related("node").get()
    agent = next(agent for agent in group.agents if agent.name == replica.node.name)
    calls, supervise, send = [], agent._supervise, agent.api.call

    def supervise_then_let_it_end(replica_id, doc, moment):
        supervise(replica_id, doc, moment)
        deadline = time.monotonic() + 30
        while agent.handles[replica_id].run.exit_record() is None and time.monotonic() < deadline:
            time.sleep(0.01)

    def recording(method, path, body=None, *, etag=""):
        calls.append(path)
        return send(method, path, body, etag=etag)
    agent._supervise, agent.api.call = supervise_then_let_it_end, recording
    agent.tick(now=later(now, 0.1))  # starts it, sees it running, then it ends before the heartbeat
    assert f"/agent/v1/replicas/{replica.pk}/started" in calls and agent.handles[replica.pk].run.exit_record()
    assert "/agent/v1/heartbeat" not in calls, "a heartbeat said what the exit report is about to"
    agent._supervise = supervise
    agent.tick(now=later(now, 0.15))
    assert calls.count(f"/agent/v1/replicas/{replica.pk}/exited") == 1 and "/agent/v1/heartbeat" not in calls
    assert CustomJob.objects.get(pk=job.pk).state == states.SUCCEEDED
    assert Node.objects.get(pk=replica.node_id).state == NodeState.UP


def test_nvidia_smi_output_becomes_the_machines_gpus():
    gpus = parse_nvidia_smi((FIXTURES / "nvidia-smi-h100x2.csv").read_text())
    assert [(gpu["index"], gpu["name"], gpu["memoryMiB"]) for gpu in gpus] == [
        (0, "NVIDIA H100 80GB HBM3", 81559), (1, "NVIDIA H100 80GB HBM3", 81559)]
    assert gpus[0]["uuid"].startswith("GPU-")
    assert parse_nvidia_smi("NVIDIA-SMI has failed because it couldn't communicate with the driver.\n") == []


def test_the_machines_arch_os_and_boot_time_are_among_its_facts():
    """What scontrol show node prints as Arch=, OS= and BootTime= (uname's, /proc/stat's btime)."""
    import platform

    facts = machine_facts(control_plane_url="http://127.0.0.1:9", address="10.0.0.7", simulate=True,
                          runtime="subprocess", version="test")
    uname = platform.uname()
    assert (facts["arch"], facts["os"]) == (uname.machine, f"{uname.system} {uname.release} {uname.version}")
    assert isinstance(facts["bootTime"], int) and 0 < facts["bootTime"] <= time.time()


@pytest.mark.parametrize("name, accelerator", [
    ("NVIDIA H100 80GB HBM3", "NVIDIA_H100_80GB"), ("NVIDIA H200", "NVIDIA_H200_141GB"),
    ("NVIDIA A100-SXM4-40GB", "NVIDIA_TESLA_A100"), ("NVIDIA A100-SXM4-80GB", "NVIDIA_A100_80GB"),
    ("Tesla T4", "NVIDIA_TESLA_T4"), ("NVIDIA L4", "NVIDIA_L4"), ("NVIDIA B200", "NVIDIA_B200"),
    ("Tesla V100-SXM2-16GB", "NVIDIA_TESLA_V100"), ("NVIDIA GeForce RTX 4090", None)])
def test_gpu_names_map_to_the_catalogs_accelerator_types(name, accelerator):
    assert accelerator_type_of(name) == accelerator


def test_a_t4_machine_cannot_serve_an_h100_pool_but_a_simulated_one_can():
    t4 = {"gpus": parse_nvidia_smi((FIXTURES / "nvidia-smi-t4.csv").read_text())}
    problem = facts_problem(facts=t4, machine_type="a3-highgpu-8g", accelerator_type="NVIDIA_H100_80GB",
                            accelerator_count=8)
    assert "needs 8 x NVIDIA_H100_80GB" in problem and "Tesla T4" in problem
    assert facts_problem(facts={"simulated": True}, machine_type="a3-highgpu-8g",
                         accelerator_type="NVIDIA_H100_80GB", accelerator_count=8) is None


ATTACK = """
import os, sys
def attempt(what, action):
    try:
        action()
        print(what, "READ")
    except OSError as exc:
        print(what, "denied", type(exc).__name__)
attempt("database", lambda: open(sys.argv[1], "rb").read())
attempt("supervisor environ", lambda: open(f"/proc/{os.getppid()}/environ", "rb").read())
attempt("agent credentials", lambda: os.listdir(sys.argv[2]))
attempt("other project", lambda: os.listdir(sys.argv[3]))
print("uid", os.getuid(), "agent secret", os.environ.get("TRAINHUB_PROBE_SECRET", "absent"))
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="isolating replicas needs an agent running as root")
@pytest.mark.django_db(transaction=True)
def test_an_isolated_replica_cannot_read_the_control_plane_the_agent_or_another_project(
        api, nodes, now, tmp_path, monkeypatch):
    """The take-over of issue 17: read the database, the agent's environment and credentials, and
    another tenant's files. Every step is refused; tokens themselves are stored only as digests."""
    database = tmp_path / "trainhub.sqlite3"
    database.write_text("secret rows")
    database.chmod(0o600)
    monkeypatch.setenv("TRAINHUB_PROBE_SECRET", "agent-only")
    group = agents_on(tmp_path, isolate=True)
    other = tmp_path / "jobs" / "other-project"
    other.mkdir(parents=True)
    other.chmod(0o700)
    job = submit(api, container_pool(command=["python3", "-c", ATTACK],
                                     args=[str(database), str(tmp_path / "agent" / "nodes"), str(other)]))
    step(group, now, lambda: CustomJob.objects.get(pk=job.pk).state in states.TERMINAL)
    job.refresh_from_db()
    lines = [entry["text"] for entry in api("uma").get(f"{BASE}/{job.job_id}/logs").json()["entries"]]
    assert job.state == states.SUCCEEDED, (job.error, lines)
    for what in ("database", "supervisor environ", "agent credentials", "other project"):
        assert f"{what} denied PermissionError" in lines, lines
    assert f"uid {200000 + job.project_id} agent secret absent" in lines
