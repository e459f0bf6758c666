"""Quotas at create and in the pass, SPOT preemption and the FLEX_START reservation, in the DB."""

import datetime as dt

import pytest

from tests.conftest import container_pool, job_body, later, wait_reasons
from trainhub.jobs import services, states
from trainhub.scheduling.models import Quota
from trainhub.scheduling.services import scheduler_pass

BASE = "/v1/projects/alpha/locations/us-central1/customJobs"
A100_ON_DEMAND = "custom_model_training_nvidia_a100_gpus"
A100_PREEMPTIBLE = "custom_model_training_preemptible_nvidia_a100_gpus"


def a100(replicas=1):
    return container_pool("a2-highgpu-1g", replicas=replicas, command=["sleep", "5"])


def submit(cast, now, *pools, **kwargs):
    return services.job_submit(project=cast["alpha"], location="us-central1", user=cast["uma"],
                               body=job_body(*pools, **kwargs), now=now)


@pytest.fixture
def a100_quota(cast):
    return Quota.objects.create(project=cast["alpha"], location="us-central1", metric=A100_ON_DEMAND, limit=1)


def test_a_request_above_the_limit_is_rejected_at_create_with_429(api, a100_quota):
    response = api("uma").post(BASE, job_body(a100(), a100()), format="json")
    assert response.status_code == 429
    error = response.json()["error"]
    assert error["status"] == "RESOURCE_EXHAUSTED"
    assert f"aiplatform.googleapis.com/{A100_ON_DEMAND}" in error["message"]
    assert "requested 2, limit 1" in error["message"]


@pytest.mark.parametrize("strategy", ["FLEX_START", "SPOT"])
def test_flex_start_and_spot_consume_the_preemptible_quota_not_the_on_demand_one(api, nodes, a100_quota, strategy):
    body = job_body(a100(), a100(), scheduling={"strategy": strategy})
    response = api("uma").post(BASE, body, format="json")
    assert response.status_code == 200
    from trainhub.jobs.models import CustomJob

    assert CustomJob.objects.get().quota_demand == {A100_PREEMPTIBLE: 2}


def test_a_job_that_fits_the_limit_but_not_current_usage_waits_queued(cast, nodes, now, a100_quota, settings):
    settings.TRAINHUB_STOCKOUT_RETRY_SECONDS = 10
    first = submit(cast, now, a100())
    second = submit(cast, later(now, 1), a100())
    scheduler_pass(now=later(now, 2))
    first.refresh_from_db()
    second.refresh_from_db()
    assert first.state == states.PENDING
    assert second.state == states.QUEUED
    assert wait_reasons(second)[0].startswith(f"Waiting for quota {A100_ON_DEMAND} in us-central1: 1 in use + 1")
    scheduler_pass(now=later(now, 30))  # waiting for quota is not a stockout
    second.refresh_from_db()
    assert second.state == states.QUEUED
    services.replica_exited(replica=first.replicas.get(), exit_code=0, now=later(now, 31))
    scheduler_pass(now=later(now, 32))
    second.refresh_from_db()
    assert second.state == states.PENDING


def test_a_job_short_of_quota_and_of_nodes_waits_and_retries_only_once_its_quota_frees(cast, nodes, now, settings,
                                                                                     a100_quota):
    """Vertex keeps a job short of quota QUEUED until the quota is there; only then does the stockout
    retry window run. Bench ``admission`` (Kueue's load) failed 1,449 of 1,500 20-GPU jobs as
    stockouts while they waited for their project's quota and no node of theirs was idle."""
    settings.TRAINHUB_STOCKOUT_RETRY_SECONDS = 10
    settings.TRAINHUB_NODE_HEARTBEAT_TTL_SECONDS = 20
    first = submit(cast, now, a100())
    other_project = services.job_submit(project=cast["beta"], location="us-central1", user=cast["mallory"],
                                        body=job_body(a100()), now=now)
    second = submit(cast, later(now, 1), a100())
    scheduler_pass(now=later(now, 2))
    assert {job.pk for job in (first, other_project)} == set(
        services.CustomJob.objects.filter(state=states.PENDING).values_list("pk", flat=True))
    scheduler_pass(now=later(now, 15))  # short of quota, and both A100 nodes are busy
    second.refresh_from_db()
    assert second.state == states.QUEUED
    assert any(reason.startswith(f"Waiting for quota {A100_ON_DEMAND}") for reason in wait_reasons(second))
    services.replica_exited(replica=first.replicas.get(), exit_code=0, now=later(now, 16))
    scheduler_pass(now=later(now, 40))  # quota free from here on; no node is alive (heartbeats at 0, TTL 20)
    scheduler_pass(now=later(now, 49))
    second.refresh_from_db()
    assert second.state == states.QUEUED
    scheduler_pass(now=later(now, 51))
    second.refresh_from_db()
    assert second.state == states.FAILED
    assert "(Retried for 11s.)" in second.error["message"]


def test_a_retry_mark_left_for_a_job_that_no_longer_waits_is_dropped_by_the_next_pass(cast, nodes, now,
                                                                                      a100_quota):
    """A job cancelled while a pass ran can get its mark written after the cancel removed it."""
    from trainhub.common.redis import get_redis
    from trainhub.scheduling import working_memory

    first = submit(cast, now, a100())
    scheduler_pass(now=later(now, 1))
    get_redis().hset(working_memory.RETRY_FROM, mapping={first.pk: "", 999_999: ""})
    scheduler_pass(now=later(now, 2))
    assert working_memory.retry_marks_read(get_redis()) == {}


def test_a_standard_job_preempts_a_running_spot_job(cast, nodes, now):
    spot_one = submit(cast, now, a100(), scheduling={"strategy": "SPOT"})
    spot_two = submit(cast, later(now, 1), a100(), scheduling={"strategy": "SPOT"})
    scheduler_pass(now=later(now, 2))
    for job in (spot_one, spot_two):
        services.replica_started(replica=job.replicas.get(), now=later(now, 2))
    standard = submit(cast, later(now, 3), a100())
    result = scheduler_pass(now=later(now, 4))
    assert result.preempted == 1
    for job in (spot_one, spot_two, standard):
        job.refresh_from_db()
    assert standard.state == states.PENDING
    assert spot_two.state == states.QUEUED  # the newest SPOT job is the one preempted
    assert spot_two.restart_count == 1
    assert spot_two.events.filter(message__startswith="Preempted (SPOT)").exists()
    assert spot_one.state == states.RUNNING


def test_spot_jobs_wait_for_idle_capacity_without_failing(cast, nodes, now, settings):
    settings.TRAINHUB_STOCKOUT_RETRY_SECONDS = 5
    settings.TRAINHUB_NODE_HEARTBEAT_TTL_SECONDS = 3600
    submit(cast, now, a100(), a100())
    spot = submit(cast, later(now, 1), a100(), scheduling={"strategy": "SPOT"})
    scheduler_pass(now=later(now, 100))
    spot.refresh_from_db()
    assert spot.state == states.QUEUED
    assert wait_reasons(spot)


def test_the_oldest_starving_flex_start_gang_holds_nodes_against_smaller_jobs(cast, nodes, now, settings):
    settings.TRAINHUB_FLEX_RESERVATION_AFTER_SECONDS = 60
    settings.TRAINHUB_NODE_HEARTBEAT_TTL_SECONDS = 3600
    blocker = submit(cast, now, a100())
    scheduler_pass(now=now)
    gang = submit(cast, later(now, 1), a100(), a100(), scheduling={"strategy": "FLEX_START"})
    small = submit(cast, later(now, 100), a100())
    scheduler_pass(now=later(now, 101))
    small.refresh_from_db()
    gang.refresh_from_db()
    assert small.state == states.QUEUED  # one A100 is idle, but it is held for the gang
    until = f"{gang.create_time + dt.timedelta(days=1):%Y-%m-%d %H:%M} UTC at most"  # maxWaitDuration unset: 1 day
    assert (f"Waiting: 1 node(s) of pool a100 are reserved for FLEX_START job {gang.display_name} ({gang.job_id}) "
            f"until {until}.") in wait_reasons(small)
    assert any(r.startswith("Holding 1 node(s) of pool a100 (a100-") and f"until {until}" in r
               for r in wait_reasons(gang))
    services.replica_exited(replica=blocker.replicas.get(), exit_code=0, now=later(now, 102))
    scheduler_pass(now=later(now, 103))
    gang.refresh_from_db()
    assert gang.state == states.PENDING and gang.replicas.count() == 2


def test_before_the_threshold_small_jobs_may_pass_a_waiting_gang(cast, nodes, now, settings):
    settings.TRAINHUB_FLEX_RESERVATION_AFTER_SECONDS = 600
    settings.TRAINHUB_NODE_HEARTBEAT_TTL_SECONDS = 3600
    submit(cast, now, a100())
    scheduler_pass(now=now)
    submit(cast, later(now, 1), a100(), a100(), scheduling={"strategy": "FLEX_START"})
    small = submit(cast, later(now, 2), a100())
    scheduler_pass(now=later(now, 3))
    small.refresh_from_db()
    assert small.state == states.PENDING


def test_a_flex_start_gang_the_inventory_can_no_longer_hold_reserves_nothing(cast, nodes, now, settings):
    """Accepted while the pool had 2 A100 nodes; one was removed since: it can never start, so it
    must not hold the other against jobs that can (issue 18)."""
    from trainhub.inventory.models import Node

    settings.TRAINHUB_FLEX_RESERVATION_AFTER_SECONDS = 60
    settings.TRAINHUB_NODE_HEARTBEAT_TTL_SECONDS = 3600
    gang = submit(cast, now, a100(), a100(), scheduling={"strategy": "FLEX_START"})
    Node.objects.filter(name="a100-1").delete()
    small = submit(cast, later(now, 100), a100())
    scheduler_pass(now=later(now, 101))
    small.refresh_from_db()
    assert small.state == states.PENDING  # the idle A100 was not held for a gang that cannot fit
    assert not any("Holding" in r for r in wait_reasons(gang))


@pytest.mark.parametrize("state", ["DOWN", "DRAIN"])
def test_a_flex_start_gang_whose_nodes_went_down_or_drained_reserves_nothing_and_says_why(
        cast, nodes, now, settings, state):
    """Accepted while both A100 nodes were up; one went DOWN or was drained since: the gang cannot
    start on what is usable, so the idle A100 goes to a job that can, and the gang's reasons say
    why it holds nothing; it keeps waiting (the node may return) until its maxWaitDuration."""
    from trainhub.inventory.models import Node

    settings.TRAINHUB_FLEX_RESERVATION_AFTER_SECONDS = 60
    settings.TRAINHUB_NODE_HEARTBEAT_TTL_SECONDS = 3600
    gang = submit(cast, now, a100(), a100(), scheduling={"strategy": "FLEX_START"})
    Node.objects.filter(name="a100-1").update(state=state)
    small = submit(cast, later(now, 100), a100())
    scheduler_pass(now=later(now, 101))
    small.refresh_from_db()
    gang.refresh_from_db()
    assert small.state == states.PENDING
    assert gang.state in states.WAITING
    assert any(r.startswith("Holds no nodes: the usable nodes of its location") and "needs 2, 1 usable" in r
               for r in wait_reasons(gang))
    assert not any("reserved for FLEX_START" in r for r in wait_reasons(gang))


def test_a_job_short_of_quota_past_the_threshold_holds_it_and_younger_jobs_say_why_they_wait(
        api, cast, nodes, now, settings):
    settings.TRAINHUB_QUOTA_HOLD_AFTER_SECONDS = 60
    Quota.objects.create(project=cast["alpha"], location="us-central1", metric=A100_ON_DEMAND, limit=2)
    running = submit(cast, now, a100())
    scheduler_pass(now=later(now, 1))
    big = submit(cast, later(now, 2), a100(), a100(), name="big")
    younger = submit(cast, later(now, 3), a100(), name="younger")  # it would fit: 1 in use + 1 <= 2
    scheduler_pass(now=later(now, 100))
    for job in (running, big, younger):
        job.refresh_from_db()
    assert (big.state, younger.state) == (states.QUEUED, states.QUEUED)
    assert any(reason.startswith(f"Holding quota {A100_ON_DEMAND}: it has waited over 60s")
               for reason in wait_reasons(big))
    held = f"Waiting: this project's quota is held for older job big ({big.job_id}), which has waited over 60s"
    reasons = api("uma").get(f"{BASE}/{younger.job_id}").json()["trainhubStatus"]["waitReasons"]
    assert any(reason.startswith(held) for reason in reasons), reasons
