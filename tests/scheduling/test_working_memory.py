"""Redis as the scheduler's working memory: the queue, FLEX_START deadlines, heartbeats and wait
explanations live there; losing all of it (FLUSHALL, restart, a crash mid-pass) loses nothing."""

import pytest
from redis.exceptions import ConnectionError as RedisConnectionError

from tests.conftest import container_pool, job_body, later, wait_reasons
from trainhub.inventory.models import Node
from trainhub.inventory.services import node_heartbeat
from trainhub.jobs import services, states
from trainhub.jobs.models import CustomJob, Replica
from trainhub.scheduling import working_memory
from trainhub.scheduling.selectors import scheduler_snapshot
from trainhub.scheduling.services import scheduler_pass, working_memory_reconcile


def a100(replicas=1):
    return container_pool("a2-highgpu-1g", replicas=replicas, command=["sleep", "5"])


def submit(cast, now, *pools, **kwargs):
    return services.job_submit(project=cast["alpha"], location="us-central1", user=cast["uma"],
                               body=job_body(*pools, **kwargs), now=now)


def test_submitted_jobs_are_queued_in_redis_and_leave_it_when_placed(cast, nodes, now, redis_client):
    scheduler_pass(now=now)  # warm
    job = submit(cast, now, a100())
    assert working_memory.pending_ids(redis_client) == [job.pk]
    scheduler_pass(now=later(now, 1))
    assert working_memory.pending_ids(redis_client) == []
    assert job.replicas.count() == 1


def test_flushall_mid_load_loses_nothing_and_allocates_nothing_twice(cast, nodes, now, redis_client):
    placed = submit(cast, now, a100())
    scheduler_pass(now=now)
    waiting = [submit(cast, later(now, i), a100(), a100()) for i in range(1, 4)]
    redis_client.flushall()
    scheduler_pass(now=later(now, 5))
    assert working_memory.is_warm(redis_client)
    assert set(working_memory.pending_ids(redis_client)) == {job.pk for job in waiting}
    assert Replica.objects.filter(job=placed, active=True).count() == 1
    assert wait_reasons(waiting[0])  # explanations recomputed by the pass after the rebuild
    nodes_used = list(Replica.objects.filter(active=True).values_list("node_id", flat=True))
    assert len(nodes_used) == len(set(nodes_used))


def test_a_flex_start_deadline_is_kept_in_a_sorted_set_and_swept(cast, nodes, offline_a100, now, redis_client):
    scheduler_pass(now=now)
    job = submit(cast, now, a100(), a100(replicas=3), scheduling={"strategy": "FLEX_START", "maxWaitDuration": "60s"})
    assert redis_client.zscore(working_memory.FLEX_DEADLINES, job.pk) == later(now, 60).timestamp()
    from trainhub.scheduling.services import flex_start_deadline_sweep

    assert flex_start_deadline_sweep(now=later(now, 59)) == 0
    assert flex_start_deadline_sweep(now=later(now, 60)) == 1
    job.refresh_from_db()
    assert job.state == states.FAILED
    assert redis_client.zscore(working_memory.FLEX_DEADLINES, job.pk) is None


def test_queue_entries_of_finished_or_deleted_jobs_are_forgotten(cast, nodes, now, redis_client):
    scheduler_pass(now=now)
    job = submit(cast, now, a100(), a100(replicas=5))
    services.job_cancel(job=job, now=now)
    redis_client.zadd(working_memory.PENDING, {999_999: now.timestamp()})  # a submission not committed yet
    scheduler_pass(now=later(now, 1))
    assert working_memory.pending_ids(redis_client) == [999_999]
    scheduler_pass(now=later(now, 301))  # never committed: dropped after the grace period
    assert working_memory.pending_ids(redis_client) == []


def test_a_crash_mid_pass_neither_loses_nor_double_places_a_job(cast, nodes, now, monkeypatch, redis_client):
    first = submit(cast, now, a100())
    second = submit(cast, later(now, 1), a100())
    third = submit(cast, later(now, 1), a100(), a100(replicas=4))
    real_record = services.jobs_mark_flex_waiting

    def killed_after_placing(**kwargs):
        raise RuntimeError("worker killed after writing the allocations")

    monkeypatch.setattr(services, "jobs_mark_flex_waiting", killed_after_placing)
    with pytest.raises(RuntimeError):
        scheduler_pass(now=later(now, 2))
    monkeypatch.setattr(services, "jobs_mark_flex_waiting", real_record)
    assert set(working_memory.pending_ids(redis_client)) >= {third.pk}  # the crash lost no queued job
    scheduler_pass(now=later(now, 3))
    for job in (first, second):
        job.refresh_from_db()
        assert job.state == states.PENDING
        assert job.replicas.filter(active=True).count() == 1
    assert working_memory.pending_ids(redis_client) == [third.pk]


def test_resync_adds_what_a_failed_redis_write_missed_without_dropping_anything(cast, nodes, now, redis_client):
    scheduler_pass(now=now)
    job = submit(cast, now, a100(), a100(replicas=5))
    redis_client.zrem(working_memory.PENDING, job.pk)
    redis_client.zadd(working_memory.PENDING, {424242: now.timestamp()})
    working_memory_reconcile(now=now, rebuild=False)
    assert set(working_memory.pending_ids(redis_client)) == {job.pk, 424242}


def test_heartbeats_are_ttl_keys_rebuilt_from_the_database(cast, nodes, now, redis_client, settings,
                                                           django_capture_on_commit_callbacks):
    node = Node.objects.first()
    with django_capture_on_commit_callbacks(execute=True):
        node_heartbeat(node_ids=[node.pk], now=now)
    key = f"{working_memory.HEARTBEAT_PREFIX}{node.pk}"
    assert 0 < redis_client.ttl(key) <= settings.TRAINHUB_NODE_HEARTBEAT_TTL_SECONDS
    redis_client.flushall()
    working_memory_reconcile(now=later(now, 10))
    assert 0 < redis_client.ttl(key) <= settings.TRAINHUB_NODE_HEARTBEAT_TTL_SECONDS - 10


def test_the_pass_leaves_a_snapshot_for_live_pages(cast, nodes, now):
    submit(cast, now, a100())
    scheduler_pass(now=now)
    snapshot = scheduler_snapshot()
    assert snapshot["lastPass"]["placed"] == "1"
    assert snapshot["freeNodes"] == len(Node.objects.all()) - 1


def test_the_api_still_answers_when_redis_is_down(api, cast, monkeypatch):
    job = submit(cast, None, a100())

    def down():
        raise RedisConnectionError("redis is down")

    monkeypatch.setattr("trainhub.scheduling.selectors.get_redis", down)
    response = api("vic").get(f"/v1/{job.resource_name}")
    assert response.status_code == 200
    assert response.json()["trainhubStatus"]["waitReasons"] == []
    assert api("vic").get("/v1/projects/alpha/locations/us-central1/customJobs").status_code == 200
    assert CustomJob.objects.count() == 1


def test_the_status_endpoint_serves_the_snapshot_and_needs_login(api, client, cast, nodes, now):
    submit(cast, now, a100())
    scheduler_pass(now=now)
    body = api("vic").get("/v1/scheduler:status").json()
    assert body["lastPass"]["placed"] == "1" and body["pendingJobs"] == 0
    assert client.get("/v1/scheduler:status").status_code == 401


def test_a_pass_reads_missing_job_details_from_the_database_and_stores_them_back(cast, nodes, now, redis_client):
    scheduler_pass(now=now)
    big = submit(cast, now, a100(), a100(replicas=5))
    small = submit(cast, later(now, 1), a100())
    redis_client.delete(working_memory.DETAILS)  # as after a resync, which queues jobs without their details
    scheduler_pass(now=later(now, 2))
    small.refresh_from_db()
    assert small.state == states.PENDING
    assert wait_reasons(big) == ["Waiting for capacity: 4 more a2-highgpu-1g node(s) with 1 x NVIDIA_TESLA_A100: "
                                 "needs 6, 2 free."]
    [(pk, submitted, gang)] = working_memory.pending_read(redis_client)
    assert (pk, submitted) == (big.pk, now.timestamp())
    assert [(pool.index, pool.replica_count) for pool in gang.pools] == [(0, 1), (1, 5)]

