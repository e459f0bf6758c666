"""The persistent-resource pages: list, pool view with its live fragments and chart, create,
resize, reboot and delete; who may see and do what."""

import re

import pytest
from django.test import Client
from django.urls import reverse

from tests.plotting import assert_drawn_as_graph_objects_would, figure_in_html
from tests.resources.conftest import create, submit, t4_job, t4_pool
from trainhub.resources import services
from trainhub.resources.models import PersistentResource
from trainhub.scheduling.services import scheduler_pass

pytestmark = pytest.mark.django_db

KWARGS = {"project": "alpha", "location": "us-central1", "resource_id": "pr"}


def url(name, **kwargs):
    return reverse(f"resources:{name}", kwargs=kwargs or (KWARGS if name not in ("list", "list_rows",
                                                                                   "create_default") else {}))


def browser(cast, user):
    client = Client()
    client.force_login(cast[user])
    return client


def create_form(**overrides):
    data = {"resource_id": "from-form", "display_name": "From the form", "location": "us-central1",
            "pool0-machine_type": "n1-standard-4", "pool0-accelerator_type": "NVIDIA_TESLA_T4",
            "pool0-accelerator_count": "1", "pool0-replica_count": "2"}
    for index in (1, 2, 3):
        data[f"pool{index}-machine_type"] = ""
    data.update(overrides)
    return data


@pytest.mark.parametrize("name, method", [("list", "get"), ("list_rows", "get"), ("create_default", "get"),
                                          ("detail", "get"), ("detail_status", "get"), ("detail_chart", "get"),
                                          ("resize", "post"), ("reboot", "post"), ("delete", "post")])
def test_every_page_sends_anonymous_visitors_to_login(client, pr, name, method):
    response = getattr(client, method)(url(name))
    assert response.status_code == 302 and response["Location"].startswith("/login/")


def test_the_list_shows_each_resource_with_its_pools_and_cost(cast, pr, now):
    submit(cast, now, t4_job())
    scheduler_pass(now=now)
    page = browser(cast, "vic").get(url("list")).content.decode()
    assert "pool of T4s" in page and "RUNNING" in page
    assert "t4</span> 1 / 2" in page
    assert 'href="/persistent-resources/new"' not in page  # a viewer cannot create


def test_the_list_runs_a_constant_number_of_queries(cast, nodes, now, django_assert_max_num_queries):
    for index in range(4):
        create(cast, now, t4_pool(1), resource_id=f"pr-{index}")
    client = browser(cast, "vic")
    with django_assert_max_num_queries(12):
        assert client.get(url("list_rows")).status_code == 200


def test_a_stranger_sees_none_of_alphas_resources(cast, pr):
    client = browser(cast, "mallory")
    assert "pool of T4s" not in client.get(url("list")).content.decode()
    for name in ("detail", "detail_status", "detail_chart"):
        assert client.get(url(name)).status_code == 404, name
    assert client.post(url("delete")).status_code == 404
    assert PersistentResource.objects.get().state == "RUNNING"


def test_the_pool_view_shows_machines_jobs_and_what_waits(cast, pr, now):
    running = submit(cast, now, t4_job())
    scheduler_pass(now=now)
    waiting = submit(cast, now, t4_job(replicas=1, pools=2))
    page = browser(cast, "uma").get(url("detail")).content.decode()
    assert "Pool <span class=\"mono\">t4</span>" in page
    assert running.display_name in page and f"/jobs/{running.job_id}/" in page
    assert f"/jobs/{waiting.job_id}/" in page
    assert "answering" in page and "a replica" in page
    assert "<dt>Accelerator</dt><dd>1 × T4</dd>" in page and "NVIDIA_TESLA_T4" not in page
    assert re.search(r"idle for \d+s<", page)  # the other machine: seconds, not "0 minutes"
    assert "Resize" not in page and "Reboot" not in page  # uma is no admin


def test_the_status_fragment_is_polled_and_stops_once_deleting(cast, pr, now):
    client = browser(cast, "alice")
    fragment = client.get(url("detail_status")).content.decode()
    assert 'hx-trigger="every 3s"' in fragment
    services.persistent_resource_delete(resource=pr, now=now)
    assert 'hx-trigger="every 3s"' not in client.get(url("detail_status")).content.decode()


def test_the_chart_says_so_before_the_first_sample(cast, nodes, now):
    create(cast, now, t4_pool(1))
    assert "No sample yet" in browser(cast, "vic").get(url("detail_chart")).content.decode()


def test_the_chart_plots_the_utilisation_samples(cast, pr, now):
    client = browser(cast, "vic")  # the resource was sampled when it started RUNNING
    chart = client.get(url("detail_chart")).content.decode()
    figure = figure_in_html(chart, f"utilisation-{pr.pk}")
    assert_drawn_as_graph_objects_would(figure)
    assert [trace["name"] for trace in figure["data"]] == ["t4: provisioned", "t4: in use"]
    assert "vendor/plotly.min.js" in client.get(url("detail")).content.decode()


def test_the_detail_page_runs_a_constant_number_of_queries(cast, pr, now, django_assert_max_num_queries):
    for _ in range(2):
        submit(cast, now, t4_job())
    scheduler_pass(now=now)
    client = browser(cast, "alice")
    with django_assert_max_num_queries(30):
        assert client.get(url("detail")).status_code == 200


def test_an_admin_resizes_a_pool_from_the_page(cast, pr):
    client = browser(cast, "alice")
    assert "Resize" in client.get(url("detail")).content.decode()
    response = client.post(url("resize"), {"resize-t4-replica_count": "3", "resize-t4-min_replica_count": "",
                                           "resize-t4-max_replica_count": ""})
    assert response.status_code == 302
    assert PersistentResource.objects.get().state == "UPDATING"


def test_a_resize_the_service_refuses_shows_the_error_on_the_field(cast, pr):
    response = browser(cast, "alice").post(url("resize"), {"resize-t4-replica_count": "3",
                                                           "resize-t4-min_replica_count": "4",
                                                           "resize-t4-max_replica_count": "5"})
    assert response.status_code == 400
    assert "must be between minReplicaCount (4) and maxReplicaCount (5)" in response.content.decode()
    assert PersistentResource.objects.get().state == "RUNNING"


def test_only_admins_resize_reboot_or_delete(cast, pr):
    client = browser(cast, "uma")
    assert client.post(url("resize"), {"resize-t4-replica_count": "1"}).status_code == 403
    assert client.post(url("reboot")).status_code == 403
    assert client.post(url("delete")).status_code == 403
    assert PersistentResource.objects.get().state == "RUNNING"


def test_reboot_and_delete_buttons_start_operations(cast, pr):
    client = browser(cast, "alice")
    assert client.post(url("reboot")).status_code == 302
    assert PersistentResource.objects.get().state == "REBOOTING"
    response = client.post(url("delete"))
    assert response.status_code == 302 and response["Location"] == url("list")
    assert PersistentResource.objects.get().state == "STOPPING"


def test_a_refused_operation_is_reported_not_raised(cast, nodes, now):
    create(cast, now, t4_pool(1))
    client = browser(cast, "alice")
    response = client.post(url("reboot"), follow=True)
    assert "only a RUNNING or ERROR resource can be rebooted" in response.content.decode()


def test_buttons_need_a_csrf_token(cast, pr):
    client = Client(enforce_csrf_checks=True)
    client.force_login(cast["alice"])
    assert client.post(url("delete")).status_code == 403
    assert PersistentResource.objects.get().state == "RUNNING"


def test_an_admin_creates_a_resource_from_the_form(cast, nodes):
    client = browser(cast, "alice")
    assert client.get(url("create_default")).status_code == 302
    create_url = reverse("resources:create", kwargs={"project": "alpha", "location": "us-central1"})
    page = client.get(create_url).content.decode()
    assert 'id="machine-catalog"' in page and "data-worker-pool" in page
    response = client.post(create_url, create_form())
    assert response.status_code == 302
    resource = PersistentResource.objects.get()
    assert (resource.resource_id, resource.display_name, resource.state) == ("from-form", "From the form",
                                                                             "PROVISIONING")
    assert response["Location"] == reverse("resources:detail", kwargs={**KWARGS, "resource_id": "from-form"})


def test_the_create_form_shows_the_services_refusal_on_the_field(cast, nodes):
    client = browser(cast, "alice")
    create_url = reverse("resources:create", kwargs={"project": "alpha", "location": "us-central1"})
    response = client.post(create_url, create_form(**{"pool0-replica_count": "9"}))
    assert response.status_code == 400
    page = response.content.decode()
    assert "<strong>Resource pool 0 · Replica count</strong>" in page and "can never be provisioned" in page
    assert not PersistentResource.objects.exists()


def test_users_and_viewers_cannot_create(cast, nodes):
    for user in ("uma", "vic"):
        client = browser(cast, user)
        assert client.get(url("create_default")).status_code == 403
        create_url = reverse("resources:create", kwargs={"project": "alpha", "location": "us-central1"})
        assert client.post(create_url, create_form()).status_code == 403
    assert not PersistentResource.objects.exists()


def test_the_nav_links_to_the_resources(cast, pr):
    page = browser(cast, "vic").get(url("list")).content.decode()
    assert 'href="/persistent-resources/" aria-current="page"' in page


def test_a_jobs_page_links_to_its_resource(cast, pr, now):
    job = submit(cast, now, t4_job())
    page = browser(cast, "uma").get(reverse("jobs:detail", kwargs={"project": "alpha", "location": "us-central1",
                                                                    "job_id": job.job_id})).content.decode()
    assert f'href="{url("detail")}"' in page
