"""Seeded, synthetic dashboard history: per-minute samples with a daily rhythm.

The dashboards chart samples that the sampler writes once a minute, so a fresh database has no
history. The page benchmark (a week of samples at the bench sizes) and the browser tests' screenshots
need one: this writes what a busy cluster's sampler would have written, drawn from
``random.Random(seed)``. Never used by trainhub itself.
"""

from __future__ import annotations

import datetime as dt
import math
import random
from dataclasses import dataclass

from trainhub.dashboards.timeseries import minute_of, percentile, wait_bucket_counts

NO_ACCELERATOR = "ACCELERATOR_TYPE_UNSPECIFIED"


@dataclass(frozen=True)
class Pool:
    name: str
    accelerator_type: str
    gpus: int
    #: Mean share of the pool's GPUs in use over a day.
    busy: float


def _daily(minute: int, phase: float) -> float:
    """0..1 through a day: low at night, high in the working afternoon."""
    hours = (minute / 60 + phase) % 24
    return 0.5 - 0.5 * math.cos((hours - 3) / 24 * 2 * math.pi)


def _events(rng: random.Random, mean: float) -> int:
    """How many events of a Poisson process with ``mean`` events a minute happen in one minute."""
    count, threshold, product = 0, math.exp(-mean), rng.random()
    while product > threshold:
        count += 1
        product *= rng.random()
    return count


def write_history(*, pools: list[Pool], end: dt.datetime, minutes: int, seed: int = 7,
                  waiting_scale: float = 1.0) -> int:
    """Write ``minutes`` minutes of raw samples ending at ``end``'s minute (exclusive), then roll
    them up and prune them as the sampler would have; returns the rows left.

    ``waiting_scale`` scales the queue (jobs waiting and started per minute).
    """
    from trainhub.dashboards.models import CapacitySample, QueueSample
    from trainhub.dashboards.services import samples_prune, samples_roll_up

    rng = random.Random(seed)
    last = minute_of(end)
    capacity, queue = [], []
    kinds = sorted({pool.accelerator_type for pool in pools})
    backlog = {kind: 0.0 for kind in kinds}
    for minute in range(last - minutes, last):
        load = _daily(minute, 0)
        for index, pool in enumerate(pools):
            share = min(1.0, max(0.0, pool.busy + 0.35 * (load - 0.5) + rng.gauss(0, 0.02)
                                 + 0.05 * math.sin(minute / 37 + index)))
            down = pool.gpus // 16 if (minute // 240 + index) % 9 == 0 else 0
            total = pool.gpus - down
            capacity.append(CapacitySample(minute=minute, source="pool", scope=pool.name,
                                           accelerator_type=pool.accelerator_type, gpus_total=total,
                                           gpus_allocated=min(total, round(total * share))))
        for kind in [NO_ACCELERATOR, *kinds]:
            gpu_kind = kind != NO_ACCELERATOR
            pressure = load * (1.6 if gpu_kind else 0.3) * waiting_scale
            backlog[kind] = max(0.0, backlog.get(kind, 0.0) * 0.97 + rng.gauss(pressure, 0.6 * waiting_scale))
            queued = round(backlog[kind])
            started = [rng.lognormvariate(math.log(60 + 1500 * load if gpu_kind else 20), 0.9)
                       for _ in range(_events(rng, 1.5 * waiting_scale))]
            ended = _events(rng, 1.5 * waiting_scale)
            failed = sum(1 for _ in range(ended) if rng.random() < 0.12)
            cancelled = sum(1 for _ in range(ended - failed) if rng.random() < 0.08)
            queue.append(QueueSample(
                minute=minute, accelerator_type=kind, queued_jobs=queued, pending_jobs=round(queued * 0.3),
                running_jobs=round(20 * load * waiting_scale) if gpu_kind else 2,
                waiting_gpus=queued * (8 if gpu_kind else 0), running_gpus=round(160 * load) if gpu_kind else 0,
                oldest_wait_seconds=round(600 + 5400 * load) if queued else 0,
                started_jobs=len(started), started_wait_seconds=round(sum(started)),
                wait_p90_seconds=round(percentile(started, 0.9)),
                **wait_bucket_counts(started), ended_succeeded=ended - failed - cancelled, ended_failed=failed,
                ended_cancelled=cancelled))
    CapacitySample.objects.bulk_create(capacity, batch_size=5000, ignore_conflicts=True)
    QueueSample.objects.bulk_create(queue, batch_size=5000, ignore_conflicts=True)
    samples_roll_up(now=end)
    samples_prune(now=end)
    return CapacitySample.objects.count() + QueueSample.objects.count()
