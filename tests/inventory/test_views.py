"""The nodes page: pools, nodes and what occupies or holds them, for members of any project."""

import datetime as dt

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from tests.conftest import container_pool
from tests.jobs.test_views import place_on, submit
from tests.slurm.conftest import admin, cluster, slurm_pools  # noqa: F401 - fixtures
from trainhub.iam.services import user_ensure
from trainhub.inventory.models import NodeState
from trainhub.inventory.services import node_pool_ensure, node_set_state, nodes_dedicate

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
    for text in ("a100", "t4", "h100", "n1-standard-4", "4 × <span class=\"mono\">NVIDIA_TESLA_T4</span>", busy.name, "busy-job",
                 "workerpool0-0", "maintenance window", "badge--node-drain"):
        assert text in content, text
    t4 = next(pool for pool in response.context["pools"] if pool.name == "t4")
    assert (t4.node_up, t4.node_total, t4.node_busy, t4.node_free) == (3, 3, 1, 2)
    a100 = next(pool for pool in response.context["pools"] if pool.name == "a100")
    assert (a100.node_up, a100.node_drain, a100.node_free, a100.idle_draining) == (1, 1, 1, 1)


def test_the_usage_bar_counts_each_node_once(client, cast, nodes, now):
    t4_nodes = list(nodes["t4"].nodes.order_by("name"))
    place_on(submit(cast["alpha"], cast["uma"]), t4_nodes[0], now)
    node_set_state(node=t4_nodes[0], state=NodeState.DRAIN, reason="busy and draining")
    node_set_state(node=t4_nodes[1], state=NodeState.DOWN, reason="gone")
    client.force_login(cast["vic"])
    t4 = next(pool for pool in client.get(reverse("inventory:list")).context["pools"] if pool.name == "t4")
    assert (t4.node_busy, t4.idle_draining, t4.idle_down, t4.node_free) == (1, 0, 1, 1)


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


def listed_nodes(client, **params) -> list[str]:
    response = client.get(reverse("inventory:list"), params)
    assert response.status_code == 200
    return [node.name for node in response.context["node_page"].nodes]


def test_it_filters_nodes_by_pool_state_occupancy_and_name(client, cast, nodes, now):
    t4_nodes = list(nodes["t4"].nodes.order_by("name"))
    place_on(submit(cast["alpha"], cast["uma"], container_pool()), t4_nodes[0], now)
    nodes_dedicate(nodes=[t4_nodes[1]], owner="persistentResources/7")
    node_set_state(node=nodes["a100"].nodes.first(), state=NodeState.DOWN, reason="gone")
    client.force_login(cast["vic"])
    assert listed_nodes(client, pool="t4") == [node.name for node in t4_nodes]
    assert listed_nodes(client, occupancy="busy") == [t4_nodes[0].name]
    assert listed_nodes(client, occupancy="dedicated") == [t4_nodes[1].name]
    assert set(listed_nodes(client, occupancy="idle")) == {t4_nodes[2].name, *[
        n.name for n in nodes["h100"].nodes.all()], *[n.name for n in nodes["a100"].nodes.filter(state="UP")]}
    assert listed_nodes(client, state="DOWN") == [nodes["a100"].nodes.first().name]
    assert listed_nodes(client, q=t4_nodes[2].name) == [t4_nodes[2].name]
    content = client.get(reverse("inventory:list"), {"occupancy": "dedicated"}).content.decode()
    assert "persistentResources/7" in content
    assert "Select a valid choice" in client.get(reverse("inventory:list"), {"pool": "nope"}).content.decode()


def test_nodes_come_fifty_at_a_time_by_name(client, cast):
    pool = node_pool_ensure(name="big", machine_type="n1-standard-4", node_count=120)
    names = sorted(pool.nodes.values_list("name", flat=True))
    client.force_login(cast["uma"])
    seen, after, pages = [], "", []
    while True:
        response = client.get(reverse("inventory:list"), {"after": after} if after else {})
        pages.append(response)
        seen += [node.name for node in response.context["node_page"].nodes]
        after = response.context["node_page"].next_after
        if not after:
            break
        assert f"after={after}" in response.content.decode()
    assert seen == names and len(pages) == 3
    assert b'id="node-rows" hx-get' in pages[0].content
    assert b'id="node-rows" hx-get' not in pages[1].content  # a later page stays still while read


def test_the_pool_cards_and_the_node_rows_refresh_as_fragments(client, cast, nodes):
    client.force_login(cast["uma"])
    page = client.get(reverse("inventory:list"), {"pool": "t4"}).content.decode()
    assert f'hx-get="{reverse("inventory:list_pools")}" hx-trigger="th-changed from:body"' in page
    assert f'hx-get="{reverse("inventory:list_rows")}?pool=t4" hx-trigger="th-changed from:body"' in page
    rows = client.get(reverse("inventory:list_rows"), {"pool": "t4"})
    assert rows.status_code == 200 and b"<html" not in rows.content
    assert rows.content.decode().count("<tr>") == 3
    pools = client.get(reverse("inventory:list_pools"))
    assert b'id="pool-cards"' in pools.content and b"<html" not in pools.content


def test_a_held_reservation_shows_its_job_nodes_since_and_until(client, cast, now, held_a100):
    from tests.conftest import later

    # the held node, the job (a link), since when and until when at most; the node's row says it too
    client.force_login(cast["uma"])
    content = client.get(reverse("inventory:list")).content.decode()
    link = f'<a href="{reverse("jobs:detail", kwargs={"project": "alpha", "location": "us-central1", "job_id": held_a100.job_id})}">big-gang</a>'
    section = content[content.index('id="reservations"'):content.index("</section>", content.index('id="reservations"'))]
    assert link in section and "a100-1" in section
    assert f'<time datetime="{later(now, 101).isoformat()}"' in section  # since the pass that took it
    until = held_a100.create_time + dt.timedelta(seconds=7200)  # its maxWaitDuration: released then at most
    assert f'<time datetime="{until.isoformat()}"' in section
    row = content[content.index('<th scope="row" class="mono">a100-1</th>'):]
    assert row[:row.index("</tr>")].count(f"idle, held for FLEX_START job {link}") == 1


def test_a_reservation_of_another_projects_job_is_not_named(client, cast, held_a100):
    client.force_login(cast["mallory"])
    content = client.get(reverse("inventory:list")).content.decode()
    assert "big-gang" not in content and held_a100.job_id not in content
    assert "a job of another project" in content and "held for a FLEX_START job of another project" in content


def test_without_reservations_the_section_is_hidden_but_refreshes(client, cast, nodes):
    client.force_login(cast["uma"])
    content = client.get(reverse("inventory:list")).content.decode()
    url = reverse("inventory:list_reservations")
    assert f'id="reservations" aria-labelledby="reservations-heading" hx-get="{url}"' in content
    assert 'hx-swap="outerHTML" hidden>' in content
    fragment = client.get(url)
    assert fragment.status_code == 200 and b"<html" not in fragment.content


def test_the_nodes_page_runs_as_many_queries_for_a_reservation_of_many_nodes_as_for_none(
        client, cast, nodes, now, settings, django_assert_max_num_queries):
    from tests.conftest import later
    from trainhub.inventory.services import node_heartbeat
    from trainhub.scheduling.services import scheduler_pass

    settings.TRAINHUB_FLEX_RESERVATION_AFTER_SECONDS = 60
    settings.TRAINHUB_NODE_HEARTBEAT_TTL_SECONDS = 3600
    big = node_pool_ensure(name="a100-big", machine_type="a2-highgpu-1g", node_count=6)
    node_heartbeat(node_ids=list(big.nodes.values_list("pk", flat=True)), now=now)
    a100 = container_pool("a2-highgpu-1g")
    submit(cast["alpha"], cast["uma"], a100, now=now)
    gang = submit(cast["alpha"], cast["uma"], a100, {**a100, "replicaCount": 7}, name="big-gang", now=later(now, 1),
                  scheduling={"strategy": "FLEX_START"})
    scheduler_pass(now=later(now, 2))  # before the threshold: nothing held
    client.force_login(cast["uma"])
    with CaptureQueriesContext(connection) as none_held:
        assert "big-gang" not in client.get(reverse("inventory:list")).content.decode()
    scheduler_pass(now=later(now, 101))
    with django_assert_max_num_queries(len(none_held)):
        content = client.get(reverse("inventory:list")).content.decode()
    assert content.count("idle, held for FLEX_START job <a") == 7
    assert gang.job_id in content


def test_a_dedicated_node_names_its_slurm_cluster_or_persistent_resource_not_its_owner_key(
        client, cast, nodes, cluster, now):  # noqa: F811
    from tests.resources.conftest import running, t4_pool

    resource = running(cast, now, t4_pool(), resource_id="reserved")
    client.force_login(cast["uma"])
    page = client.get(reverse("inventory:list"), {"occupancy": "dedicated"}).content.decode()
    assert 'Slurm cluster <a href="/slurm/projects/alpha/locations/us-central1/clusters/c1/">c1</a>' in page
    assert ('persistent resource <a href="/projects/alpha/locations/us-central1/persistent-resources/reserved/">'
            'reserved</a>') in page
    assert cluster.owner_key not in page and resource.owner not in page
    client.force_login(cast["mallory"])  # of project beta: the owners are alpha's
    page = client.get(reverse("inventory:list"), {"occupancy": "dedicated"}).content.decode()
    assert "a Slurm cluster of another project" in page and "a persistent resource of another project" in page
    assert "clusters/c1/" not in page and ">reserved<" not in page
