"""A persistent resource holds the project's on-demand GPU quota for every machine it holds, as
Vertex counts persistent resources against the training quota; the jobs on it consume none."""

import pytest

from tests.conftest import container_pool, job_body, wait_reasons
from tests.resources.conftest import autoscaling_pool, create, running, submit, t4_job, t4_pool
from trainhub.common.errors import ApiError
from trainhub.resources import services
from trainhub.resources.models import PersistentResource, ResourcePool
from trainhub.scheduling.selectors import quota_usage
from trainhub.scheduling.services import quota_set, scheduler_pass

pytestmark = pytest.mark.django_db

T4_ON_DEMAND = "custom_model_training_nvidia_t4_gpus"


def limit_t4(cast, limit):
    quota_set(project=cast["alpha"], location="us-central1", metric=T4_ON_DEMAND, limit=limit, actor="test")


def shared_t4_job(replicas: int):
    """A job for the shared pool with ``replicas`` machines of one T4 each."""
    pools = [container_pool(accelerator="NVIDIA_TESLA_T4", count=1)]
    if replicas > 1:
        pools.append(container_pool(replicas=replicas - 1, accelerator="NVIDIA_TESLA_T4", count=1))
    return job_body(*pools)


def t4_usage(cast) -> int:
    return quota_usage(project_ids=[cast["alpha"].pk]).get((cast["alpha"].pk, "us-central1", T4_ON_DEMAND), 0)


def the_resource() -> PersistentResource:
    return PersistentResource.objects.get(resource_id="pr", deleted_time__isnull=True)


def test_the_machines_a_resource_holds_count_against_on_demand_quota_and_its_jobs_add_nothing(cast, nodes, now):
    running(cast, now, t4_pool(2))
    assert t4_usage(cast) == 2
    submit(cast, now, t4_job())
    scheduler_pass(now=now)
    assert t4_usage(cast) == 2


def test_a_resource_larger_than_the_limit_is_refused_at_create_naming_the_quota(cast, nodes, now):
    limit_t4(cast, 1)
    with pytest.raises(ApiError) as error:
        create(cast, now, t4_pool(2))
    assert (error.value.http_status, error.value.status) == (429, "RESOURCE_EXHAUSTED")
    assert f"aiplatform.googleapis.com/{T4_ON_DEMAND} in us-central1: 0 in use + 2 requested > limit 1" \
           in error.value.message
    assert not PersistentResource.objects.exists()


def test_a_resource_that_fits_the_limit_but_not_what_jobs_hold_is_refused(cast, nodes, now):
    limit_t4(cast, 4)
    submit(cast, now, shared_t4_job(3))
    scheduler_pass(now=now)
    with pytest.raises(ApiError) as error:
        create(cast, now, t4_pool(2))
    assert "3 in use + 2 requested > limit 4" in error.value.message


def test_a_shared_pool_job_waits_for_the_quota_a_resource_holds(cast, nodes, now):
    limit_t4(cast, 3)
    running(cast, now, t4_pool(2))
    job = submit(cast, now, shared_t4_job(2))
    scheduler_pass(now=now)
    job.refresh_from_db()
    assert job.state == "JOB_STATE_QUEUED"
    assert wait_reasons(job)[0].startswith(f"Waiting for quota {T4_ON_DEMAND} in us-central1: 2 in use + 2")


def test_provisioning_fails_when_the_quota_was_taken_after_the_request(cast, nodes, now):
    operation = create(cast, now, t4_pool(2))
    limit_t4(cast, 1)
    services.persistent_resources_advance(now=now)
    operation.refresh_from_db()
    assert operation.done and operation.error["code"] == 8
    assert f"Resource pool 't4': quota aiplatform.googleapis.com/{T4_ON_DEMAND}" in operation.error["message"]
    assert the_resource().state == "ERROR" and t4_usage(cast) == 0


def test_growing_a_pool_beyond_the_quota_is_refused_and_the_resource_keeps_its_size(cast, nodes, now):
    resource = running(cast, now, t4_pool(1))
    limit_t4(cast, 2)
    with pytest.raises(ApiError) as error:
        services.persistent_resource_update(resource=resource, update_mask="resourcePools.replicaCount",
                                            body={"resourcePools": [{"id": "t4", "replicaCount": 3}]}, now=now)
    assert error.value.status == "RESOURCE_EXHAUSTED" and "1 in use + 2 requested > limit 2" in error.value.message
    assert the_resource().state == "RUNNING" and ResourcePool.objects.get().replica_count == 1


def test_autoscaling_grows_only_as_far_as_the_quota_admits(cast, nodes, now):
    resource = running(cast, now, autoscaling_pool(1, 3))
    limit_t4(cast, 2)
    grown = services.resource_pool_grow(resource=resource, pool=ResourcePool.objects.get(), count=2, now=now)
    assert grown == 1 and t4_usage(cast) == 2
