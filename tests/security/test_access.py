"""Every API endpoint and page refuses anonymous callers, and another project's job is invisible."""

import pytest

from tests.conftest import container_pool, job_body
from trainhub.jobs import services


@pytest.fixture
def alpha_job(cast):
    return services.job_submit(project=cast["alpha"], location="us-central1", user=cast["uma"],
                               body=job_body(container_pool(), name="alpha-secret-experiment"))


def api_paths(job):
    base = "/v1/projects/alpha/locations/us-central1/customJobs"
    return [("get", base), ("post", base), ("get", f"{base}/{job.job_id}"), ("delete", f"{base}/{job.job_id}"),
            ("post", f"{base}/{job.job_id}:cancel"), ("get", f"{base}/{job.job_id}/logs"), ("get", "/v1/me"),
            ("get", "/v1/scheduler:status")]


def page_paths(job):
    detail = f"/projects/alpha/locations/us-central1/jobs/{job.job_id}"
    return ["/", "/jobs/rows", "/jobs/new", "/projects/alpha/locations/us-central1/jobs/new", f"{detail}/",
            f"{detail}/status", f"{detail}/logs", "/nodes/", "/nodes/pools", "/nodes/rows", "/quotas/", "/account/token",
            "/dashboards/", "/dashboards/kpis", "/dashboards/charts/queue-depth",
            "/dashboards/charts/queue-depth.csv"]


def test_every_api_endpoint_refuses_anonymous_callers(client, alpha_job):
    for method, path in api_paths(alpha_job):
        response = getattr(client, method)(path, content_type="application/json")
        assert response.status_code == 401, (method, path)
        assert response.json()["error"]["status"] == "UNAUTHENTICATED"


def test_every_page_sends_anonymous_visitors_to_login(client, alpha_job):
    for path in page_paths(alpha_job):
        response = client.get(path)
        assert response.status_code == 302 and response["Location"].startswith("/login/"), path


def test_another_projects_job_is_not_found_anywhere(api, client, cast, alpha_job):
    for method, path in api_paths(alpha_job):
        if "customJobs/" in path:
            assert getattr(api("mallory"), method)(path, format="json").status_code == 404, (method, path)
    client.force_login(cast["mallory"])
    for path in page_paths(alpha_job):
        if alpha_job.job_id in path:
            assert client.get(path).status_code == 404, path
    assert alpha_job.display_name not in client.get("/").content.decode()


def test_cancel_from_a_page_needs_a_csrf_token(cast, alpha_job):
    from django.test import Client

    browser = Client(enforce_csrf_checks=True)
    browser.force_login(cast["uma"])
    response = browser.post(f"/projects/alpha/locations/us-central1/jobs/{alpha_job.job_id}/cancel")
    assert response.status_code == 403
    alpha_job.refresh_from_db()
    assert alpha_job.state == "JOB_STATE_QUEUED"


def test_admin_pages_refuse_non_staff(client, cast):
    client.force_login(cast["alice"])
    assert client.get("/admin/").status_code == 302
