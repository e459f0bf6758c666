"""A persistent resource is billed for every machine it holds the whole time it runs, used or
not; never while provisioning, in error or being deleted; deleted resources keep their cost;
projects see the sum on the Quotas page."""

import pytest
from django.test import Client

from tests.conftest import later
from tests.resources.conftest import running, submit, t4_job, t4_pool
from trainhub.inventory.models import Node
from trainhub.inventory.services import node_heartbeat
from trainhub.resources import selectors, services
from trainhub.resources.models import PersistentResource
from trainhub.scheduling.services import scheduler_pass

pytestmark = pytest.mark.django_db

HOUR = 3600
T4_PER_HOUR = 0.40 * 1.10  # on-demand T4 plus the 10% management fee


@pytest.fixture(autouse=True)
def agents_answer_for_days(settings):
    settings.TRAINHUB_NODE_HEARTBEAT_TTL_SECONDS = 10 * 24 * HOUR


def cost(resource, now):
    resource = PersistentResource.objects.get(pk=resource.pk)
    return selectors.resource_cost(resource, selectors.pool_usage(resources=[resource], now=now), now)


def test_a_running_resource_accrues_every_machine_used_or_not(cast, nodes, now):
    resource = running(cast, now, t4_pool(2))
    accrued = cost(resource, later(now, HOUR)).accrued
    assert accrued.gpu_hours == {"NVIDIA_TESLA_T4": pytest.approx(2.0)}
    assert accrued.total == pytest.approx(2 * T4_PER_HOUR)
    assert cost(resource, later(now, HOUR)).hourly.total == pytest.approx(2 * T4_PER_HOUR)


def test_jobs_running_on_it_do_not_change_what_it_costs(cast, nodes, now):
    busy = running(cast, now, t4_pool(2), resource_id="busy")
    submit(cast, now, t4_job(resource_id="busy"))
    scheduler_pass(now=now)
    assert cost(busy, later(now, HOUR)).accrued.total == pytest.approx(2 * T4_PER_HOUR)


def test_a_resize_is_billed_from_the_moment_it_happens(cast, nodes, now):
    resource = running(cast, now, t4_pool(2))
    services.persistent_resource_update(resource=resource, update_mask="resourcePools.replicaCount",
                                        body={"resourcePools": [{"replicaCount": 3}]}, now=later(now, HOUR))
    services.persistent_resources_advance(now=later(now, HOUR))
    assert cost(resource, later(now, 2 * HOUR)).accrued.gpu_hours["NVIDIA_TESLA_T4"] == pytest.approx(2 + 3)


def test_nothing_accrues_while_provisioning_or_in_error(cast, nodes, now):
    Node.objects.update(last_heartbeat=None)
    services.persistent_resource_create(project=cast["alpha"], location="us-central1", resource_id="pr",
                                        body={"resourcePools": [t4_pool(1)]}, user=cast["alice"], now=now)
    services.persistent_resources_advance(now=now)
    resource = PersistentResource.objects.get()
    assert resource.state == "PROVISIONING"
    node_heartbeat(node_ids=list(Node.objects.values_list("pk", flat=True)), now=later(now, HOUR))
    services.persistent_resources_advance(now=later(now, HOUR))
    assert cost(resource, later(now, 2 * HOUR)).accrued.gpu_hours["NVIDIA_TESLA_T4"] == pytest.approx(1.0)


def test_a_deleted_resource_keeps_its_cost_and_stops_accruing(cast, nodes, now):
    resource = running(cast, now, t4_pool(1))
    services.persistent_resource_delete(resource=resource, now=later(now, HOUR))
    services.persistent_resources_advance(now=later(now, HOUR))
    later_on = later(now, 10 * HOUR)
    assert cost(resource, later_on).accrued.gpu_hours["NVIDIA_TESLA_T4"] == pytest.approx(1.0)
    (row,) = selectors.project_resource_costs(project_ids=[cast["alpha"].pk], now=later_on)
    assert (row.project_id, row.resources, row.total) == ("alpha", 1, pytest.approx(T4_PER_HOUR))


def test_each_project_sees_the_sum_of_its_resources(cast, nodes, now):
    running(cast, now, t4_pool(1), resource_id="one")
    running(cast, now, t4_pool(1), resource_id="two")
    (row,) = selectors.project_resource_costs(project_ids=[cast["alpha"].pk, cast["beta"].pk],
                                              now=later(now, HOUR))
    assert (row.resources, row.gpu_hours) == (2, pytest.approx(2.0))


def test_the_quotas_page_shows_resource_cost_per_project(cast, nodes, now):
    running(cast, now, t4_pool(1))
    client = Client()
    client.force_login(cast["vic"])
    page = client.get("/quotas/").content.decode()
    assert "Persistent resources per project" in page
    assert "<td>alpha</td><td>1</td>" in page
    client.force_login(cast["mallory"])
    assert "<td>alpha</td><td>1</td>" not in client.get("/quotas/").content.decode()


def test_time_in_error_is_not_billed(cast, nodes, now):
    resource = running(cast, now, t4_pool(1))
    node = Node.objects.get(dedicated_to=resource.owner)
    Node.objects.filter(pk=node.pk).update(state="DOWN")
    services.persistent_resources_advance(now=later(now, HOUR))
    assert PersistentResource.objects.get().state == "ERROR"
    Node.objects.filter(pk=node.pk).update(state="UP")
    services.persistent_resources_advance(now=later(now, 3 * HOUR))
    assert PersistentResource.objects.get().state == "RUNNING"
    assert cost(resource, later(now, 4 * HOUR)).accrued.gpu_hours["NVIDIA_TESLA_T4"] == pytest.approx(2.0)
