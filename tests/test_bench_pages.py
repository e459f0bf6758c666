"""The page benchmark measures every page: a page route with no sample fails here, not silently."""

from django.test import Client

from bench.pages import NOT_PAGES, _samples, unsampled_routes
from tests.security.urlconf import routes


def test_every_page_route_has_a_sample_in_the_page_benchmark():
    assert unsampled_routes(_samples()) == []


def test_a_new_page_route_would_be_reported_as_unsampled():
    samples = [sample for sample in _samples() if sample.route != "slurm:priority"]
    assert unsampled_routes(samples) == [
        "slurm:priority (/slurm/projects/<str:project>/locations/<str:location>/clusters/<str:cluster>/priority)"]


def test_the_routes_the_benchmark_skips_exist_and_refuse_a_get(db, cast):
    """NOT_PAGES holds actions only: GET is not allowed on them (their parameters need not exist)."""
    names = {route.name: route for route in routes()}
    client = Client()
    client.force_login(cast["alice"])
    values = {"project": "alpha", "location": "us-central1", "job_id": "1", "tuning_job_id": "1",
              "pipeline_id": "1", "resource_id": "pr", "cluster": "c", "node": "n", "slurm_job_id": "1"}
    for name, reason in NOT_PAGES.items():
        if name == "healthz":
            continue  # the load balancer's JSON probe
        assert reason.startswith("an action (POST)")
        assert client.get(names[name].path(values)).status_code == 405, name
