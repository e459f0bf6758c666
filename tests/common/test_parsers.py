"""The API's JSON parser refuses NUL characters wherever JSON can spell them, and nothing else."""

import io

import pytest
from rest_framework.exceptions import ParseError

from trainhub.common.parsers import JsonParser


def parse(raw: bytes):
    return JsonParser().parse(io.BytesIO(raw), "application/json", {})


@pytest.mark.parametrize("raw", [b'{"a": "x\\u0000"}', b'{"a\\u0000": 1}', b'[[{"a": ["\\u0000"]}]]'])
def test_a_nul_in_any_string_or_key_is_refused(raw):
    with pytest.raises(ParseError, match="NUL characters"):
        parse(raw)


def test_a_backslash_followed_by_the_letters_u0000_is_not_a_nul():
    assert parse(b'{"a": "C:\\\\u0000"}') == {"a": "C:\\u0000"}


@pytest.mark.parametrize("raw", [b'{"a": "\x00"}', b'{"a": NaN}', b'{"a": "\xff"}', b'{"a": 1'])
def test_what_strict_json_refuses_is_a_parse_error(raw):
    with pytest.raises(ParseError, match="JSON parse error"):
        parse(raw)
