"""A job waiting behind nodes held for a FLEX_START gang says so wherever its reasons show: the
REST resource's trainhubStatus.waitReasons, the job page and the CLI's describe (issue 18)."""

import pytest

from tests.conftest import container_pool, job_body, later
from trainhub.jobs import services
from trainhub.scheduling.services import scheduler_pass


@pytest.fixture
def blocked(cast, now, held_a100):
    small = services.job_submit(project=cast["alpha"], location="us-central1", user=cast["uma"],
                                now=later(now, 102), body=job_body(container_pool("a2-highgpu-1g"), name="small"))
    scheduler_pass(now=later(now, 103))
    return small


def expected(gang) -> str:
    until = f"{gang.flex_start_deadline:%Y-%m-%d %H:%M} UTC at most"
    return f"Waiting: 1 node(s) of pool a100 are reserved for FLEX_START job big-gang ({gang.job_id}) until {until}."


def test_the_rest_resource_names_the_reserving_gang_and_until_when(api, held_a100, blocked):
    status = api("uma").get(f"/v1/projects/alpha/locations/us-central1/customJobs/{blocked.job_id}").json()
    assert expected(held_a100) in status["trainhubStatus"]["waitReasons"]


def test_the_job_page_names_the_reserving_gang_and_until_when(client, cast, held_a100, blocked):
    client.force_login(cast["uma"])
    page = client.get(f"/projects/alpha/locations/us-central1/jobs/{blocked.job_id}/").content.decode()
    assert f"<li>{expected(held_a100)}</li>" in page


def test_the_reserving_gang_says_what_it_holds_since_and_until_when(cast, now, held_a100):
    from tests.conftest import wait_reasons

    until = f"{held_a100.flex_start_deadline:%Y-%m-%d %H:%M} UTC at most"
    since = f"{later(now, 101):%Y-%m-%d %H:%M} UTC"
    assert (f"Holding 1 node(s) of pool a100 (a100-1) for this FLEX_START gang since {since} so smaller jobs "
            f"cannot starve it, until {until}.") in wait_reasons(held_a100)
    scheduler_pass(now=later(now, 500))  # a later pass keeps the first pass's "since"
    assert any(f"since {since}" in reason for reason in wait_reasons(held_a100))
