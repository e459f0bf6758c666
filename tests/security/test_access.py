"""Every route of the URL conf (tests/security/urlconf.py) refuses anonymous callers, hides another
project's resources (404), and refuses a session POST without a CSRF token; the admin site and
admin-only actions refuse non-staff users."""

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from tests.conftest import container_pool, job_body
from tests.slurm.conftest import accounts, admin, cluster, make_job, slurm_pools  # noqa: F401 - fixtures
from tests.security.urlconf import CSRF_EXEMPT, PUBLIC, protected_routes, routes
from trainhub.jobs import services
from trainhub.resources import services as resource_services
from trainhub.slurm.models import Association
from trainhub.tuning import services as tuning_services
from trainhub.tuning.models import Model
from trainhub.tuning.spec import CUSTOM_TASK

SECRET = "alpha-secret-experiment"


@pytest.fixture
def alpha_job(cast):
    return services.job_submit(project=cast["alpha"], location="us-central1", user=cast["uma"],
                               body=job_body(container_pool(), name=SECRET))


@pytest.fixture
def alpha_values(alpha_job, cast, nodes, accounts, now):
    """Route parameters pointing at alpha's resources: one of every kind."""
    alpha = cast["alpha"]
    slurm_job = make_job(accounts, name=SECRET, now=now)
    association = Association.objects.filter(cluster=accounts, user="uma").first()
    operation = resource_services.persistent_resource_create(
        project=alpha, location="us-central1", resource_id="secret-resource", user=cast["alice"], now=now,
        body={"displayName": SECRET, "resourcePools": [
            {"machineSpec": {"machineType": "n1-standard-4", "acceleratorType": "NVIDIA_TESLA_T4",
                             "acceleratorCount": 1}, "replicaCount": 1}]})
    trial_job = {"workerPoolSpecs": [container_pool()]}
    study = {"metrics": [{"metricId": "score", "goal": "MAXIMIZE"}],
             "parameters": [{"parameterId": "x", "discreteValueSpec": {"values": [1, 2]}}],
             "algorithm": "GRID_SEARCH"}
    tuning_job = tuning_services.tuning_job_create(
        project=alpha, location="us-central1", user=cast["uma"],
        body={"displayName": SECRET, "studySpec": study, "maxTrialCount": 2, "parallelTrialCount": 1,
              "trialJobSpec": trial_job})
    pipeline = tuning_services.pipeline_create(
        project=alpha, location="us-central1", user=cast["uma"],
        body={"displayName": SECRET, "trainingTaskDefinition": CUSTOM_TASK,
              "trainingTaskInputs": trial_job})
    model = Model.objects.create(project=alpha, location="us-central1", model_id="secret-model",
                                 display_name=SECRET, create_time=timezone.now(), update_time=timezone.now())
    return {"project": "alpha", "location": "us-central1", "job_id": alpha_job.job_id,
            "resource_id": "secret-resource", "operation_id": operation.operation_id,
            "tuning_job_id": tuning_job.job_id, "pipeline_id": pipeline.pipeline_id, "model_id": model.model_id,
            "cluster": accounts.cluster_id, "slurm_job_id": str(slurm_job.job_id), "kind": "prolog",
            "partition": "a4", "node": "a4-0", "pk": str(association.pk), "name": "normal",
            "key": "queue-depth"}


def call(client, method, path):
    if method == "get":
        return client.get(path)
    return getattr(client, method)(path, data="{}", content_type="application/json")


def test_the_public_routes_are_the_listed_ones_and_exist():
    names = {route.name for route in routes()}
    assert set(PUBLIC) <= names


def test_every_api_endpoint_refuses_anonymous_callers_in_the_error_format(client, alpha_values):
    checked = 0
    for route in protected_routes():
        if not route.is_api:
            continue
        for method in route.methods():
            response = call(client, method, route.path(alpha_values))
            assert response.status_code == 401, (method, route.route)
            assert response.json()["error"]["status"] == "UNAUTHENTICATED", (method, route.route)
            checked += 1
    assert checked >= 8


def test_every_page_sends_anonymous_visitors_to_login(client, alpha_values):
    checked = 0
    for route in protected_routes():
        if route.is_api:
            continue
        path = route.path(alpha_values)
        response = client.get(path)
        if response.status_code == 405:  # a POST-only action
            response = client.post(path)
        assert response.status_code == 302 and response["Location"].startswith("/login/"), route.route
        checked += 1
    assert checked >= 10


def test_another_projects_resources_are_not_found_on_every_route(client, api, cast, alpha_values, alpha_job):
    """mallory (admin of beta only) asks for alpha's project and job, and for alpha's job under beta."""
    client.force_login(cast["mallory"])
    beta_values = {**alpha_values, "project": "beta"}
    checked = 0
    for route in protected_routes():
        if "project" not in route.parameters:
            continue
        names_a_resource = any(name.endswith("_id") for name in route.parameters)
        variants = [alpha_values] + ([beta_values] if names_a_resource else [])
        for values in variants:
            path = route.path(values)
            statuses = set()
            for method in route.methods():
                response = call(api("mallory") if route.is_api else client, method, path)
                assert SECRET not in response.content.decode(), (method, path)
                statuses.add(response.status_code)
            # 405: a page that takes only POST (or only GET) refuses the other method before any lookup.
            assert 404 in statuses and statuses <= {404, 405}, (path, statuses)
            checked += 1
    assert checked >= 10


def test_no_page_shows_another_projects_job(client, cast, alpha_values):
    client.force_login(cast["mallory"])
    for route in protected_routes():
        if route.is_api or route.parameters:
            continue
        response = client.get(route.path(alpha_values))
        assert SECRET not in response.content.decode(), route.route


def test_every_route_refuses_a_session_post_without_a_csrf_token(cast, alpha_values, alpha_job):
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(cast["alice"])
    checked = 0
    for route in routes():
        if route.name in CSRF_EXEMPT:
            continue
        for method in route.methods():
            if method == "get":
                continue
            response = call(browser, method, route.path(alpha_values))
            assert response.status_code == 403, (method, route.route, response.status_code)
            checked += 1
    assert checked >= 8
    alpha_job.refresh_from_db()
    assert alpha_job.state == "JOB_STATE_QUEUED"  # the cancel without a token did nothing


def test_the_admin_site_refuses_users_who_are_not_staff(client, cast):
    from django.contrib import admin

    client.force_login(cast["alice"])  # admin of a project, not of the platform
    urls = [reverse("admin:index")] + [
        reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_changelist") for model in admin.site._registry]
    for url in urls:
        response = client.get(url)
        assert response.status_code == 302 and response["Location"].startswith("/admin/login/"), url


def test_quota_limits_are_changed_by_staff_only(client, cast):
    client.force_login(cast["alice"])
    response = client.post("/quotas/", {"project": cast["alpha"].pk, "location": "us-central1",
                                        "metric": "custom_model_training_nvidia_a100_gpus", "limit": 99})
    assert response.status_code == 403
