"""Wire parsers refuse what proto3 JSON cannot carry with a WireError, never another exception."""

import pytest

from trainhub.common.wire import WireError, parse_duration


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
def test_a_duration_that_is_not_a_finite_number_is_a_wire_error(value):
    with pytest.raises(WireError, match="finite"):
        parse_duration(value)


def test_a_number_of_seconds_is_a_duration():
    assert parse_duration(1.5) == parse_duration("1.5s")
