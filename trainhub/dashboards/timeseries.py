"""Time ranges, minute arithmetic and wait statistics for the dashboards. Pure Python, no Django.

Samples are keyed by the Unix minute (seconds since the epoch // 60), so that a chart's buckets
are an integer division the database does itself: a week of per-minute samples is read as at most
a few hundred rows whatever the range.
"""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass
from typing import Sequence


@dataclass(frozen=True)
class TimeRange:
    key: str
    label: str
    minutes: int
    #: Minutes per chart bucket: 60 to 170 points per series, enough for a wall screen.
    bucket_minutes: int
    #: The samples it is drawn from: raw minutes (1), or 15-minute or hourly rollups.
    resolution: int

    def first_minute(self, now_minute: int) -> int:
        """The first sample minute inside the range ending at ``now_minute`` (inclusive)."""
        return now_minute - self.minutes + 1


RANGES: tuple[TimeRange, ...] = (
    TimeRange("1h", "1 hour", 60, 1, 1),
    TimeRange("6h", "6 hours", 6 * 60, 5, 1),
    TimeRange("24h", "24 hours", 24 * 60, 15, 15),
    TimeRange("7d", "7 days", 7 * 24 * 60, 120, 60),
)
RANGES_BY_KEY = {time_range.key: time_range for time_range in RANGES}
DEFAULT_RANGE = RANGES_BY_KEY["24h"]


def range_for(key: str) -> TimeRange:
    return RANGES_BY_KEY.get(key, DEFAULT_RANGE)


def minute_of(moment: dt.datetime) -> int:
    return int(moment.timestamp() // 60)


def minute_start(minute: int) -> dt.datetime:
    return dt.datetime.fromtimestamp(minute * 60, tz=dt.UTC)


@dataclass(frozen=True)
class WaitBucket:
    """A class of time from submission to start, for the wait-time distribution."""

    column: str
    label: str
    #: Upper bound in seconds (exclusive); None for the last class.
    below: int | None


WAIT_BUCKETS: tuple[WaitBucket, ...] = (
    WaitBucket("waited_under_1m", "< 1 min", 60),
    WaitBucket("waited_1_10m", "1–10 min", 600),
    WaitBucket("waited_10_60m", "10–60 min", 3600),
    WaitBucket("waited_1_6h", "1–6 h", 6 * 3600),
    WaitBucket("waited_over_6h", "> 6 h", None),
)


def wait_bucket_counts(waits: Sequence[float]) -> dict[str, int]:
    """How many of ``waits`` (seconds) fall in each of WAIT_BUCKETS, by column name."""
    counts = {bucket.column: 0 for bucket in WAIT_BUCKETS}
    for wait in waits:
        bucket = next(b for b in WAIT_BUCKETS if b.below is None or wait < b.below)
        counts[bucket.column] += 1
    return counts


def percentile(values: Sequence[float], fraction: float) -> float:
    """The nearest-rank percentile (the smallest value with at least ``fraction`` of the values at
    or below it); 0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(1, math.ceil(fraction * len(ordered)))
    return float(ordered[rank - 1])


#: However recent the first sample, a time axis spans at least this much (and four buckets), so
#: that a fresh install's first minutes are not drawn a few pixels wide, nor a millisecond wide.
SHORTEST_AXIS = dt.timedelta(hours=1)


def axis_start(time_range: TimeRange, first: dt.datetime | None, now: dt.datetime) -> dt.datetime:
    """Where a chart's time axis starts: the range's start, or, when the history covers less than
    half the range (a fresh install), the first sample's bucket, so the data fills the chart
    instead of a sliver at its right edge; never later than SHORTEST_AXIS (or four buckets)
    before now. A history over half the range already reads well on the whole range."""
    range_start = now - dt.timedelta(minutes=time_range.minutes)
    if first is None or first <= range_start + dt.timedelta(minutes=time_range.minutes / 2):
        return range_start
    shortest = max(SHORTEST_AXIS, dt.timedelta(minutes=4 * time_range.bucket_minutes))
    return max(range_start, min(first - dt.timedelta(minutes=time_range.bucket_minutes), now - shortest))


#: Tick steps of an axis, before their power of ten: 1, 2, 5, 10, 20, 50...
_NICE_STEPS = (1.0, 2.0, 5.0)


def nice_scale(largest: float, ticks: int = 4) -> tuple[float, float]:
    """(top, step) of an axis from 0 that shows values up to ``largest`` with at most ``ticks``
    intervals of a round step (1, 2 or 5 times a power of ten): 4.82 -> (6, 2), 9.64 -> (10, 5),
    0.0034 -> (0.004, 0.001), 1,932 -> (2,000, 500); nothing to show: (1, 1). Plotly's own ticks
    for a few samples are the data's values and their multiples (4.82, 9.64, ...)."""
    if largest <= 0:
        return 1.0, 1.0
    magnitude = 10.0 ** math.floor(math.log10(largest / ticks))
    for factor in (*_NICE_STEPS, 10.0):
        step = factor * magnitude
        if math.ceil(largest / step - 1e-9) <= ticks:
            return round(math.ceil(largest / step - 1e-9) * step, 12), round(step, 12)
    raise AssertionError("unreachable: a step of ten times the magnitude always fits")
