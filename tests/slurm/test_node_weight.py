"""A node's Weight (slurm.conf's ``NodeName=N Weight=W``), set by an admin over REST: the cluster's JSON
and slurm.conf show it, and jobs get the usable nodes of the lowest weight first (the placement against
real Slurm: test_real_slurm_weight)."""

from tests.slurm.conftest import CLUSTERS, run_pass, sbatch
from trainhub.slurm.conf import NODE_WEIGHT_MAX
from trainhub.slurm.models import ClusterAuditEntry, SlurmCluster, SlurmJob
from trainhub.slurm.slurmconf import cluster_slurm_conf

NODE = f"{CLUSTERS}/c1/nodes/a4-0"


def _weights(cluster_body: dict) -> dict[str, int]:
    return {node["name"]: node["weight"] for node in cluster_body["nodes"]}


def test_an_admin_weighs_a_node_and_jobs_go_to_the_lighter_ones_first(api, admin, accounts):
    assert set(_weights(api("alice").get(f"{CLUSTERS}/c1").json()).values()) == {1}
    assert api("uma").patch(NODE, {"weight": 50}, format="json").status_code == 403
    response = api("alice").patch(NODE, {"weight": "50"}, format="json")
    assert response.status_code == 200, response.content
    assert _weights(response.json())["a4-0"] == 50 and _weights(response.json())["a4-1"] == 1
    cluster = SlurmCluster.objects.get(pk=accounts.pk)
    lines = cluster_slurm_conf(cluster).splitlines()
    assert any(line.startswith("NodeName=a4-0 ") and line.endswith(" Weight=50 State=UNKNOWN") for line in lines)
    assert not any(" Weight=" in line for line in lines if not line.startswith("NodeName=a4-0 "))
    assert ClusterAuditEntry.objects.filter(subject="Weight of node a4-0", new_value=50).exists()
    # a4-0, first by name and idle as every node, is now the last a job gets
    job_id = sbatch(api, "uma", "-N1", "--gres=gpu:1", "--wrap", "true").json()["jobId"]
    run_pass(cluster)
    assert SlurmJob.objects.get(job_id=job_id).node_list == "a4-1"
    response = api("alice").patch(NODE, {"weight": None}, format="json")
    assert _weights(response.json())["a4-0"] == 1
    assert SlurmCluster.objects.get(pk=accounts.pk).node_weight == {}


def test_a_refused_weight_leaves_the_nodes_other_settings_as_they_were(api, admin, accounts):
    """One PATCH is all or nothing: a weight out of range refuses the RealMemory and features sent with it."""
    response = api("alice").patch(NODE, {"availableFeatures": "ib", "realMemory": 16000, "weight": -1}, format="json")
    assert response.status_code == 400, response.content
    cluster = SlurmCluster.objects.get(pk=accounts.pk)
    assert (cluster.node_real_memory, cluster.node_features, cluster.node_weight) == ({}, {}, {})
    assert not ClusterAuditEntry.objects.filter(subject__endswith="of node a4-0").exists()


def test_a_weight_is_a_uint32_below_infinite(api, admin, accounts):
    def field_of(body):
        response = api("alice").patch(NODE, body, format="json")
        assert response.status_code == 400, response.content
        return {v["field"]: v["description"] for v in response.json()["error"]["details"][0]["fieldViolations"]}

    assert "weight" in field_of({"weight": "heavy"})
    assert "weight" in field_of({"weight": -1})
    assert f"from 0 to {NODE_WEIGHT_MAX}" in field_of({"weight": NODE_WEIGHT_MAX + 1})["weight"]
    assert api("alice").patch(NODE, {"weight": NODE_WEIGHT_MAX}, format="json").status_code == 200


def test_admins_set_a_nodes_weight_on_the_cluster_page(browser, admin, accounts):
    page = "/slurm/projects/alpha/locations/us-central1/clusters/c1"
    assert browser("uma").post(f"{page}/nodes/a4-0/weight", {"weight": "50"}).status_code == 403
    browser("alice").post(f"{page}/nodes/a4-0/weight", {"weight": "50"})
    assert SlurmCluster.objects.get(pk=accounts.pk).node_weight == {"a4-0": 50}
    assert 'name="weight" type="number" min="0" value="50"' in browser("alice").get(f"{page}/").content.decode()
    response = browser("alice").post(f"{page}/nodes/a4-0/weight", {"weight": "-3"}, follow=True)
    assert "weight:" in response.content.decode()
    browser("alice").post(f"{page}/nodes/a4-0/weight", {"weight": ""})
    assert SlurmCluster.objects.get(pk=accounts.pk).node_weight == {}
