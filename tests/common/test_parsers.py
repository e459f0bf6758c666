"""The API's JSON parser refuses NUL characters, lone surrogates and deep nesting wherever JSON can
spell them, in Google's error format, and nothing else."""

import io
import json

import pytest
from hypothesis import HealthCheck, given, settings

from tests.json_documents import DEEP_TEXT, hostile_texts, nested
from trainhub.common.errors import ApiError
from trainhub.common.parsers import MAX_DEPTH, JsonParser


def parse(raw: bytes):
    return JsonParser().parse(io.BytesIO(raw), "application/json", {})


def refusal(raw: bytes) -> dict:
    with pytest.raises(ApiError) as caught:
        parse(raw)
    assert caught.value.http_status == 400 and caught.value.status == "INVALID_ARGUMENT"
    return caught.value.body()["error"]


@pytest.mark.parametrize("raw", [b'{"a": "x\\u0000"}', b'{"a\\u0000": 1}', b'[[{"a": ["\\u0000"]}]]'])
def test_a_nul_in_any_string_or_key_is_refused(raw):
    assert "NUL characters" in refusal(raw)["message"]


def test_a_backslash_followed_by_the_letters_u0000_is_not_a_nul():
    assert parse(b'{"a": "C:\\\\u0000"}') == {"a": "C:\\u0000"}


@pytest.mark.parametrize("raw", [b'{"a": "\x00"}', b'{"a": NaN}', b'{"a": "\xff"}', b'{"a": 1'])
def test_what_strict_json_refuses_is_a_parse_error(raw):
    assert refusal(raw)["message"].startswith("Invalid JSON payload received. JSON parse error")


@pytest.mark.parametrize("raw, field", [
    (b'{"displayName": "\\udc80"}', "displayName"),
    (b'{"jobSpec": {"workerPoolSpecs": [{"containerSpec": {"command": ["ok", "x\\uD800"]}}]}}',
     "jobSpec.workerPoolSpecs[0].containerSpec.command[1]"),
    (b'{"labels": {"\\udfff": "v"}}', "labels.\\udfff"),  # a key's surrogate escaped: the answer must encode
    (b'{"k\\udc80x": {"a": "\\ud800"}}', "k\\udc80x"),
    (b'["\\udc80"]', "[0]"),
    (b'"\\udc80"', "(body)"),
])
def test_a_lone_surrogate_is_refused_naming_its_field(raw, field):
    error = refusal(raw)
    assert "lone UTF-16 surrogate" in error["message"]
    assert error["details"][0]["fieldViolations"][0]["field"] == field


def test_a_surrogate_pair_is_a_character_and_accepted():
    assert parse(b'{"a": "\\ud83d\\ude80"}') == {"a": "\U0001F680"}


@pytest.mark.parametrize("raw", [DEEP_TEXT.encode(), nested(MAX_DEPTH + 1).encode(), b"[" * 100_000])
def test_nesting_deeper_than_the_limit_is_refused(raw):
    assert "nested at most" in refusal(raw)["message"]


def test_nesting_up_to_the_limit_and_brackets_inside_strings_are_accepted():
    assert parse(nested(MAX_DEPTH).encode())
    assert parse(json.dumps({"a": "[" * 10_000}).encode()) == {"a": "[" * 10_000}


@given(hostile_texts)
@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
def test_any_text_parses_or_is_refused_with_a_400(text):
    try:
        data = parse(text.encode())
    except ApiError as error:
        assert error.http_status == 400
        return
    # What is accepted can be stored: UTF-8 text without NUL.
    json.dumps(data, ensure_ascii=False).encode("utf-8")
