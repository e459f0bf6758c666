"""Every route of the URL conf (tests/security/urlconf.py) refuses anonymous callers, hides another
project's resources (404), and refuses a session POST without a CSRF token; the admin site and
admin-only actions refuse non-staff users."""

from django.test import Client
from django.urls import reverse

from tests.security.conftest import SECRET
from tests.security.urlconf import CSRF_EXEMPT, PUBLIC, protected_routes, routes


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
