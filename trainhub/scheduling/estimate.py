"""Queue position and estimated start time of waiting jobs. Pure Python, no Django.

Position: 1 + the waiting jobs ahead in scheduling order that compete for the same kind of node
(same machine type and accelerator). Estimated start: nodes free up when the jobs holding them
reach their scheduling.timeout (an upper bound: jobs usually end sooner), and the jobs ahead take
their share first; the job can start once enough nodes of every kind it needs are free. None
means the inventory does not have enough nodes of some kind at all.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Hashable, Iterable, Mapping, Sequence

NodeKind = tuple[str, str]


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
