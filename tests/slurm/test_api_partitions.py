"""Partitions after creation: admins change a partition's options (limits, PriorityTier,
PreemptMode) and node pools by API and page, validated with 400s naming the field; the change
reaches scheduling."""

import datetime as dt

import pytest
from django.utils import timezone

from tests.slurm.conftest import CLUSTERS, run_pass, sbatch, seed_spec, slurm_spec
from trainhub.inventory.models import Executor
from trainhub.inventory.services import node_heartbeat, node_pool_ensure
from trainhub.slurm.models import ClusterAuditEntry, JobState, Partition, SlurmJob

URL = f"{CLUSTERS}/c1/partitions/a4"
PAGE = "/slurm/projects/alpha/locations/us-central1/clusters/c1/partitions/a4"


@pytest.fixture
def two_pools(admin, slurm_pools, now):
    """The seed's cluster with a second compute pool b4 (one B200x8 node) in its own partition b4,
    accounts ml (uma) as in the accounts fixture."""
    from trainhub.slurm.services.accounting import account_add, user_add
    from trainhub.slurm.services.clusters import cluster_create

    b4 = node_pool_ensure(name="b4", machine_type="a4-highgpu-8g", node_count=1, executor=Executor.SIMULATED)
    node_heartbeat(node_ids=[node.pk for node in b4.nodes.all()], now=now)
    body = seed_spec()
    slurm_spec(body)["partitions"].append({"id": "b4", "node_pool_ids": ["b4"]})
    cluster = cluster_create(project=admin.memberships.get().project, location="us-central1", cluster_id="c1",
                             body=body, user=admin, now=now)
    account_add(cluster=cluster, name="ml", actor="test", now=now)
    user_add(cluster=cluster, name="uma", accounts=["ml"], actor="test", now=now)
    return cluster


def patch(api, body, user="alice"):
    return api(user).patch(URL, body, format="json")


def violations(response):
    assert response.status_code == 400, response.content
    return {v["field"]: v["description"] for v in response.json()["error"]["details"][0]["fieldViolations"]}


def test_an_admin_changes_limits_tier_and_preempt_mode_and_members_read_them(api, two_pools):
    response = patch(api, {"config": {"PriorityTier": "3", "MaxTime": "01:00:00", "PreemptMode": "CANCEL"}})
    assert response.status_code == 200, response.content
    assert response.json() == {"id": "a4", "nodePoolIds": ["a4"], "default": True,
                               "config": {"PriorityTier": "3", "MaxTime": "01:00:00", "PreemptMode": "CANCEL"}}
    assert api("vic").get(URL).json()["config"]["PriorityTier"] == "3"
    assert ClusterAuditEntry.objects.filter(subject="partition a4", actor="alice").exists()


def test_a_new_max_time_keeps_longer_jobs_pending_with_slurms_reason(api, two_pools):
    patch(api, {"config": {"MaxTime": "30"}})
    job_id = sbatch(api, "uma", "-p", "a4", "-t", "60", "--wrap", "x").json()["jobId"]
    run_pass(two_pools)
    job = SlurmJob.objects.get(job_id=job_id)
    assert (job.state, job.reason) == (JobState.PENDING, "PartitionTimeLimit")


def test_moving_a_pool_into_a_partition_gives_its_jobs_those_nodes(api, two_pools):
    job_id = sbatch(api, "uma", "-p", "a4", "-N", "3", "--gres=gpu:8", "--wrap", "x").json()["jobId"]
    run_pass(two_pools)
    job = SlurmJob.objects.get(job_id=job_id)
    assert (job.state, job.reason) == (JobState.PENDING, "PartitionNodeLimit")  # 3 nodes, a4 has 2
    response = patch(api, {"nodePoolIds": ["a4", "b4"]})
    assert response.status_code == 200 and response.json()["nodePoolIds"] == ["a4", "b4"]
    run_pass(two_pools, timezone.now() + dt.timedelta(seconds=5))  # the main scheduler's next run
    job.refresh_from_db()
    assert job.state == JobState.RUNNING and job.node_list == "a4-[0-1],b4-0"


def test_bad_options_and_pools_are_refused_with_the_field(api, two_pools):
    assert "config.PriorityTier" in violations(patch(api, {"config": {"PriorityTier": "high"}}))
    assert "config.Bogus" in violations(patch(api, {"config": {"Bogus": "1"}}))
    found = violations(patch(api, {"nodePoolIds": ["a4", "nope", "login", "a4"]}))
    assert set(found) == {"nodePoolIds[1]", "nodePoolIds[2]", "nodePoolIds[3]"}
    assert "is not a compute node pool of cluster c1 (a4, b4)" in found["nodePoolIds[1]"]
    assert "listed twice" in found["nodePoolIds[3]"]
    assert "nodePoolIds" in violations(patch(api, {"nodePoolIds": []}))
    assert "name" in violations(patch(api, {"name": "x"}))
    partition = Partition.objects.get(cluster=two_pools, name="a4")
    assert partition.config == {} and [pool.name for pool in partition.node_pools.all()] == ["a4"]


def test_only_admins_change_a_partition_and_strangers_do_not_see_it(api, two_pools):
    assert patch(api, {"config": {"PriorityTier": "2"}}, user="uma").status_code == 403
    assert api("mallory").get(URL).status_code == 404
    assert api("vic").get(f"{CLUSTERS}/c1/partitions/zz").status_code == 404


def test_the_admin_page_edits_node_pools_and_shows_what_is_wrong(browser, two_pools):
    response = browser("alice").post(PAGE, {"text": "PriorityTier=2", "node_pools": "a4, nope"})
    assert response.status_code == 200
    assert "&#x27;nope&#x27; is not a compute node pool of cluster c1" in response.content.decode()
    response = browser("alice").post(PAGE, {"text": "PriorityTier=2", "node_pools": "a4, b4"})
    assert response.status_code == 302
    partition = Partition.objects.get(cluster=two_pools, name="a4")
    assert partition.config == {"PriorityTier": "2"}
    assert sorted(pool.name for pool in partition.node_pools.all()) == ["a4", "b4"]
