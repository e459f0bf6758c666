"""The nodes page: pools, nodes and what occupies them, for members of any project."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from tests.conftest import container_pool
from tests.jobs.test_views import place_on, submit
from trainhub.iam.services import user_ensure
from trainhub.inventory.models import NodeState
from trainhub.inventory.services import node_pool_ensure, node_set_state

pytestmark = pytest.mark.django_db


def test_the_nodes_page_sends_anonymous_visitors_to_the_login_page(client):
    response = client.get(reverse("inventory:list"))
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login") + "?next=")


def test_a_user_in_no_project_gets_403(client, cast):
    client.force_login(user_ensure(username="loner", password="loner-password"))
    response = client.get(reverse("inventory:list"))
    assert response.status_code == 403
    assert b"aiplatform.nodes.list" in response.content


def test_it_lists_pools_nodes_and_the_job_occupying_a_node(client, cast, nodes, now):
    job = submit(cast["alpha"], cast["uma"], container_pool(), name="busy-job")
    busy = nodes["t4"].nodes.first()
    place_on(job, busy, now)
    node_set_state(node=nodes["a100"].nodes.first(), state=NodeState.DRAIN, reason="maintenance window")
    client.force_login(cast["vic"])
    response = client.get(reverse("inventory:list"))
    content = response.content.decode()
    assert response.status_code == 200
    for text in ("a100", "t4", "h100", "n1-standard-4", "NVIDIA_TESLA_T4</span> × 4", busy.name, "busy-job",
                 "workerpool0-0", "maintenance window", "badge--node-drain"):
        assert text in content, text
    t4 = next(pool for pool in response.context["pools"] if pool.name == "t4")
    assert (t4.node_up, t4.node_total, t4.node_busy) == (3, 3, 1)


def test_a_job_of_another_project_is_not_named(client, cast, nodes, now):
    job = submit(cast["alpha"], cast["uma"], container_pool(), name="alpha-secret")
    place_on(job, nodes["t4"].nodes.first(), now)
    client.force_login(cast["mallory"])
    content = client.get(reverse("inventory:list")).content.decode()
    assert "alpha-secret" not in content and job.job_id not in content
    assert "a job of another project" in content


def test_the_nodes_page_runs_as_many_queries_for_many_busy_nodes_as_for_one(client, cast, now,
                                                                           django_assert_max_num_queries):
    pool = node_pool_ensure(name="small", machine_type="n1-standard-4", node_count=1)
    place_on(submit(cast["alpha"], cast["uma"]), pool.nodes.get(), now)
    client.force_login(cast["uma"])
    with CaptureQueriesContext(connection) as few:
        client.get(reverse("inventory:list"))
    for name in ("big-a", "big-b"):
        for node in node_pool_ensure(name=name, machine_type="n1-standard-4", node_count=5).nodes.all():
            place_on(submit(cast["alpha"], cast["uma"]), node, now)
    with django_assert_max_num_queries(len(few)):
        response = client.get(reverse("inventory:list"))
    assert response.content.decode().count("workerpool0-0") == 11
