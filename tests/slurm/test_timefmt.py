"""Slurm time strings: every -t form, UNLIMITED, rounding, and squeue/sacct printing."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trainhub.slurm.timefmt import (
    TimeFormatError,
    format_elapsed,
    format_mins,
    format_secs,
    format_time_limit,
    parse_minutes,
    parse_seconds,
    parse_time_limit,
)


@pytest.mark.parametrize(("text", "seconds"), [
    ("90", 90 * 60),                     # minutes
    ("5:30", 5 * 60 + 30),               # minutes:seconds
    ("1:02:03", 3600 + 120 + 3),         # hours:minutes:seconds
    ("00:10:00", 600),                   # the seed's PreemptExemptTime
    ("2-12", 2 * 86400 + 12 * 3600),     # days-hours
    ("2-12:30", 2 * 86400 + 12 * 3600 + 30 * 60),
    ("7-0", 7 * 86400),                  # PriorityMaxAge's default
    ("1-00:00:01", 86401),
    ("0:90", 90),                        # fields are not range-checked, as in Slurm
])
def test_every_documented_form_parses_to_seconds(text, seconds):
    assert parse_seconds(text) == seconds


@pytest.mark.parametrize("text", ["UNLIMITED", "unlimited", "INFINITE", "Infinite", "-1"])
def test_unlimited_words_mean_no_limit(text):
    assert parse_seconds(text) is None
    assert parse_minutes(text) is None
    assert parse_time_limit(text) is None


@pytest.mark.parametrize("text", ["", "  ", "abc", "1:2:3:4", "1-2-3", "1-", "-5", ":5", "1h", "1.5", "1-2:3:4:5"])
def test_malformed_times_are_rejected(text):
    with pytest.raises(TimeFormatError):
        parse_seconds(text)


def test_minutes_round_seconds_up_like_time_str2mins():
    assert parse_minutes("0:30") == 1
    assert parse_minutes("1:00") == 1
    assert parse_minutes("1:01") == 2
    assert parse_minutes("1-0") == 1440


def test_a_zero_time_limit_means_no_limit():
    assert parse_time_limit("0") is None
    assert parse_time_limit("30") == 30


def test_a_time_limit_past_what_a_job_record_holds_is_refused():
    """sbatch -t 99999999999999:00 overflowed PostgreSQL's integer column (a 500)."""
    assert parse_time_limit(str(2**31 - 1)) == 2**31 - 1
    with pytest.raises(TimeFormatError, match="longer than 2147483647 minutes"):
        parse_time_limit("99999999999999:00")


def test_secs2time_str_pads_hours_and_adds_days():
    assert format_secs(0) == "00:00:00"
    assert format_secs(3723) == "01:02:03"
    assert format_secs(86400 + 3723) == "1-01:02:03"
    assert format_secs(None) == "UNLIMITED"
    assert format_secs(-1) == "INVALID"
    assert format_mins(90) == "01:30:00"
    assert format_mins(1440 * 3) == "3-00:00:00"


def test_squeue_time_drops_leading_zero_fields():
    assert format_elapsed(0) == "0:00"
    assert format_elapsed(307) == "5:07"
    assert format_elapsed(3600) == "1:00:00"
    assert format_elapsed(90061) == "1-01:01:01"
    assert format_elapsed(-5) == "INVALID"
    assert format_elapsed(366 * 86400) == "INVALID"
    assert format_time_limit(None) == "UNLIMITED"
    assert format_time_limit(60) == "1:00:00"


@settings(deadline=None)
@given(st.integers(min_value=0, max_value=10**9))
def test_formatted_seconds_parse_back_to_the_same_value(seconds):
    assert parse_seconds(format_secs(seconds)) == seconds


@settings(deadline=None)
@given(st.text(max_size=12))
def test_parsing_never_fails_other_than_with_time_format_error(text):
    try:
        value = parse_seconds(text)
    except TimeFormatError:
        return
    assert value is None or value >= 0
