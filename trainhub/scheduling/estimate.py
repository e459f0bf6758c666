"""Queue position and estimated start time of waiting jobs. Pure Python, no Django.

Position: 1 + the waiting jobs ahead in scheduling order that compete for the same kind of node
(same machine type and accelerator). Estimated start: nodes free up when the jobs holding them
reach their scheduling.timeout (an upper bound: jobs usually end sooner), and the jobs ahead take
their share first; the job can start once enough nodes of every kind it needs are free. None
means the inventory does not have enough nodes of some kind at all.

A job short of quota starts no earlier than the quota frees up (quota_waits): the GPUs charged to
a quota are released when the jobs holding them reach their timeout (start + scheduling.timeout,
Vertex's maximum running time), and the jobs ahead of it short of the same quota take their share
first; GPUs that no job's end releases (a persistent resource's machines, held until it is
deleted) never free up, and neither does a request above the limit itself: no estimate then.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Hashable, Iterable, Mapping, Sequence

NodeKind = tuple[str, str]
#: (project key, location, quota metric)
QuotaKey = tuple[Hashable, str, str]


@dataclass(frozen=True)
class WaitEstimate:
    position: int
    estimated_start: dt.datetime | None


def estimate_waits(
    waiting: Sequence[tuple[Hashable, Mapping[NodeKind, int]]],
    free_now: Mapping[NodeKind, int],
    busy_until: Mapping[NodeKind, Iterable[dt.datetime]],
    now: dt.datetime,
) -> dict[Hashable, WaitEstimate]:
    """``waiting``: (job key, nodes needed per kind) in scheduling order."""
    releases = {kind: sorted(times) for kind, times in busy_until.items()}
    ahead: Counter[NodeKind] = Counter()
    jobs_ahead: Counter[NodeKind] = Counter()
    result: dict[Hashable, WaitEstimate] = {}
    for key, needs in waiting:
        position = 1 + max((jobs_ahead[kind] for kind in needs), default=0)
        start: dt.datetime | None = now
        for kind, count in needs.items():
            shortage = ahead[kind] + count - free_now.get(kind, 0)
            if shortage <= 0:
                continue
            queue = releases.get(kind, [])
            if shortage > len(queue):
                start = None
                break
            start = max(start, queue[shortage - 1])
        result[key] = WaitEstimate(position, start)
        for kind, count in needs.items():
            ahead[kind] += count
            jobs_ahead[kind] += 1
    return result


def needs_by_kind(shapes: Iterable[tuple[int, str, str]]) -> dict[NodeKind, int]:
    """(replica count, machine type, accelerator type) -> nodes needed per kind."""
    needs: dict[NodeKind, int] = defaultdict(int)
    for count, machine, accel in shapes:
        needs[(machine, accel)] += count
    return dict(needs)


def quota_frees_at(*, limit: int, in_use: int, requested: int, releases: Iterable[tuple[dt.datetime, int]],
                   now: dt.datetime) -> dt.datetime | None:
    """When ``requested`` GPUs fit under ``limit``: ``in_use`` drops by each (end, GPUs) release in
    time order; None if the releases never free enough (or the request exceeds the limit itself).
    A holder past its end (its timeout not yet enforced) frees the quota "now", never in the past."""
    excess = in_use + requested - limit
    if excess <= 0:
        return now
    if requested > limit:
        return None
    for end, gpus in sorted(releases, key=lambda release: release[0]):
        excess -= gpus
        if excess <= 0:
            return max(end, now)
    return None


def quota_waits(
    blocked: Sequence[tuple[Hashable, Hashable, str, Mapping[str, int]]],
    limits: Mapping[QuotaKey, int],
    usage: Mapping[QuotaKey, int],
    releases: Mapping[QuotaKey, Sequence[tuple[dt.datetime, int]]],
    now: dt.datetime,
) -> dict[Hashable, dt.datetime | None]:
    """``blocked``: (job key, project, location, GPUs per quota metric) of the jobs short of quota,
    in scheduling order; ``usage``: GPUs charged per quota now; ``releases``: (end, GPUs) of the jobs
    holding each quota. -> when each job's every quota has room for it (the latest of them), the
    jobs ahead short of the same quota counting as held (they take the freed GPUs first); None if
    some quota never frees enough."""
    ahead: Counter[QuotaKey] = Counter()
    result: dict[Hashable, dt.datetime | None] = {}
    for key, project, location, demand in blocked:
        start: dt.datetime | None = now
        for metric, requested in demand.items():
            quota = (project, location, metric)
            limit = limits.get(quota)
            if limit is None or start is None:
                continue
            frees = quota_frees_at(limit=limit, in_use=usage.get(quota, 0) + ahead[quota], requested=requested,
                                   releases=releases.get(quota, ()), now=now)
            start = None if frees is None else max(start, frees)
        result[key] = start
        for metric, requested in demand.items():
            ahead[(project, location, metric)] += requested
    return result
