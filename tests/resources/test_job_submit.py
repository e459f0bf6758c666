"""Submitting a CustomJob with jobSpec.persistentResourceId: the seed's shape, every matching
rule through the REST API, the resource's state, and no quota or separate charge."""

import pytest

from tests.conftest import container_pool, job_body
from tests.resources.conftest import create, submit, t4_job, t4_pool
from trainhub.jobs.costs import job_cost
from trainhub.jobs.models import CustomJob
from trainhub.resources import services
from trainhub.resources.models import PersistentResource
from trainhub.scheduling.services import quota_set

pytestmark = pytest.mark.django_db

BASE = "/v1/projects/alpha/locations/us-central1/customJobs"

#: The seed's Python sample (create_custom_job_on_persistent_resource_sample) as the SDK sends it:
#: snake_case, replica_count 1, an n1-standard-4 worker pool, persistent_resource_id. The sample's
#: NVIDIA_TESLA_K80 is retired on Vertex (and not in trainhub's catalog); the pool here uses a T4.
SEED_SAMPLE = {
    "display_name": "seed-sample",
    "job_spec": {
        "worker_pool_specs": [{
            "machine_spec": {"machine_type": "n1-standard-4", "accelerator_type": "NVIDIA_TESLA_T4",
                             "accelerator_count": 1},
            "replica_count": "1",
            "container_spec": {"image_uri": "python:3.11", "command": ["true"], "args": []},
        }],
        "persistent_resource_id": "pr",
    },
}


def test_the_seed_samples_job_is_accepted_on_a_running_resource(api, pr):
    response = api("uma").post(BASE, SEED_SAMPLE, format="json")
    assert response.status_code == 200, response.content
    assert response.json()["jobSpec"]["persistentResourceId"] == "pr"


def test_a_job_may_be_queued_on_a_resource_that_is_still_provisioning(cast, nodes, now):
    create(cast, now, t4_pool(1))
    assert submit(cast, now, t4_job()).state == "JOB_STATE_QUEUED"


@pytest.mark.parametrize("machine_spec, field", [
    ({"machineType": "n1-standard-8", "acceleratorType": "NVIDIA_TESLA_T4", "acceleratorCount": 1},
     "machineSpec.machineType"),
    ({"machineType": "n1-standard-4", "acceleratorType": "NVIDIA_TESLA_V100", "acceleratorCount": 1},
     "machineSpec.acceleratorType"),
    ({"machineType": "n1-standard-4", "acceleratorType": "NVIDIA_TESLA_T4", "acceleratorCount": 2},
     "machineSpec.acceleratorCount"),
])
def test_a_machine_spec_mismatch_is_a_400_naming_the_pool_and_field(api, pr, machine_spec, field):
    body = t4_job()
    body["jobSpec"]["workerPoolSpecs"][0]["machineSpec"] = machine_spec
    error = api("uma").post(BASE, body, format="json").json()["error"]
    assert error["code"] == 400 and error["status"] == "INVALID_ARGUMENT"
    (violation,) = error["details"][0]["fieldViolations"]
    assert violation["field"] == f"jobSpec.workerPoolSpecs[0].{field}"


@pytest.mark.parametrize("disk, field", [({"bootDiskType": "pd-standard"}, "diskSpec.bootDiskType"),
                                         ({"bootDiskSizeGb": 200}, "diskSpec.bootDiskSizeGb")])
def test_a_disk_spec_mismatch_is_a_400_naming_the_field(api, pr, disk, field):
    body = t4_job()
    body["jobSpec"]["workerPoolSpecs"][0]["diskSpec"] = disk
    error = api("uma").post(BASE, body, format="json").json()["error"]
    assert error["details"][0]["fieldViolations"][0]["field"] == f"jobSpec.workerPoolSpecs[0].{field}"


def test_more_replicas_than_the_pool_can_ever_hold_is_a_400(api, pr):
    error = api("uma").post(BASE, t4_job(replicas=2, pools=2), format="json").json()["error"]
    assert error["code"] == 400
    assert "together ask for 3 replica(s)" in error["message"] and "(replicaCount 2)" in error["message"]


def test_an_unknown_or_other_projects_resource_is_404(api, cast, nodes, now):
    response = api("uma").post(BASE, t4_job(resource_id="nowhere"), format="json")
    assert response.status_code == 404
    assert "persistentResources/nowhere not found" in response.json()["error"]["message"]
    create(cast, now, t4_pool(1), resource_id="theirs", project="beta")
    assert api("uma").post(BASE, t4_job(resource_id="theirs"), format="json").status_code == 404


def test_a_resource_in_another_location_is_not_found(api, pr):
    response = api("uma").post("/v1/projects/alpha/locations/europe-west4/customJobs", t4_job(), format="json")
    assert response.status_code == 404


@pytest.mark.parametrize("state", ["STOPPING", "ERROR"])
def test_a_resource_being_deleted_or_in_error_refuses_jobs(api, pr, state):
    PersistentResource.objects.filter(pk=pr.pk).update(state=state, error={"code": 14, "message": "node gone"})
    error = api("uma").post(BASE, t4_job(), format="json").json()["error"]
    assert (error["code"], error["status"]) == (400, "FAILED_PRECONDITION")
    assert f"is {state} (node gone)" in error["message"]


def test_a_deleted_resource_refuses_jobs(api, pr, now):
    services.persistent_resource_delete(resource=pr, now=now)
    services.persistent_resources_advance(now=now)
    assert api("uma").post(BASE, t4_job(), format="json").status_code == 404


def test_a_viewer_cannot_submit_to_a_resource(api, pr):
    assert api("vic").post(BASE, t4_job(), format="json").status_code == 403


def test_jobs_on_a_resource_use_no_quota_and_cost_nothing_themselves(cast, pr, now):
    quota_set(project=cast["alpha"], location="us-central1", metric="custom_model_training_nvidia_t4_gpus",
              limit=0, actor="test")
    job = submit(cast, now, t4_job())
    assert job.quota_demand == {}
    assert job_cost(job, now).estimated.total == 0


def test_the_same_job_without_a_resource_still_needs_quota(cast, pr, now):
    from trainhub.common.errors import ApiError

    quota_set(project=cast["alpha"], location="us-central1", metric="custom_model_training_nvidia_t4_gpus",
              limit=0, actor="test")
    with pytest.raises(ApiError) as error:
        submit(cast, now, job_body(container_pool(accelerator="NVIDIA_TESLA_T4", count=1)))
    assert error.value.http_status == 429
    assert not CustomJob.objects.exists()
