import datetime as dt

import pytest

from tests.conftest import container_pool, job_body, later
from trainhub.jobs import services
from trainhub.scheduling.estimate import estimate_waits, quota_frees_at, quota_waits
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


def test_quota_frees_when_enough_holders_reach_their_timeout():
    releases = [(at(30), 2), (at(10), 1), (at(60), 4)]
    assert quota_frees_at(limit=4, in_use=4, requested=2, releases=releases, now=NOW) == at(30)
    assert quota_frees_at(limit=4, in_use=4, requested=1, releases=releases, now=NOW) == at(10)
    assert quota_frees_at(limit=4, in_use=1, requested=2, releases=releases, now=NOW) == NOW  # room already


def test_quota_that_no_holders_end_frees_has_no_estimate():
    # 3 GPUs held by a persistent resource (no release): a job ending frees 1, never the 2 needed
    assert quota_frees_at(limit=4, in_use=4, requested=2, releases=[(at(10), 1)], now=NOW) is None
    assert quota_frees_at(limit=1, in_use=0, requested=2, releases=[], now=NOW) is None  # above the limit itself


def test_a_holder_past_its_timeout_frees_the_quota_now_not_in_the_past():
    assert quota_frees_at(limit=1, in_use=1, requested=1, releases=[(at(-5), 1)], now=NOW) == NOW


def test_jobs_ahead_short_of_the_same_quota_take_the_freed_gpus_first():
    metric = "custom_model_training_nvidia_a100_gpus"
    quota = ("p", "us-central1", metric)
    other = ("q", "us-central1", metric)
    waits = quota_waits([("a", "p", "us-central1", {metric: 1}), ("b", "p", "us-central1", {metric: 1}),
                         ("c", "q", "us-central1", {metric: 1})],
                        limits={quota: 2, other: 1}, usage={quota: 2, other: 1},
                        releases={quota: [(at(20), 1), (at(40), 1)], other: [(at(5), 1)]}, now=NOW)
    assert waits == {"a": at(20), "b": at(40), "c": at(5)}


def test_a_job_blocked_only_by_quota_is_estimated_from_the_holders_timeout_not_now(api, cast, nodes, now):
    """Two A100 nodes, limit 1 GPU: the second job has a free node but waits for the first job's
    quota, which it holds until its 600 s timeout at most."""
    from trainhub.scheduling.models import Quota
    from trainhub.scheduling.selectors import wait_explanation

    Quota.objects.create(project=cast["alpha"], location="us-central1",
                         metric="custom_model_training_nvidia_a100_gpus", limit=1)
    holder = services.job_submit(project=cast["alpha"], location="us-central1", user=cast["uma"], now=now,
                                 body=job_body(A100_POOL, scheduling={"timeout": "600s"}))
    scheduler_pass(now=now)
    for replica in holder.replicas.all():
        services.replica_started(replica=replica, now=later(now, 1))
    blocked = services.job_submit(project=cast["alpha"], location="us-central1", user=cast["uma"],
                                  now=later(now, 2), body=job_body(A100_POOL))
    scheduler_pass(now=later(now, 3))
    wait = wait_explanation(job_pk=blocked.pk)
    assert wait.reasons[0].startswith("Waiting for quota")
    assert wait.estimated_start == (later(now, 601)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
