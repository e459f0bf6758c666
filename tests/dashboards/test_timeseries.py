"""Minute arithmetic, ranges and wait statistics (pure)."""

import datetime as dt

from hypothesis import given
from hypothesis import strategies as st

from trainhub.dashboards.timeseries import (
    DEFAULT_RANGE,
    RANGES,
    WAIT_BUCKETS,
    minute_of,
    minute_start,
    percentile,
    range_for,
    wait_bucket_counts,
)


def test_a_minute_starts_where_its_number_says():
    moment = dt.datetime(2026, 12, 3, 10, 17, 42, tzinfo=dt.UTC)
    assert minute_start(minute_of(moment)) == dt.datetime(2026, 12, 3, 10, 17, tzinfo=dt.UTC)


def test_every_range_has_between_60_and_170_buckets_and_unknown_keys_get_the_default():
    for time_range in RANGES:
        assert 60 <= time_range.minutes // time_range.bucket_minutes <= 170
    assert range_for("7d").minutes == 7 * 24 * 60
    assert range_for("forever") is DEFAULT_RANGE


def test_a_range_ends_with_the_current_minute():
    assert range_for("1h").first_minute(1000) == 941


def test_waits_fall_in_the_bucket_of_their_length():
    counts = wait_bucket_counts([0, 59.9, 60, 599, 600, 3599, 3600, 6 * 3600 - 1, 6 * 3600, 10**6])
    assert list(counts.values()) == [2, 2, 2, 2, 2]
    assert list(counts) == [bucket.column for bucket in WAIT_BUCKETS]


@given(st.lists(st.floats(min_value=0, max_value=1e7)))
def test_every_wait_is_counted_once(waits):
    assert sum(wait_bucket_counts(waits).values()) == len(waits)


def test_percentiles_are_nearest_rank():
    assert percentile([], 0.9) == 0
    assert percentile([5], 0.5) == 5
    assert percentile([1, 2, 3, 4], 0.5) == 2
    assert percentile(list(range(1, 11)), 0.9) == 9
    assert percentile([10, 1, 7], 1.0) == 10


@given(st.lists(st.integers(min_value=0, max_value=10**6), min_size=1), st.floats(min_value=0.01, max_value=1))
def test_a_percentile_is_one_of_the_values_and_at_least_that_share_is_at_or_below_it(values, fraction):
    result = percentile(values, fraction)
    assert result in values
    assert sum(1 for value in values if value <= result) >= fraction * len(values)
