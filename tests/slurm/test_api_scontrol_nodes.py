"""GET .../slurmClusters/C/scontrolNodes: scontrol show node[s] [NAMES] over REST (the seed's cluster
c1: a4-0 and a4-1, 224 CPUs and 8 B200s each, memory a consumable resource)."""

import datetime as dt

import pytest

from tests.slurm.conftest import CLUSTERS, make_job, run_pass, sbatch
from trainhub.inventory.models import Node, NodeState
from trainhub.slurm import reports
from trainhub.slurm.models import JobNode, JobState, NodePhase, SlurmJob
from trainhub.slurm.services.clusters import node_state_set

URL = f"{CLUSTERS}/c1/scontrolNodes"


def paragraphs(text: str) -> dict[str, str]:
    """Each node's paragraph by its name."""
    return {block.split()[0].removeprefix("NodeName="): block for block in text.split("\n\n") if block}


def test_it_shows_every_node_as_text_and_rows(api, accounts, now):
    answer = api("vic").get(URL)
    assert answer.status_code == 200
    body = answer.json()
    assert list(paragraphs(body["text"])) == ["a4-0", "a4-1"]
    assert body["text"] == reports.scontrol_nodes(accounts, now=now).text
    assert [(row["name"], row["state"], row["cpus"], row["gpus"]) for row in body["rows"]] == [
        ("a4-0", "IDLE", 224, 8), ("a4-1", "IDLE", 224, 8)]
    assert "   Gres=gpu:b200:8\n" in body["text"] and "   CfgTRES=cpu=224," in body["text"]


def test_the_cli_gets_the_text_alone_and_o_puts_a_node_on_one_line(api, accounts):
    answer = api("vic").get(URL, {"node": "a4-1", "oneliner": "true"}, HTTP_ACCEPT="text/plain")
    assert answer["content-type"].startswith("text/plain")
    line = answer.content.decode()
    assert line.startswith("NodeName=a4-1 Arch=x86_64 CoresPerSocket=1  CPUAlloc=0 ") and line.count("\n") == 1


def test_a_running_jobs_cpus_memory_and_gpus_are_its_nodes_allocation(api, accounts):
    """CR_Core_Memory: AllocMem and AllocTRES's mem count the job's --mem (CR_CPU's would be 0)."""
    assert sbatch(api, "uma", "-N", "1", "-n", "4", "--mem=2000", "--gres=gpu:2", "--wrap", "x").status_code == 200
    run_pass(accounts)
    node = SlurmJob.objects.get().node_list
    text = api("vic").get(URL, {"node": node}).json()["text"]
    assert "   CPUAlloc=4 CPUEfctv=224 CPUTot=224 CPULoad=N/A\n" in text
    assert " AllocMem=2000 FreeMem=N/A " in text and "   State=MIXED " in text
    assert "   AllocTRES=cpu=4,mem=2000M,gres/gpu=2\n" in text


def test_a_real_nodes_machine_fields_are_its_agents_facts(api, accounts, now):
    """Arch, OS, BootTime from the agent's facts, SlurmdStartTime its join, NodeAddr its address;
    a simulated node's the stated defaults (x86_64, Linux, the cluster's creation)."""
    joined = dt.datetime(2026, 12, 1, 8, 0, 0, tzinfo=dt.UTC)
    Node.objects.filter(name="a4-0").update(
        address="10.0.0.7", hostname="gpu-7", joined_at=joined,
        facts={"arch": "aarch64", "os": "Linux 6.8.0-45-generic #45-Ubuntu SMP", "bootTime": 1764576000})
    nodes = paragraphs(api("vic").get(URL).json()["text"])
    assert nodes["a4-0"].startswith("NodeName=a4-0 Arch=aarch64 CoresPerSocket=1 \n")
    assert "   NodeAddr=10.0.0.7 NodeHostName=gpu-7 Version=22.05.8\n   OS=Linux 6.8.0-45-generic #45-Ubuntu SMP \n" in (
        nodes["a4-0"])
    assert "   BootTime=2025-12-01T08:00:00 SlurmdStartTime=2026-12-01T08:00:00\n" in nodes["a4-0"]
    assert "   LastBusyTime=2026-12-01T08:00:00\n" in nodes["a4-0"]
    created = accounts.create_time.strftime("%Y-%m-%dT%H:%M:%S")
    assert f"   BootTime={created} SlurmdStartTime={created}\n" in nodes["a4-1"]
    assert nodes["a4-1"].startswith("NodeName=a4-1 Arch=x86_64 ") and "\n   OS=Linux \n" in nodes["a4-1"]


def test_last_busy_time_is_when_its_latest_job_ended(api, accounts, now):
    """slurmctld's make_node_idle sets it when a node's last job ends; before any, slurmd's start."""
    ended = now - dt.timedelta(minutes=5)
    for minutes in (20, 5):
        job = make_job(accounts, state=JobState.COMPLETED, end_time=now - dt.timedelta(minutes=minutes))
        JobNode.objects.create(job=job, run_index=0, node=Node.objects.get(name="a4-1"), phase=NodePhase.DONE)
    nodes = paragraphs(api("vic").get(URL).json()["text"])
    assert f"   LastBusyTime={ended:%Y-%m-%dT%H:%M:%S}\n" in nodes["a4-1"]
    assert f"   LastBusyTime={accounts.create_time:%Y-%m-%dT%H:%M:%S}\n" in nodes["a4-0"]


def test_a_drained_node_shows_its_reason_who_set_it_and_when(api, accounts, now):
    node_state_set(cluster=accounts, node=Node.objects.get(name="a4-1"), state=NodeState.DRAIN, reason="bad fan",
                   actor="alice", now=now)
    block = paragraphs(api("vic").get(URL, {"node": "a4-1"}).json()["text"])["a4-1"]
    assert "   State=IDLE+DRAIN " in block
    assert block.endswith(f"\n   Reason=bad fan [alice@{now:%Y-%m-%dT%H:%M:%S}]")


def test_a_down_node_is_down_with_its_reason(api, accounts):
    """trainhub sets a node DOWN whose agent reports replicas it no longer lists."""
    Node.objects.filter(name="a4-0").update(state=NodeState.DOWN, state_reason="broken")
    block = paragraphs(api("vic").get(URL, {"node": "a4-0"}).json()["text"])["a4-0"]
    # set outside scontrol update (no audit entry: no time), node_info.c prints the reason alone
    assert "   State=DOWN ThreadsPerCore=1 " in block and block.endswith("\n   Reason=broken")


def test_an_agent_that_stopped_answering_is_down_not_responding(api, accounts, now):
    Node.objects.filter(name="a4-0").update(last_heartbeat=now - dt.timedelta(hours=1))
    block = paragraphs(api("vic").get(URL, {"node": "a4-0"}).json()["text"])["a4-0"]
    assert "   State=DOWN+NOT_RESPONDING " in block and "\n   Reason=Not responding [slurm@" in block


def test_an_unknown_node_is_a_404_with_scontrols_line_and_what_it_printed(api, accounts):
    answer = api("vic").get(URL, {"node": "a4-1,gpu9"})
    assert answer.status_code == 404
    body = answer.json()
    assert (body["error"]["status"], body["error"]["message"]) == ("NOT_FOUND", "Node gpu9 not found")
    assert body["text"].startswith("NodeName=a4-1 ") and body["text"].endswith("\n\nNode gpu9 not found\n")
    plain = api("vic").get(URL, {"node": "gpu9"}, HTTP_ACCEPT="text/plain")
    assert plain.status_code == 404 and plain.json()["text"] == "Node gpu9 not found\n"


def test_a_list_scontrol_cannot_parse_is_a_400_with_its_message(api, accounts):
    for bad in ("gpu[2-3]x", "gpu[1-"):
        answer = api("vic").get(URL, {"node": bad})
        assert answer.status_code == 400
        assert answer.json()["error"]["message"] == f"unable to parse node list {bad}"


@pytest.mark.parametrize("user", ["vic", "uma", "alice"])
def test_every_member_who_may_show_jobs_may_show_nodes(api, accounts, user):
    assert api(user).get(URL).status_code == api(user).get(f"{CLUSTERS}/c1/scontrolJobs").status_code == 200


def test_it_rejects_a_stranger_and_an_anonymous_caller_as_scontrol_show_job_does(api, accounts, client):
    assert api("mallory").get(URL).status_code == api("mallory").get(f"{CLUSTERS}/c1/scontrolJobs").status_code == 404
    assert client.get(URL).status_code == client.get(f"{CLUSTERS}/c1/scontrolJobs").status_code == 401


def test_a_gpus_jobs_mem_per_gpu_is_allocated_by_the_gpus_each_node_has(api, accounts):
    """-N 2 --gpus=3 --mem-per-gpu=1000: 2 GPUs and 2000M on the first node, 1 and 1000M on the second
    (fixtures/22.05/gpus-mem, scontrol-d-N2-g3), as the scheduler holds them (snapshot.running_job)."""
    assert sbatch(api, "uma", "-N", "2", "--gpus=3", "--mem-per-gpu=1000", "--wrap", "x").status_code == 200
    run_pass(accounts)
    nodes = paragraphs(api("vic").get(URL).json()["text"])
    assert "   AllocTRES=cpu=1,mem=2000M,gres/gpu=2\n" in nodes["a4-0"]
    assert "   AllocTRES=cpu=1,mem=1000M,gres/gpu=1\n" in nodes["a4-1"]


def test_a_node_list_of_more_names_than_slurms_hostlist_takes_is_refused(api, accounts):
    """x[0-999999] would be a million ``Node ... not found`` lines (48 MB), twice."""
    from trainhub.slurm.reports import MAX_ASKED_NODES

    answer = api("vic").get(URL, {"node": f"x[1-{MAX_ASKED_NODES + 1}]"})
    assert answer.status_code == 400 and len(answer.content) < 10_000
    assert api("vic").get(URL, {"node": f"x[1-{MAX_ASKED_NODES}]"}).status_code == 404
