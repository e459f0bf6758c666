"""slurmClusters REST: the seed's spec is accepted, every field is validated, admins only."""

import pytest

from tests.slurm.conftest import CLUSTERS, seed_spec, slurm_spec
from trainhub.inventory.models import Node
from trainhub.slurm.models import ClusterAuditEntry, SlurmCluster


def create(api, body, user="alice", cluster_id="c1"):
    return api(user).post(f"{CLUSTERS}?slurmClusterId={cluster_id}", body, format="json")


def violations(response):
    details = response.json()["error"]["details"]
    return {v["field"]: v["description"] for v in details[0]["fieldViolations"]} if details else {}


def test_the_seeds_example_cluster_is_accepted(api, admin, slurm_pools):
    response = create(api, seed_spec())
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["name"] == "projects/alpha/locations/us-central1/slurmClusters/c1"
    spec = body["orchestratorSpec"]["slurmSpec"]
    assert spec["partitions"] == [{"id": "a4", "nodePoolIds": ["a4"], "default": True}]
    assert spec["defaultPartitionId"] == "a4"
    assert spec["loginNodePoolId"] == "login"
    assert spec["config"]["PreemptExemptTime"] == "00:10:00"
    assert len(spec["prologBashScripts"]) == 2 and len(spec["epilogBashScripts"]) == 1
    assert {node["name"] for node in body["nodes"]} == {"a4-0", "a4-1", "login-0"}


def test_a_cluster_dedicates_its_pools_nodes_to_itself(api, admin, slurm_pools):
    create(api, seed_spec())
    cluster = SlurmCluster.objects.get()
    assert set(Node.objects.filter(dedicated_to=cluster.owner_key).values_list("name", flat=True)) == {
        "a4-0", "a4-1", "login-0"}


def test_without_a_default_partition_the_first_one_is_the_default(api, admin, slurm_pools):
    from trainhub.inventory.services import node_pool_ensure

    node_pool_ensure(name="a4b", machine_type="a4-highgpu-8g", node_count=1)
    body = seed_spec()
    slurm_spec(body)["partitions"] = [{"id": "second", "nodePoolIds": ["a4b"]}, {"id": "a4", "node_pool_ids": ["a4"]}]
    assert create(api, body).json()["orchestratorSpec"]["slurmSpec"]["defaultPartitionId"] == "second"
    slurm_spec(body)["default_partition_id"] = "a4"
    assert create(api, body, cluster_id="c2").status_code == 400  # a4 is now used by c1


def test_every_bad_field_is_reported_with_its_path(api, admin, slurm_pools):
    body = seed_spec()
    spec = slurm_spec(body)
    spec["partitions"] = [{"id": "a4", "node_pool_ids": ["a4", "nope"]}, {"id": "a4", "node_pool_ids": ["login"]}]
    spec["config"]["PriorityWeightAge"] = "lots"
    spec["config"]["NotAKey"] = "1"
    spec["home_directory_storage"] = "/home"
    spec["default_partition_id"] = "b"
    response = create(api, body, cluster_id="Bad_Id")
    assert response.status_code == 400
    assert response.json()["error"]["status"] == "INVALID_ARGUMENT"
    found = violations(response)
    assert set(found) == {
        "slurmClusterId",
        "orchestratorSpec.slurmSpec.partitions[1].id",
        "orchestratorSpec.slurmSpec.config.PriorityWeightAge",
        "orchestratorSpec.slurmSpec.config.NotAKey",
        "orchestratorSpec.slurmSpec.homeDirectoryStorage",
        "orchestratorSpec.slurmSpec.defaultPartitionId",
    }
    assert "duplicate partition id" in found["orchestratorSpec.slurmSpec.partitions[1].id"]
    assert not SlurmCluster.objects.exists()


def test_unknown_and_used_pools_are_refused(api, admin, slurm_pools):
    body = seed_spec()
    slurm_spec(body)["partitions"][0]["node_pool_ids"] = ["a4", "nope"]
    found = violations(create(api, body))
    assert found == {"orchestratorSpec.slurmSpec.partitions[0].nodePoolIds[1]": "node pool 'nope' does not exist"}
    assert create(api, seed_spec()).status_code == 200
    found = violations(create(api, seed_spec(), cluster_id="c2"))
    assert found["orchestratorSpec.slurmSpec.partitions[0].nodePoolIds[0]"] == (
        "node pool 'a4' is already used by slurmClusters/%d" % SlurmCluster.objects.get().pk)
    assert "orchestratorSpec.slurmSpec.loginNodePoolId" in found


def test_a_login_pool_cannot_also_be_a_compute_pool(api, admin, slurm_pools):
    body = seed_spec()
    slurm_spec(body)["login_node_pool_id"] = "a4"
    assert "orchestratorSpec.slurmSpec.loginNodePoolId" in violations(create(api, body))


def test_unknown_fields_are_refused(api, admin, slurm_pools):
    body = seed_spec()
    body["nodePools"] = []
    slurm_spec(body)["partitions"][0]["max_time"] = "1:00:00"
    found = violations(create(api, body))
    assert set(found) == {"nodePools", "orchestratorSpec.slurmSpec.partitions[0].maxTime"}


def test_a_partition_takes_its_partition_options(api, admin, slurm_pools):
    body = seed_spec()
    slurm_spec(body)["partitions"][0]["config"] = {"PriorityTier": "2", "MaxTime": "1-00:00:00"}
    assert create(api, body).status_code == 200
    slurm_spec(body)["partitions"][0]["config"] = {"PriorityTier": "high"}
    assert "orchestratorSpec.slurmSpec.partitions[0].config.PriorityTier" in violations(create(api, body, cluster_id="c2"))


def test_the_same_id_twice_is_already_exists(api, admin, slurm_pools):
    assert create(api, seed_spec()).status_code == 200
    from trainhub.inventory.services import nodes_release

    nodes_release(owner=SlurmCluster.objects.get().owner_key)
    response = create(api, seed_spec())
    assert response.status_code == 409
    assert response.json()["error"]["status"] == "ALREADY_EXISTS"


@pytest.mark.parametrize("user", ["uma", "vic"])
def test_only_admins_create_clusters(api, admin, slurm_pools, user):
    response = create(api, seed_spec(), user=user)
    assert response.status_code == 403


def test_a_project_admin_who_is_not_a_platform_admin_cannot_create(api, cast, slurm_pools):
    response = create(api, seed_spec())
    assert response.status_code == 403
    assert "platform administrator" in response.json()["error"]["message"]


def test_members_get_and_list_and_strangers_do_not(api, admin, slurm_pools):
    create(api, seed_spec())
    assert api("vic").get(f"{CLUSTERS}/c1").status_code == 200
    assert [c["name"] for c in api("uma").get(CLUSTERS).json()["slurmClusters"]] == [
        "projects/alpha/locations/us-central1/slurmClusters/c1"]
    assert api("mallory").get(f"{CLUSTERS}/c1").status_code == 404


def test_admins_delete_a_cluster_and_its_nodes_return_to_the_shared_pool(api, admin, slurm_pools):
    create(api, seed_spec())
    assert api("uma").delete(f"{CLUSTERS}/c1").status_code == 403
    assert api("alice").delete(f"{CLUSTERS}/c1").status_code == 200
    assert not SlurmCluster.objects.exists()
    assert not Node.objects.exclude(dedicated_to="").exists()


def test_slurm_conf_is_rendered_for_download(api, admin, slurm_pools):
    create(api, seed_spec())
    content = api("vic").get(f"{CLUSTERS}/c1/slurmConf").json()["content"]
    assert "ClusterName=c1" in content
    assert "PriorityWeightFairshare=10000" in content
    assert "PreemptType=preempt/partition_prio" in content
    assert "NodeName=a4-[0-1] CPUs=224 RealMemory=4063232 Gres=gpu:b200:8" in content
    assert "PartitionName=a4 Nodes=a4-[0-1] Default=YES" in content


def test_admins_change_config_keys_and_the_change_is_audited(api, admin, slurm_pools):
    create(api, seed_spec())
    url = f"{CLUSTERS}/c1:updateConfig"
    assert api("uma").post(url, {"config": {"PriorityWeightAge": "2000"}}, format="json").status_code == 403
    response = api("alice").post(url, {"config": {"PriorityWeightAge": "2000", "PreemptExemptTime": None}},
                                 format="json")
    assert response.status_code == 200, response.content
    config = response.json()["orchestratorSpec"]["slurmSpec"]["config"]
    assert config["PriorityWeightAge"] == "2000" and "PreemptExemptTime" not in config
    entries = [(e.subject, e.old_value, e.new_value, e.actor) for e in ClusterAuditEntry.objects.all()]
    assert ("slurm.conf PriorityWeightAge", "1000", "2000", "alice") in entries
    assert ("slurm.conf PreemptExemptTime", "00:10:00", None, "alice") in entries


def test_a_bad_config_change_is_refused_with_its_key(api, admin, slurm_pools):
    create(api, seed_spec())
    response = api("alice").post(f"{CLUSTERS}/c1:updateConfig", {"config": {"PreemptMode": "OFF"}}, format="json")
    assert response.status_code == 400
    assert "config.PreemptMode" in violations(response)
    assert SlurmCluster.objects.get().config["PreemptMode"] == "REQUEUE"


def test_admins_replace_prolog_scripts(api, admin, slurm_pools):
    create(api, seed_spec())
    url = f"{CLUSTERS}/c1:updateScripts"
    assert api("uma").post(url, {"prologBashScripts": ["echo hi"]}, format="json").status_code == 403
    response = api("alice").post(url, {"prolog_bash_scripts": ["#!/bin/bash\necho one"]}, format="json")
    assert response.json()["orchestratorSpec"]["slurmSpec"]["prologBashScripts"] == ["#!/bin/bash\necho one"]
    assert ClusterAuditEntry.objects.filter(subject="prolog scripts").count() == 1
    assert api("alice").post(url, {"prologBashScripts": [""]}, format="json").status_code == 400


@pytest.mark.parametrize("scripts, field", [
    (["x" * (64 * 1024 + 1)], "prologBashScripts[0]"),
    (["echo hi"] * 17, "prologBashScripts"),
])
def test_prolog_scripts_are_capped_before_they_are_stored_or_audited(api, admin, slurm_pools, scripts, field):
    """The scripts are user-fed text kept on the cluster and in its audit trail: 16 scripts of
    64 KiB at most, refused naming the field, nothing stored or audited (issue 18)."""
    create(api, seed_spec())
    audited = ClusterAuditEntry.objects.count()
    response = api("alice").post(f"{CLUSTERS}/c1:updateScripts", {"prologBashScripts": scripts}, format="json")
    assert response.status_code == 400, response.content
    assert field in {v["field"] for v in response.json()["error"]["details"][0]["fieldViolations"]}
    assert ClusterAuditEntry.objects.count() == audited
