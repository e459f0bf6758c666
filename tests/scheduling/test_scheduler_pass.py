"""The scheduler pass against the database: allocation, waiting, stockout, flex-start deadlines,
timeouts, lost nodes, and the Redis leader lock."""


import pytest
from django.db import IntegrityError, transaction
from redis.exceptions import RedisError

from tests.conftest import container_pool, job_body, later, wait_reasons
from trainhub.inventory.models import Node, NodeState
from trainhub.jobs import services, states
from trainhub.jobs.models import Replica
from trainhub.scheduling import working_memory
from trainhub.scheduling.leader import leader_lock
from trainhub.scheduling.services import nodes_sweep_heartbeats, scheduler_pass


def submit(cast, now, *pools, **kwargs):
    return services.job_submit(project=cast["alpha"], location="us-central1", user=cast["uma"],
                               body=job_body(*pools, **kwargs), now=now)


def a100(replicas=1):
    return container_pool("a2-highgpu-1g", replicas=replicas, command=["sleep", "5"])


def test_a_placed_job_is_pending_with_every_replica_on_its_own_node(cast, nodes, now):
    job = submit(cast, now, container_pool(), container_pool(replicas=2))
    result = scheduler_pass(now=now)
    job.refresh_from_db()
    assert result.placed == 1
    assert job.state == states.PENDING
    replicas = list(job.replicas.all())
    assert len(replicas) == 3
    assert len({r.node_id for r in replicas}) == 3
    assert all(r.node.pool.machine_type == "n1-standard-4" for r in replicas)


def test_gpu_indices_follow_the_requested_count(cast, nodes, now):
    job = submit(cast, now, container_pool(accelerator="NVIDIA_TESLA_T4", count=2))
    scheduler_pass(now=now)
    assert job.replicas.get().gpu_indices == [0, 1]


def test_a_gang_that_does_not_fit_waits_and_says_why(cast, nodes, now):
    big = submit(cast, now, a100(), a100(replicas=2))
    small = submit(cast, later(now, 1), a100())
    scheduler_pass(now=later(now, 2))
    big.refresh_from_db()
    small.refresh_from_db()
    assert big.state == states.QUEUED
    assert not big.replicas.exists()
    assert wait_reasons(big) == ["Waiting for capacity: 1 more a2-highgpu-1g node(s) with 1 x NVIDIA_TESLA_A100: "
                                "needs 3, 2 free."]
    assert small.state == states.PENDING


def test_standard_jobs_fail_with_a_stockout_after_the_retry_window(cast, nodes, now, settings):
    settings.TRAINHUB_STOCKOUT_RETRY_SECONDS = 60
    settings.TRAINHUB_NODE_HEARTBEAT_TTL_SECONDS = 3600
    job = submit(cast, now, a100(), a100(replicas=5))
    scheduler_pass(now=later(now, 59))
    job.refresh_from_db()
    assert job.state == states.QUEUED
    scheduler_pass(now=later(now, 61))
    job.refresh_from_db()
    assert job.state == states.FAILED
    assert job.error["code"] == 8
    assert job.error["message"].startswith("Resources are insufficient in region: us-central1 .")
    assert "needs 6, 2 free" in job.error["message"]


def test_flex_start_waits_in_pending_until_max_wait_then_fails(cast, nodes, offline_a100, now):
    job = submit(cast, now, a100(), a100(replicas=5), scheduling={"strategy": "FLEX_START", "maxWaitDuration": "600s"})
    scheduler_pass(now=later(now, 599))
    job.refresh_from_db()
    assert job.state == states.PENDING
    assert wait_reasons(job)
    scheduler_pass(now=later(now, 600))
    job.refresh_from_db()
    assert job.state == states.FAILED
    assert "waited 600s" in job.error["message"]
    assert "a2-highgpu-1g" in job.error["message"]


def test_flex_start_with_zero_max_wait_waits_forever(cast, nodes, offline_a100, now):
    job = submit(cast, now, a100(replicas=1), a100(replicas=5), scheduling={"strategy": "FLEX_START",
                                                                            "maxWaitDuration": "0s"})
    scheduler_pass(now=later(now, 400 * 86400))
    job.refresh_from_db()
    assert job.state == states.PENDING


def test_nodes_without_a_live_agent_get_nothing(cast, nodes, now, settings):
    job = submit(cast, now, a100())
    scheduler_pass(now=later(now, settings.TRAINHUB_NODE_HEARTBEAT_TTL_SECONDS + 1))
    job.refresh_from_db()
    assert job.state == states.QUEUED


def test_drained_nodes_get_nothing(cast, nodes, now):
    Node.objects.filter(pool__name="a100").update(state=NodeState.DRAIN)
    job = submit(cast, now, a100())
    scheduler_pass(now=now)
    job.refresh_from_db()
    assert job.state == states.QUEUED


def test_a_batch_with_one_conflicting_gang_still_places_the_others(cast, nodes, now):
    first, second = submit(cast, now, a100()), submit(cast, now, a100())
    node_ids = list(Node.objects.filter(pool__name="a100").values_list("pk", flat=True))
    services.jobs_place(assignments={first.pk: {(0, 0): (node_ids[0], [0])}}, now=now)
    third = submit(cast, now, a100())
    placed = services.jobs_place(assignments={second.pk: {(0, 0): (node_ids[0], [0])},  # taken meanwhile
                                              third.pk: {(0, 0): (node_ids[1], [0])}}, now=now)
    assert placed == {third.pk}
    second.refresh_from_db()
    assert second.state == states.QUEUED and not second.replicas.exists()


def test_the_database_refuses_two_active_replicas_on_one_node(cast, nodes, now):
    first = submit(cast, now, a100())
    second = submit(cast, now, a100())
    scheduler_pass(now=now)
    node = first.replicas.get().node
    with pytest.raises(IntegrityError), transaction.atomic():
        Replica.objects.create(job=second, pool_index=0, replica_index=0, node=node, attempt=5, assigned_at=now)


def test_placing_an_already_placed_job_again_is_refused(cast, nodes, now):
    job = submit(cast, now, a100())
    scheduler_pass(now=now)
    free_node = Node.objects.filter(pool__name="a100").exclude(replicas__active=True).first()
    assert services.jobs_place(assignments={job.pk: {(0, 0): (free_node.pk, [0])}}, now=now) == set()
    assert job.replicas.count() == 1


def test_a_running_job_past_its_timeout_fails(cast, nodes, now):
    job = submit(cast, now, a100(), scheduling={"timeout": "30s"})
    scheduler_pass(now=now)
    replica = job.replicas.get()
    services.replica_started(replica=replica, now=now)
    scheduler_pass(now=later(now, 29))
    job.refresh_from_db()
    assert job.state == states.RUNNING
    scheduler_pass(now=later(now, 31))
    job.refresh_from_db()
    assert job.state == states.FAILED
    assert job.error["code"] == 4
    assert job.replicas.get().stop_requested


def test_a_node_whose_heartbeat_expires_goes_down_and_fails_its_job(cast, nodes, now, settings):
    job = submit(cast, now, a100())
    scheduler_pass(now=now)
    services.replica_started(replica=job.replicas.get(), now=now)
    nodes_sweep_heartbeats(now=later(now, settings.TRAINHUB_NODE_HEARTBEAT_TTL_SECONDS + 1))
    job.refresh_from_db()
    node = job.replicas.get().node
    assert node.state == NodeState.DOWN
    assert "heartbeat" in node.state_reason
    assert job.state == states.FAILED
    assert "lost" in job.error["message"]


def test_a_lost_node_requeues_the_job_when_restart_on_worker_restart_is_set(cast, nodes, now, settings,
                                                                            django_capture_on_commit_callbacks):
    job = submit(cast, now, a100(), scheduling={"restartJobOnWorkerRestart": True})
    scheduler_pass(now=now)
    services.replica_started(replica=job.replicas.get(), now=now)
    with django_capture_on_commit_callbacks(execute=True):
        nodes_sweep_heartbeats(now=later(now, settings.TRAINHUB_NODE_HEARTBEAT_TTL_SECONDS + 1))
    job.refresh_from_db()
    assert job.state == states.QUEUED
    assert job.restart_count == 1
    assert not job.replicas.filter(active=True).exists()


def test_only_one_process_leads_a_pass(redis_client):
    with leader_lock(redis_client) as first:
        with leader_lock(redis_client) as second:
            assert first is True and second is False
    with leader_lock(redis_client) as again:
        assert again is True


def test_a_dead_leaders_lock_expires(redis_client):
    redis_client.set("trainhub:scheduler:leader", "someone-else", px=50)
    import time

    deadline = time.monotonic() + 2
    while redis_client.exists("trainhub:scheduler:leader") and time.monotonic() < deadline:
        time.sleep(0.01)
    with leader_lock(redis_client) as leading:
        assert leading


def test_the_pass_task_runs_under_the_lock(cast, nodes, now, redis_client):
    from trainhub.scheduling.tasks import scheduler_pass as task

    job = submit(cast, now, a100())
    redis_client.set("trainhub:scheduler:leader", "other-worker", px=10_000)
    task.apply()
    job.refresh_from_db()
    assert job.state == states.QUEUED  # another worker holds the lock: this one did nothing
    redis_client.delete("trainhub:scheduler:leader")
    task.apply()
    job.refresh_from_db()
    assert job.state == states.PENDING


def test_marking_flex_jobs_waiting_never_overwrites_a_job_cancelled_during_the_pass(cast, nodes, offline_a100, now):
    job = submit(cast, now, a100(), a100(replicas=5), scheduling={"strategy": "FLEX_START"})
    services.job_cancel(job=job, now=now)
    assert services.jobs_mark_flex_waiting(pks=[job.pk], now=later(now, 1)) == 0
    job.refresh_from_db()
    assert job.state == states.CANCELLED


def test_flex_start_jobs_move_to_pending_a_bounded_number_per_pass(cast, nodes, offline_a100, now, settings):
    settings.TRAINHUB_FLEX_PENDING_PER_PASS = 1
    flex = {"strategy": "FLEX_START"}
    older = submit(cast, now, a100(), a100(replicas=5), scheduling=flex)
    newer = submit(cast, later(now, 1), a100(), a100(replicas=5), scheduling=flex)
    scheduler_pass(now=later(now, 2))
    older.refresh_from_db()
    newer.refresh_from_db()
    assert (older.state, newer.state) == (states.PENDING, states.QUEUED)
    assert wait_reasons(newer)  # explained all the same
    scheduler_pass(now=later(now, 3))
    newer.refresh_from_db()
    assert newer.state == states.PENDING


def test_the_garbage_collector_runs_again_after_a_pass_even_one_that_fails(cast, nodes, now, monkeypatch):
    import gc

    submit(cast, now, a100())

    def broken(**kwargs):
        raise RuntimeError("database went away")

    monkeypatch.setattr(services, "jobs_place", broken)
    with pytest.raises(RuntimeError):
        scheduler_pass(now=now)
    assert gc.isenabled()


def test_a_node_whose_redis_heartbeat_is_fresh_stays_up_though_its_database_write_lagged(
        cast, nodes, now, settings, redis_client):
    ttl = settings.TRAINHUB_NODE_HEARTBEAT_TTL_SECONDS
    node = Node.objects.filter(pool__name="a100").first()
    working_memory.heartbeat(redis_client, [node.pk], later(now, ttl), ttl)  # the key was written, the row was not
    assert nodes_sweep_heartbeats(now=later(now, ttl + 1)) == len(Node.objects.all()) - 1
    node.refresh_from_db()
    assert node.state == NodeState.UP
    assert nodes_sweep_heartbeats(now=later(now, 2 * ttl + 1)) == 1  # now both witnesses are silent


def test_without_redis_the_database_alone_decides(cast, nodes, now, settings, monkeypatch):
    def unreachable():
        raise RedisError("connection refused")

    monkeypatch.setattr("trainhub.scheduling.services.get_redis", unreachable)
    assert nodes_sweep_heartbeats(now=later(now, settings.TRAINHUB_NODE_HEARTBEAT_TTL_SECONDS + 1)) == \
        len(Node.objects.all())
