import datetime as dt

import pytest

from tests.conftest import container_pool, job_body, later
from trainhub.jobs import services
from trainhub.scheduling.estimate import estimate_waits
from trainhub.scheduling.services import scheduler_pass

NOW = dt.datetime(2026, 12, 1, 12, 0, tzinfo=dt.timezone.utc)
A100 = ("a2-highgpu-1g", "NVIDIA_TESLA_A100")
L4 = ("g2-standard-12", "NVIDIA_L4")


def at(minutes):
    return NOW + dt.timedelta(minutes=minutes)


def test_jobs_ahead_take_their_share_of_releases_first():
    waits = estimate_waits([("a", {A100: 1}), ("b", {A100: 2}), ("c", {L4: 1})], free_now={L4: 1},
                           busy_until={A100: [at(30), at(10), at(60)]}, now=NOW)
    assert waits["a"].position == 1 and waits["a"].estimated_start == at(10)
    assert waits["b"].position == 2 and waits["b"].estimated_start == at(60)
    assert waits["c"].position == 1 and waits["c"].estimated_start == NOW  # other resources: not behind a or b


def test_a_job_larger_than_the_inventory_has_no_estimate():
    waits = estimate_waits([("big", {A100: 5})], free_now={A100: 1}, busy_until={A100: [at(5)]}, now=NOW)
    assert waits["big"].estimated_start is None


A100_POOL = container_pool("a2-highgpu-1g", command=["sleep", "5"])
FLEX_START_HOUR = job_body(A100_POOL, scheduling={"strategy": "FLEX_START", "maxWaitDuration": "3600s"})


@pytest.fixture
def both_a100s_busy_for_ten_minutes(cast, nodes, now):
    running = services.job_submit(project=cast["alpha"], location="us-central1", user=cast["uma"], now=now,
                                  body=job_body(A100_POOL, A100_POOL, scheduling={"timeout": "600s"}))
    scheduler_pass(now=now)
    for replica in running.replicas.all():
        services.replica_started(replica=replica, now=now)


def test_waiting_jobs_carry_position_estimate_and_flex_deadline_in_the_api(api, now, both_a100s_busy_for_ten_minutes):
    response = api("uma").post("/v1/projects/alpha/locations/us-central1/customJobs", FLEX_START_HOUR, format="json")
    scheduler_pass(now=later(now, 1))
    status = api("uma").get("/v1/" + response.json()["name"]).json()["trainhubStatus"]
    assert status["queuePosition"] == 1
    assert status["estimatedStartTime"] == (now + dt.timedelta(seconds=600)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    assert status["flexStartDeadline"]
    assert status["waitReasons"][0].startswith("Waiting for capacity: 1 more a2-highgpu-1g")


def test_the_job_page_shows_the_same_position_estimate_and_deadline(client, cast, now, both_a100s_busy_for_ten_minutes):
    waiting = services.job_submit(project=cast["alpha"], location="us-central1", user=cast["uma"], now=now,
                                  body=FLEX_START_HOUR)
    scheduler_pass(now=later(now, 1))
    client.force_login(cast["uma"])
    page = client.get(f"/projects/alpha/locations/us-central1/jobs/{waiting.job_id}/").content.decode()
    start, deadline = now + dt.timedelta(seconds=600), now + dt.timedelta(seconds=3600)
    assert "Why it waits</strong> · position 1 among jobs asking for the same nodes" in page
    assert "Waiting for capacity: 1 more a2-highgpu-1g" in page
    assert f'Estimated start: <time datetime="{start.isoformat()}"' in page
    assert f'gives up at <time datetime="{deadline.isoformat()}"' in page
