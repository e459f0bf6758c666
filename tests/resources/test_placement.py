"""The scheduler pass's step for jobs on a persistent resource: they start in the next pass on
its nodes only, share its free replicas with each other, wait saying why, and autoscaling pools
grow toward maxReplicaCount and shrink back to minReplicaCount."""

import pytest

from tests.conftest import later, wait_reasons
from tests.resources.conftest import autoscaling_pool, running, submit, t4_job, t4_pool
from trainhub.inventory.models import Node
from trainhub.jobs import services as job_services
from trainhub.jobs import states
from trainhub.resources import selectors, services
from trainhub.resources.models import PersistentResource
from trainhub.scheduling.services import scheduler_pass
from trainhub.scheduling.selectors import wait_explanation

pytestmark = pytest.mark.django_db


def refreshed(*jobs):
    for job in jobs:
        job.refresh_from_db()
    return jobs


def finish(job, now):
    for replica in job.replicas.filter(active=True):
        job_services.replica_exited(replica=replica, exit_code=0, now=now)


def held(resource):
    return Node.objects.filter(dedicated_to=f"persistentResources/{resource.pk}").count()


def usage(resource, now):
    (pool_usage,) = selectors.pool_usage(resources=[resource], now=now).values()
    return pool_usage


def test_a_job_on_a_resource_starts_in_the_next_pass_on_its_nodes(cast, pr, now):
    job = submit(cast, now, t4_job(replicas=1, pools=2))
    result = scheduler_pass(now=now)
    (job,) = refreshed(job)
    assert result.placed == 1 and job.state == states.PENDING
    held_nodes = set(Node.objects.filter(dedicated_to=pr.owner).values_list("pk", flat=True))
    assert {r.node_id for r in job.replicas.all()} == held_nodes
    assert [r.gpu_indices for r in job.replicas.all()] == [[0], [0]]


def test_concurrent_jobs_share_the_free_replicas_and_the_rest_wait_saying_why(cast, nodes, now):
    resource = running(cast, now, t4_pool(3))
    first = submit(cast, now, t4_job(replicas=1, pools=2))     # 2 replicas
    second = submit(cast, later(now, 1), t4_job())             # 1 replica
    third = submit(cast, later(now, 2), t4_job())              # 1 replica: none left
    scheduler_pass(now=later(now, 3))
    first, second, third = refreshed(first, second, third)
    assert (first.state, second.state, third.state) == (states.PENDING, states.PENDING, states.QUEUED)
    assert usage(resource, now) == selectors.PoolUsage(provisioned=3, used=3, free=0)
    assert wait_reasons(third) == ["Waiting for free replicas in resource pool 't4' of persistent resource pr: "
                                   "needs 1, 0 free, 3 in use by other jobs."]
    assert wait_explanation(job_pk=third.pk).position == 1
    finish(second, later(now, 4))
    scheduler_pass(now=later(now, 5))
    (third,) = refreshed(third)
    assert third.state == states.PENDING
    assert third.replicas.get().node_id == second.replicas.get().node_id


def test_a_job_that_does_not_fit_the_free_replicas_does_not_block_a_smaller_one(cast, nodes, now):
    running(cast, now, t4_pool(3))
    holder = submit(cast, now, t4_job())
    scheduler_pass(now=now)
    big = submit(cast, later(now, 1), t4_job(replicas=2, pools=2))   # 3 replicas: fits the size, not the free 2
    small = submit(cast, later(now, 2), t4_job())
    scheduler_pass(now=later(now, 3))
    holder, big, small = refreshed(holder, big, small)
    assert (big.state, small.state) == (states.QUEUED, states.PENDING)
    assert "needs 3, 1 free, 2 in use by other jobs" in wait_reasons(big)[0]
    assert wait_explanation(job_pk=big.pk).estimated_start is not None


def test_jobs_on_a_resource_never_spill_onto_the_shared_pool(cast, pr, now):
    jobs = [submit(cast, now, t4_job()) for _ in range(3)]
    scheduler_pass(now=now)
    refreshed(*jobs)
    assert [job.state for job in jobs] == [states.PENDING, states.PENDING, states.QUEUED]
    assert Node.objects.filter(dedicated_to="", replicas__active=True).count() == 0


def test_jobs_wait_while_their_resource_is_not_running(cast, pr, now):
    PersistentResource.objects.filter(pk=pr.pk).update(state="UPDATING")
    job = submit(cast, now, t4_job())
    scheduler_pass(now=now)
    (job,) = refreshed(job)
    assert job.state == states.QUEUED
    assert wait_reasons(job) == ["Persistent resource pr is UPDATING; jobs start on it once it is RUNNING."]


def test_a_job_that_no_longer_fits_after_a_resize_fails_saying_why(cast, nodes, now):
    resource = running(cast, now, t4_pool(3))
    holder = submit(cast, now, t4_job())
    scheduler_pass(now=now)
    waiting = submit(cast, now, t4_job(replicas=2, pools=2))
    services.persistent_resource_update(resource=resource, update_mask="resourcePools.replicaCount",
                                        body={"resourcePools": [{"replicaCount": 2}]}, now=now)
    services.persistent_resources_advance(now=now)
    scheduler_pass(now=later(now, 1))
    holder, waiting = refreshed(holder, waiting)
    assert holder.state == states.PENDING
    assert waiting.state == states.FAILED and waiting.error["code"] == 9
    assert "no longer fits its persistent resource" in waiting.error["message"]


def test_a_job_left_on_a_deleted_resource_fails(cast, pr, now):
    job = submit(cast, now, t4_job())
    PersistentResource.objects.filter(pk=pr.pk).update(deleted_time=now)
    scheduler_pass(now=now)
    (job,) = refreshed(job)
    assert job.state == states.FAILED and "no longer exists or is being deleted" in job.error["message"]


# Autoscaling ------------------------------------------------------------------------------------


def test_an_autoscaling_pool_grows_toward_its_maximum_for_waiting_jobs(cast, nodes, now):
    resource = running(cast, now, autoscaling_pool(1, 3))
    assert held(resource) == 1
    job = submit(cast, now, t4_job(replicas=2, pools=2))
    scheduler_pass(now=now)
    (job,) = refreshed(job)
    assert job.state == states.PENDING and held(resource) == 3


def test_growth_stops_at_the_maximum_and_the_rest_wait(cast, nodes, now):
    resource = running(cast, now, autoscaling_pool(1, 2))
    first, second = submit(cast, now, t4_job(replicas=1, pools=2)), submit(cast, now, t4_job(replicas=1, pools=2))
    scheduler_pass(now=now)
    first, second = refreshed(first, second)
    assert held(resource) == 2 and Node.objects.filter(dedicated_to="", pool__name="t4").count() == 1
    assert (first.state, second.state) == (states.PENDING, states.QUEUED)


def test_growth_takes_what_the_inventory_has_and_the_job_waits_for_the_rest(cast, nodes, now):
    running(cast, now, t4_pool(1), resource_id="other")
    resource = running(cast, now, autoscaling_pool(1, 3))
    job = submit(cast, now, t4_job(replicas=2, pools=2))
    scheduler_pass(now=now)
    (job,) = refreshed(job)
    assert held(resource) == 2 and job.state == states.QUEUED
    assert "needs 3, 2 free, 0 in use" in wait_reasons(job)[0]


def test_idle_machines_go_back_after_the_grace_period_but_never_below_the_minimum(cast, nodes, now, settings):
    settings.TRAINHUB_RESOURCE_SCALE_DOWN_AFTER_SECONDS = 300
    settings.TRAINHUB_NODE_HEARTBEAT_TTL_SECONDS = 3600
    resource = running(cast, now, autoscaling_pool(1, 3))
    job = submit(cast, now, t4_job(replicas=2, pools=2))
    scheduler_pass(now=now)
    finish(refreshed(job)[0], later(now, 10))
    services.persistent_resources_advance(now=later(now, 309))
    assert held(resource) == 3
    services.persistent_resources_advance(now=later(now, 310))
    assert held(resource) == 1
    services.persistent_resources_advance(now=later(now, 10_000))
    assert held(resource) == 1


def test_busy_machines_are_never_given_back(cast, nodes, now, settings):
    settings.TRAINHUB_RESOURCE_SCALE_DOWN_AFTER_SECONDS = 0
    resource = running(cast, now, autoscaling_pool(1, 3))
    job = submit(cast, now, t4_job(replicas=2, pools=2))
    scheduler_pass(now=now)
    services.persistent_resources_advance(now=now)
    assert held(resource) == 3 and refreshed(job)[0].state == states.PENDING


def test_used_replica_count_follows_active_replicas(cast, pr, now):
    job = submit(cast, now, t4_job())
    assert usage(pr, now).used == 0
    scheduler_pass(now=now)
    assert usage(pr, now) == selectors.PoolUsage(provisioned=2, used=1, free=1)
    finish(job, now)
    assert usage(pr, now).used == 0
