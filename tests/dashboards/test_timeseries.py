"""Minute arithmetic, ranges and wait statistics (pure)."""

import datetime as dt
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trainhub.dashboards.timeseries import (
    DEFAULT_RANGE,
    RANGES,
    WAIT_BUCKETS,
    axis_start,
    minute_of,
    minute_start,
    nice_scale,
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


@pytest.mark.parametrize("largest, scale", [
    (4.82, (6, 2)), (9.64, (10, 5)), (0.0034, (0.004, 0.001)), (1932, (2000, 500)), (3, (3, 1)), (0, (1, 1)),
    (41.9, (60, 20)), (100, (100, 50)),
])
def test_an_axis_ends_past_its_largest_value_on_a_round_step(largest, scale):
    assert nice_scale(largest) == scale


@given(st.floats(min_value=1e-6, max_value=1e9))
def test_every_scale_shows_its_value_in_at_most_four_steps_of_one_two_or_five(largest):
    top, step = nice_scale(largest)
    assert largest <= top * (1 + 1e-9) and top / step <= 4 + 1e-9
    mantissa = step / 10 ** math.floor(math.log10(step) + 1e-9)
    assert any(abs(mantissa - nice) < 1e-6 for nice in (1, 2, 5))


def test_a_time_axis_starts_at_the_first_sample_when_the_history_is_shorter_than_the_range():
    now = dt.datetime(2026, 12, 5, 12, 0, tzinfo=dt.UTC)
    day = range_for("24h")
    assert axis_start(day, None, now) == now - dt.timedelta(hours=24)
    assert axis_start(day, now - dt.timedelta(days=3), now) == now - dt.timedelta(hours=24)
    assert axis_start(day, now - dt.timedelta(hours=5), now) == now - dt.timedelta(hours=5, minutes=15)
    assert axis_start(day, now - dt.timedelta(hours=13), now) == now - dt.timedelta(hours=24)  # over half: whole
    assert axis_start(day, now - dt.timedelta(minutes=2), now) == now - dt.timedelta(hours=1)  # never narrower
    assert axis_start(range_for("7d"), now - dt.timedelta(minutes=2), now) == now - dt.timedelta(hours=8)
    assert axis_start(range_for("1h"), now - dt.timedelta(minutes=2), now) == now - dt.timedelta(hours=1)
