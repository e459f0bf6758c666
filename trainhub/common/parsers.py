"""The API's JSON parser: DRF's, refusing what no trainhub field can hold.

- NUL characters (U+0000): PostgreSQL text cannot hold one, so such a string anywhere in a body
  would fail at the first query with a 500; no trainhub field has a use for one. See also
  middleware.ApiErrorMiddleware, which refuses them in the path and the query string.
- Lone UTF-16 surrogates (``"\\udc80"``): JSON can spell them, Python keeps them, but no database
  driver can encode them (``UnicodeEncodeError``); refused with a 400 naming the field.
- Documents nested deeper than MAX_DEPTH: the parser and every walk over the data recurse, and
  1,000 levels end in ``RecursionError``; refused with a 400 before anything walks them.

Every refusal is an ApiError in Google's error format, on every endpoint that parses JSON
(``/auth/token`` included), whatever DEBUG says.
"""

from __future__ import annotations

import re
from typing import Any

from rest_framework.parsers import JSONParser, get_encoding
from rest_framework.utils import json

from trainhub.common.errors import ApiError, FieldViolation

NUL = "\x00"
#: How a NUL is written in JSON text: strict JSON refuses the raw character inside a string.
NUL_ESCAPE = "\\u0000"
#: How a surrogate is written in JSON text: \uD800 to \uDFFF (UTF-8 text cannot hold one raw).
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89abcdefABCDEF]")
_SURROGATE = re.compile("[\ud800-\udfff]")
#: The deepest nesting of arrays and objects a body may have; Vertex's own bodies need under 10.
MAX_DEPTH = 64


def holds_nul(value: Any) -> bool:
    """Whether a parsed JSON value has a NUL character in any string (keys included)."""
    if isinstance(value, str):
        return NUL in value
    if isinstance(value, dict):
        return any(holds_nul(key) or holds_nul(item) for key, item in value.items())
    if isinstance(value, list):
        return any(holds_nul(item) for item in value)
    return False


def _escaped(text: str) -> str:
    """``text`` with each lone surrogate written as its JSON escape (``\\udc80``): a field path
    that names a key holding one must itself be text the answer can be encoded in."""
    return _SURROGATE.sub(lambda match: f"\\u{ord(match.group()):04x}", text)


def lone_surrogate_field(value: Any, path: str = "") -> str | None:
    """The field path (``workerPoolSpecs[0].containerSpec.command[1]``) of the first string or key
    of a parsed JSON value holding a lone UTF-16 surrogate, or None. A key holding one is named with
    it escaped (``labels.\\udfff``)."""
    if isinstance(value, str):
        return path or "(body)" if _SURROGATE.search(value) else None
    if isinstance(value, dict):
        for key, item in value.items():
            where = f"{path}.{_escaped(key)}" if path else _escaped(key)
            if _SURROGATE.search(key):
                return where
            found = lone_surrogate_field(item, where)
            if found:
                return found
    if isinstance(value, list):
        for index, item in enumerate(value):
            found = lone_surrogate_field(item, f"{path}[{index}]")
            if found:
                return found
    return None


def nesting_depth(text: str) -> int:
    """How deeply a JSON text nests arrays and objects (brackets inside strings count too: an
    over-estimate, only ever on text that has more brackets than MAX_DEPTH in all)."""
    depth = deepest = 0
    for char in re.findall(r"[\[\]{}]", text):
        depth += 1 if char in "[{" else -1
        deepest = max(deepest, depth)
    return deepest


def too_deep(text: str) -> bool:
    # Counting is C speed; only a text with that many brackets at all is walked.
    if text.count("[") + text.count("{") <= MAX_DEPTH:
        return False
    return nesting_depth(re.sub(r'"(?:[^"\\]|\\.)*"', '""', text)) > MAX_DEPTH


def invalid_payload(detail: str, field: str | None = None) -> ApiError:
    """Google's answer to a body it cannot read: 400 INVALID_ARGUMENT "Invalid JSON payload received."."""
    violations = [FieldViolation(field, detail)] if field else []
    return ApiError(400, f"Invalid JSON payload received. {detail}", "INVALID_ARGUMENT", violations)


class JsonParser(JSONParser):
    def parse(self, stream, media_type=None, parser_context=None):
        try:
            text = stream.read().decode(get_encoding(parser_context or {}))
        except ValueError as exc:  # UnicodeDecodeError
            raise invalid_payload(f"JSON parse error - {exc}") from exc
        if too_deep(text):
            raise invalid_payload(f"Arrays and objects may be nested at most {MAX_DEPTH} deep.")
        try:
            data = json.loads(text, parse_constant=json.strict_constant if self.strict else None)
        except ValueError as exc:
            raise invalid_payload(f"JSON parse error - {exc}") from exc
        except RecursionError as exc:  # a deep text whose brackets are hidden from too_deep: never, but cheap
            raise invalid_payload(f"Arrays and objects may be nested at most {MAX_DEPTH} deep.") from exc
        # Walking every string of a large document costs more than the rest of parsing it; only
        # a text that spells the escape can hold a NUL or a surrogate.
        if NUL_ESCAPE in text and holds_nul(data):
            raise invalid_payload("Strings may not contain NUL characters (\\u0000).")
        if _SURROGATE_ESCAPE.search(text):
            field = lone_surrogate_field(data)
            if field:
                raise invalid_payload(f"Invalid string at '{field}': it holds a lone UTF-16 surrogate "
                                      "(\\ud800-\\udfff), which is not valid Unicode text.", field)
        return data
