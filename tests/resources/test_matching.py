"""Matching a CustomJob's worker pools to a persistent resource's pools: every rule."""

import pytest

from trainhub.jobs.spec import parse_custom_job
from trainhub.resources.matching import ResourcePoolView, match_worker_pools
from tests.conftest import container_pool, job_body

NAME = "projects/alpha/locations/us-central1/persistentResources/pr"
DISK = {"bootDiskType": "pd-ssd", "bootDiskSizeGb": 100}
T4 = {"machineType": "n1-standard-4", "acceleratorType": "NVIDIA_TESLA_T4", "acceleratorCount": 1}


def resource_pool(pool_id="t4", machine=T4, disk=DISK, capacity=2, autoscaling=False):
    return ResourcePoolView(pool_id, {"machineSpec": machine, "diskSpec": disk}, capacity, autoscaling)


def worker_pools(*pools):
    return parse_custom_job(job_body(*pools)).document["jobSpec"]["workerPoolSpecs"]


def t4(replicas=1, count=1, **extra):
    pool = container_pool(replicas=replicas, accelerator="NVIDIA_TESLA_T4", count=count)
    pool.update(extra)
    return pool


def test_an_exact_match_maps_each_worker_pool_to_its_resource_pool():
    cpu = resource_pool("cpu", {"machineType": "n1-standard-4"})
    mapping, violations = match_worker_pools(worker_pools(t4(), container_pool()), [cpu, resource_pool()], NAME)
    assert violations == []
    assert mapping == {0: "t4", 1: "cpu"}


@pytest.mark.parametrize("pool, field, wanted, offered", [
    (container_pool("n1-standard-8", accelerator="NVIDIA_TESLA_T4", count=1), "machineSpec.machineType",
     "n1-standard-8", "n1-standard-4"),
    (container_pool(accelerator="NVIDIA_TESLA_V100", count=1), "machineSpec.acceleratorType", "NVIDIA_TESLA_V100",
     "NVIDIA_TESLA_T4"),
    (t4(count=2), "machineSpec.acceleratorCount", "2", "1"),
    (t4(diskSpec={"bootDiskType": "pd-standard"}), "diskSpec.bootDiskType", "pd-standard", "pd-ssd"),
    (t4(diskSpec={"bootDiskSizeGb": 200}), "diskSpec.bootDiskSizeGb", "200", "100"),
])
def test_each_differing_field_is_named_with_both_values(pool, field, wanted, offered):
    _, violations = match_worker_pools(worker_pools(pool), [resource_pool()], NAME)
    (violation,) = violations
    assert violation.field == f"jobSpec.workerPoolSpecs[0].{field}"
    assert f"has {field.split('.')[-1]} {offered}, this worker pool asks for {wanted}" in violation.description
    assert "'t4'" in violation.description


def test_the_closest_resource_pool_is_the_one_reported():
    far = resource_pool("far", {"machineType": "a2-highgpu-1g", "acceleratorType": "NVIDIA_TESLA_A100",
                                "acceleratorCount": 1}, {"bootDiskType": "pd-standard", "bootDiskSizeGb": 500})
    _, violations = match_worker_pools(worker_pools(t4(count=2)), [far, resource_pool()], NAME)
    assert [v.field for v in violations] == ["jobSpec.workerPoolSpecs[0].machineSpec.acceleratorCount"]


def test_a_job_may_ask_up_to_the_pool_size_and_no_more():
    assert match_worker_pools(worker_pools(t4(), t4(replicas=1)), [resource_pool(capacity=2)], NAME)[1] == []
    _, violations = match_worker_pools(worker_pools(t4(), t4(replicas=2)), [resource_pool(capacity=2)], NAME)
    (violation,) = violations
    assert violation.field == "jobSpec.workerPoolSpecs[1].replicaCount"
    assert "worker pools 0, 1 together ask for 3 replica(s)" in violation.description
    assert "(replicaCount 2)" in violation.description


def test_an_autoscaling_pool_takes_jobs_up_to_its_maximum():
    pools = [resource_pool(capacity=5, autoscaling=True)]
    assert match_worker_pools(worker_pools(t4(), t4(replicas=4)), pools, NAME)[1] == []
    _, violations = match_worker_pools(worker_pools(t4(), t4(replicas=5)), pools, NAME)
    assert "(maxReplicaCount 5)" in violations[0].description
