"""A location must exist, and a job only ever runs on its own location's nodes (so it cannot
borrow another location's capacity and skip that location's quota)."""

import pytest

from tests.conftest import container_pool, job_body
from trainhub.jobs import states
from trainhub.jobs.models import CustomJob
from trainhub.jobs.spec import ReplicaShape
from trainhub.scheduling.models import Quota
from trainhub.scheduling.placement import FreeNode, GangRequest, Victim, plan_pass
from trainhub.scheduling.services import scheduler_pass

A100 = ReplicaShape("a2-highgpu-1g", "NVIDIA_TESLA_A100", 1)


def jobs_url(location):
    return f"/v1/projects/alpha/locations/{location}/customJobs"


def a100_job(workers=0, strategy="SPOT"):
    pool = container_pool("a2-highgpu-1g", accelerator="NVIDIA_TESLA_A100", count=1)
    pools = [pool] + ([{**pool, "replicaCount": workers}] if workers else [])
    return job_body(*pools, scheduling={"strategy": strategy})


@pytest.mark.parametrize("path", ["customJobs", "persistentResources?persistentResourceId=r",
                                  "hyperparameterTuningJobs"])
def test_an_unknown_location_is_refused_with_a_400_naming_it(api, nodes, path):
    response = api("alice").post(f"/v1/projects/alpha/locations/mars-north1/{path}", a100_job(), format="json")
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert error["status"] == "INVALID_ARGUMENT" and "Location mars-north1 is not supported" in error["message"]
    assert error["details"][0]["fieldViolations"][0]["field"] == "location"
    assert not CustomJob.objects.exists()


def test_a_location_with_a_node_pool_or_in_the_catalog_is_known(api, nodes, settings):
    settings.TRAINHUB_LOCATIONS = ["asia-east1"]
    assert api("uma").post(jobs_url("asia-east1"), a100_job(), format="json").status_code == 200
    assert api("uma").post(jobs_url("us-central1"), a100_job(), format="json").status_code == 200  # its pools
    assert api("uma").post(jobs_url("europe-west4"), a100_job(), format="json").status_code == 400


def test_a_job_never_runs_on_another_locations_nodes_nor_skips_its_quota(api, cast, nodes, now):
    Quota.objects.create(project=cast["alpha"], location="us-central1",
                         metric="custom_model_training_preemptible_nvidia_a100_gpus", limit=1)
    elsewhere = api("uma").post(jobs_url("europe-west4"), a100_job(workers=1), format="json")
    assert elsewhere.status_code == 200, elsewhere.content
    scheduler_pass(now=now)
    job = CustomJob.objects.get()
    assert job.state == states.QUEUED and not job.replicas.exists()


def test_placement_gives_a_gang_only_nodes_of_its_location():
    nodes = [FreeNode(1, 1, "a2-highgpu-1g", "NVIDIA_TESLA_A100", "us-central1"),
             FreeNode(1, 2, "a2-highgpu-1g", "NVIDIA_TESLA_A100", "europe-west4")]
    plan = plan_pass([GangRequest.from_pools("eu", [(0, 2, A100)], location="europe-west4"),
                      GangRequest.from_pools("us", [(0, 1, A100)], location="us-central1"),
                      GangRequest.from_pools("eu-small", [(0, 1, A100)], location="europe-west4"),
                      GangRequest.from_pools("mars", [(0, 1, A100)], location="mars-north1")], nodes)
    assert plan.placements == {"us": {(0, 0): 1}, "eu-small": {(0, 0): 2}}
    assert plan.shortfalls["eu"][0].free == 1 and plan.shortfalls["mars"][0].free == 0


def test_preemption_only_takes_spot_jobs_of_the_same_location():
    victims = [Victim("spot-us", (FreeNode(1, 1, "a2-highgpu-1g", "NVIDIA_TESLA_A100", "us-central1"),))]
    request = GangRequest.from_pools("eu", [(0, 1, A100)], can_preempt=True, location="europe-west4")
    plan = plan_pass([request], [], victims=victims)
    assert plan.preemptions == {} and "eu" not in plan.placements
