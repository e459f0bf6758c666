"""The sampler behind the dashboards: what one minute's samples hold, and pruning."""

import datetime as dt

import pytest

from tests.conftest import container_pool, later
from tests.jobs.test_views import submit
from trainhub.dashboards.models import CapacitySample, QueueSample
from trainhub.dashboards.services import samples_prune, samples_record, samples_roll_up
from trainhub.dashboards.sources import CapacityReading, _capacity_sources, register_capacity_source
from trainhub.dashboards.timeseries import minute_of
from trainhub.inventory.models import NodeState
from trainhub.inventory.services import node_set_state, nodes_dedicate
from trainhub.jobs import services

pytestmark = pytest.mark.django_db

T4 = "NVIDIA_TESLA_T4"


def t4_job(cast, now, name="t4", gpus=2):
    return submit(cast["alpha"], cast["uma"], container_pool(accelerator=T4, count=gpus), name=name, now=now)


def run_on(job, node, now):
    assert services.jobs_place(assignments={job.pk: {(0, 0): (node.pk, [0])}}, now=now)
    services.replica_started(replica=job.replicas.get(), now=now)


def queue_row(minute, kind=T4, resolution=1) -> QueueSample:
    return QueueSample.objects.get(minute=minute, accelerator_type=kind, resolution=resolution)


@pytest.fixture
def start(now):
    """The start of a minute, so that a test's events fall in known minutes."""
    return now.replace(second=0) + dt.timedelta(minutes=1)


def test_each_gpu_pool_gets_its_capacity_and_allocation(cast, nodes, start):
    t4_nodes = list(nodes["t4"].nodes.all())
    run_on(t4_job(cast, start), t4_nodes[0], start)
    nodes_dedicate(nodes=[t4_nodes[1]], owner="persistentResources/1")
    samples_record(now=later(start, 5))
    rows = {row.scope: row for row in CapacitySample.objects.filter(minute=minute_of(start), resolution=1)}
    assert set(rows) == {"a100", "t4", "h100"}  # GPU pools only
    t4 = rows["t4"]
    assert (t4.source, t4.accelerator_type, t4.gpus_total, t4.gpus_allocated, t4.gpus_dedicated) == (
        "pool", T4, 12, 4, 4)  # 3 nodes of 4 T4s; a replica holds a whole node
    assert (rows["h100"].gpus_total, rows["h100"].gpus_allocated) == (8, 0)


def test_the_queue_is_counted_per_gpu_type_with_the_oldest_wait(cast, nodes, start):
    t4_job(cast, start, gpus=2)
    t4_job(cast, later(start, 20), gpus=4)
    run_on(t4_job(cast, start, gpus=1), nodes["t4"].nodes.first(), start)
    submit(cast["alpha"], cast["uma"], name="cpu", now=start)
    samples_record(now=later(start, 50))
    t4 = queue_row(minute_of(start))
    assert (t4.queued_jobs, t4.waiting_gpus, t4.running_jobs, t4.running_gpus) == (2, 6, 1, 1)
    assert t4.oldest_wait_seconds == 50
    assert queue_row(minute_of(start), "ACCELERATOR_TYPE_UNSPECIFIED").queued_jobs == 1


def test_starts_and_ends_are_counted_once_by_the_first_sample_after_their_minute(cast, nodes, start):
    samples_record(now=start)
    early = t4_job(cast, start, name="early")
    run_on(early, nodes["t4"].nodes.first(), later(start, 30))  # waited 30 s, in the first minute
    samples_record(now=later(start, 40))  # same minute: nothing written
    late = t4_job(cast, later(start, 45))
    run_on(late, list(nodes["t4"].nodes.all())[1], later(start, 45 + 700))  # waited 700 s, started minute 12
    services.job_cancel(job=early, now=later(start, 70))  # cancelling in minute 1
    samples_record(now=later(start, 65))  # minute 1: counts minute 0
    samples_record(now=later(start, 13 * 60))  # minute 13: counts minutes 1-12
    first, second = queue_row(minute_of(start) + 1), queue_row(minute_of(start) + 13)
    assert (first.started_jobs, first.started_wait_seconds, first.waited_under_1m) == (1, 30, 1)
    assert (second.started_jobs, second.started_wait_seconds, second.waited_10_60m) == (1, 700, 1)
    assert second.wait_p90_seconds == 700
    assert QueueSample.objects.filter(accelerator_type=T4, resolution=1).count() == 2  # none at minute 0
    assert sum(QueueSample.objects.values_list("ended_cancelled", flat=True)) == 0  # still CANCELLING


def test_ended_jobs_are_counted_by_final_state(cast, start):
    samples_record(now=start)
    for index in range(3):
        job = t4_job(cast, start, name=f"doomed-{index}")
        if index:
            services.job_cancel(job=job, now=later(start, 10))
        else:
            services.job_fail(job=job, now=later(start, 10), code=services.CODE_INTERNAL, message="x")
    samples_record(now=later(start, 60))
    row = queue_row(minute_of(start) + 1)
    assert (row.ended_failed, row.ended_cancelled, row.ended_succeeded) == (1, 2, 0)


def test_a_long_pause_is_not_attributed_to_one_minute(cast, nodes, start):
    samples_record(now=start)
    run_on(t4_job(cast, start), nodes["t4"].nodes.first(), later(start, 30))
    samples_record(now=later(start, 5 * 3600))  # the sampler was stopped for 5 hours
    assert QueueSample.objects.filter(accelerator_type=T4, resolution=1).get().started_jobs == 0


def test_another_domain_registers_its_capacity_as_its_own_scope(cast, nodes, start, monkeypatch):
    monkeypatch.setattr("trainhub.dashboards.sources._capacity_sources", list(_capacity_sources))
    register_capacity_source(lambda now: [CapacityReading("cluster", "slurm-a", "NVIDIA_H100_80GB", 64, 40)])
    samples_record(now=start)
    cluster = CapacitySample.objects.get(source="cluster")
    assert (cluster.scope, cluster.gpus_total, cluster.gpus_allocated) == ("slurm-a", 64, 40)


def test_complete_blocks_are_rolled_up_with_sums_highest_values_and_the_minutes_sampled(cast, nodes, start):
    block = start.replace(minute=15) + dt.timedelta(hours=1)  # a quarter past: no hour completes with it
    t4_job(cast, block, gpus=4)
    for minute in (0, 1, 2, 5, 14):  # the sampler missed some minutes
        if minute == 5:
            t4_job(cast, later(block, 5 * 60), gpus=2)
        samples_record(now=later(block, minute * 60 + 30))
    assert not QueueSample.objects.filter(resolution=15).exists()  # the block is still filling
    samples_record(now=later(block, 15 * 60 + 30))
    rolled = queue_row(minute_of(block), resolution=15)
    assert (rolled.minutes, rolled.queued_jobs, rolled.waiting_gpus) == (5, 1 + 1 + 1 + 2 + 2, 4 + 4 + 4 + 6 + 6)
    assert rolled.oldest_wait_seconds == 14 * 60 + 30
    t4_pool = CapacitySample.objects.get(resolution=15, scope="t4")
    assert (t4_pool.minutes, t4_pool.gpus_total) == (5, 5 * 12)
    assert not QueueSample.objects.filter(resolution=60).exists()
    assert samples_roll_up(now=later(block, 16 * 60)) == 0  # nothing rolled twice


def test_raw_minutes_go_after_two_days_and_rollups_after_the_retention(cast, start):
    for days in (9, 7, 3, 1):
        QueueSample.objects.create(minute=minute_of(later(start, -days * 86400)), accelerator_type=T4)
        QueueSample.objects.create(minute=minute_of(later(start, -days * 86400)), accelerator_type=T4,
                                   resolution=60, minutes=60)
    assert samples_prune(now=start, keep_days=8) == 4  # raw of 9, 7 and 3 days ago; the rollup of 9
    kept = {(row.resolution, (minute_of(start) - row.minute) // 1440) for row in QueueSample.objects.all()}
    assert kept == {(1, 1), (60, 7), (60, 3), (60, 1)}


def test_a_job_placed_and_starting_counts_as_running_and_a_draining_node_as_capacity(cast, nodes, start):
    job = t4_job(cast, start)
    node = nodes["t4"].nodes.first()
    assert services.jobs_place(assignments={job.pk: {(0, 0): (node.pk, [0])}}, now=start)  # PENDING, starting
    node_set_state(node=node, state=NodeState.DRAIN, reason="maintenance")
    samples_record(now=later(start, 5))
    row = queue_row(minute_of(start))
    assert (row.pending_jobs, row.running_jobs, row.running_gpus) == (0, 1, 2)
    t4 = CapacitySample.objects.get(resolution=1, scope="t4")
    assert (t4.gpus_total, t4.gpus_allocated) == (12, 4)


def test_the_beat_task_records_this_minute_and_prunes(cast):
    from django.conf import settings as django_settings

    from trainhub.dashboards.tasks import record_samples

    assert django_settings.CELERY_BEAT_SCHEDULE["dashboard-samples"]["task"] == "trainhub.dashboards.tasks.record_samples"
    QueueSample.objects.create(minute=1, accelerator_type=T4)  # 1970: long past any retention
    record_samples.delay()
    assert list(QueueSample.objects.values_list("accelerator_type", flat=True)) == ["ACCELERATOR_TYPE_UNSPECIFIED"]
