"""A node's RealMemory (slurm.conf's ``NodeName=N RealMemory=MB``), set by an admin over REST or on the
cluster page: slurm.conf, sinfo's MEMORY, a pending job's TRES mem= and --mem placement follow it."""

import pytest

from tests.slurm.conftest import CLUSTERS, run_pass, sbatch
from trainhub.slurm import reports
from trainhub.slurm.models import ClusterAuditEntry, SlurmCluster, SlurmJob
from trainhub.slurm.slurmconf import cluster_slurm_conf

NODE = f"{CLUSTERS}/c1/nodes/a4-1"
PAGE = "/slurm/projects/alpha/locations/us-central1/clusters/c1"


def _memory(cluster_body: dict, name: str) -> int:
    return next(node["realMemory"] for node in cluster_body["nodes"] if node["name"] == name)


def test_an_admin_sets_a_nodes_real_memory_and_slurm_conf_and_sinfo_show_it(api, admin, accounts):
    machine = _memory(api("alice").get(f"{CLUSTERS}/c1").json(), "a4-1")
    assert api("uma").patch(NODE, {"realMemory": 16000}, format="json").status_code == 403
    response = api("alice").patch(NODE, {"realMemory": "16000"}, format="json")
    assert response.status_code == 200, response.content
    assert (_memory(response.json(), "a4-1"), _memory(response.json(), "a4-0")) == (16000, machine)
    cluster = SlurmCluster.objects.get(pk=accounts.pk)
    text = cluster_slurm_conf(cluster)
    assert "NodeName=a4-1 CPUs=" in text and " RealMemory=16000 " in text
    assert f"NodeName=a4-0 CPUs=224 RealMemory={machine} " in text
    rows = {row["node"]: row["memoryMb"] for row in reports.sinfo(cluster, now=cluster.update_time,
                                                                  node_oriented=True).rows()}
    assert (rows["a4-0"], rows["a4-1"]) == (machine, 16000)
    assert ClusterAuditEntry.objects.filter(subject="RealMemory of node a4-1", new_value=16000).exists()
    response = api("alice").patch(NODE, {"realMemory": None}, format="json")
    assert _memory(response.json(), "a4-1") == machine
    assert SlurmCluster.objects.get(pk=accounts.pk).node_real_memory == {}


def test_real_memory_is_a_number_of_mb_the_machine_has(api, admin, accounts):
    machine = _memory(api("alice").get(f"{CLUSTERS}/c1").json(), "a4-1")

    def field_of(body):
        response = api("alice").patch(NODE, body, format="json")
        assert response.status_code == 400, response.content
        return {v["field"]: v["description"] for v in response.json()["error"]["details"][0]["fieldViolations"]}

    assert "realMemory" in field_of({"realMemory": "lots"})
    assert "realMemory" in field_of({"realMemory": 0})
    assert f"from 1 to {machine}" in field_of({"realMemory": machine + 1})["realMemory"]
    assert "availableFeatures" in field_of({})
    # features and memory together
    response = api("alice").patch(NODE, {"availableFeatures": "a100", "realMemory": machine - 1}, format="json")
    node = next(n for n in response.json()["nodes"] if n["name"] == "a4-1")
    assert (node["availableFeatures"], node["realMemory"]) == (["a100"], machine - 1)


@pytest.fixture
def small_node(api, admin, accounts):
    """a4-1 with RealMemory=16000, memory a consumable resource."""
    SlurmCluster.objects.filter(pk=accounts.pk).update(
        config={**accounts.config, "SelectTypeParameters": "CR_Core_Memory"})
    api("alice").patch(NODE, {"realMemory": 16000}, format="json")
    return SlurmCluster.objects.get(pk=accounts.pk)


def test_mem_places_jobs_by_real_memory(api, small_node):
    big = sbatch(api, "uma", "--mem=20G", "--gres=gpu:1", "--wrap", "true").json()["jobId"]
    small = [sbatch(api, "uma", "--mem=10G", "-w", "a4-1", "--gres=gpu:1", "--wrap", "true").json()["jobId"]
             for _ in range(2)]
    run_pass(small_node)
    # a4-1's 16000 MB take neither the 20G job nor two of 10G
    assert SlurmJob.objects.get(job_id=big).node_list == "a4-0"
    assert [SlurmJob.objects.get(job_id=job_id).state for job_id in small] == ["RUNNING", "PENDING"]
    assert sbatch(api, "uma", "--mem=16001", "-w", "a4-1", "--wrap", "true").json()["error"]["message"] == (
        "sbatch: error: Batch job submission failed: Requested node configuration is not available")


def test_a_pending_job_without_mem_asks_the_nodes_real_memory(api, small_node):
    api("alice").patch(f"{CLUSTERS}/c1/nodes/a4-0", {"realMemory": 12000}, format="json")
    job_id = sbatch(api, "uma", "-H", "--wrap", "true").json()["jobId"]
    small_node.refresh_from_db()
    text = reports.scontrol_jobs(small_node, now=small_node.update_time, job=str(job_id)).text
    assert "   TRES=cpu=1,mem=16000M,node=1,billing=1\n" in text


def test_admins_set_real_memory_on_the_cluster_page(browser, admin, accounts):
    assert browser("uma").post(f"{PAGE}/nodes/a4-0/memory", {"real_memory": "16000"}).status_code == 403
    browser("alice").post(f"{PAGE}/nodes/a4-0/memory", {"real_memory": "16000"})
    assert SlurmCluster.objects.get(pk=accounts.pk).node_real_memory == {"a4-0": 16000}
    assert 'value="16000"' in browser("alice").get(f"{PAGE}/").content.decode()
    response = browser("alice").post(f"{PAGE}/nodes/a4-0/memory", {"real_memory": "99999999"}, follow=True)
    assert "RealMemory (MB)" in response.content.decode() and "from 1 to" in response.content.decode()
    browser("alice").post(f"{PAGE}/nodes/a4-0/memory", {"real_memory": ""})
    assert SlurmCluster.objects.get(pk=accounts.pk).node_real_memory == {}
