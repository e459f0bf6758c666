"""Wire parsers refuse what proto3 JSON cannot carry with a WireError, never another exception."""

import pytest

from trainhub.common.wire import WireError, parse_duration, parse_enum


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
def test_a_duration_that_is_not_a_finite_number_is_a_wire_error(value):
    with pytest.raises(WireError, match="finite"):
        parse_duration(value)


def test_a_number_of_seconds_is_a_duration():
    assert parse_duration(1.5) == parse_duration("1.5s")


@pytest.mark.parametrize("value", ["1\x1f", " 2 "])
def test_an_enum_number_in_a_string_is_read_without_the_space_around_it(value):
    """str.strip() takes \\x1f for space, int() does not: it was a ValueError (a 500)."""
    assert parse_enum(value, {1: "ONE", 2: "TWO"}) in ("ONE", "TWO")


def test_other_digits_than_0_to_9_are_no_enum_number():
    with pytest.raises(WireError):
        parse_enum("\u00b2", {2: "TWO"})
