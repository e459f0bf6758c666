"""The API's JSON parser: DRF's, refusing strings with NUL characters.

PostgreSQL text cannot hold NUL (U+0000), so such a string anywhere in a body would fail at the
first query with a 500; no trainhub field has a use for one. See also middleware.ApiErrorMiddleware,
which refuses them in the path and the query string.
"""

from __future__ import annotations

from typing import Any

from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser, get_encoding
from rest_framework.utils import json

NUL = "\x00"
#: How a NUL is written in JSON text: strict JSON refuses the raw character inside a string.
NUL_ESCAPE = "\\u0000"


def holds_nul(value: Any) -> bool:
    """Whether a parsed JSON value has a NUL character in any string (keys included)."""
    if isinstance(value, str):
        return NUL in value
    if isinstance(value, dict):
        return any(holds_nul(key) or holds_nul(item) for key, item in value.items())
    if isinstance(value, list):
        return any(holds_nul(item) for item in value)
    return False


class JsonParser(JSONParser):
    def parse(self, stream, media_type=None, parser_context=None):
        try:
            text = stream.read().decode(get_encoding(parser_context or {}))
            data = json.loads(text, parse_constant=json.strict_constant if self.strict else None)
        except ValueError as exc:  # UnicodeDecodeError included
            raise ParseError(f"JSON parse error - {exc}") from exc
        # Walking every string of a large document costs more than the rest of parsing it; only
        # a text that spells the escape can hold a NUL.
        if NUL_ESCAPE in text and holds_nul(data):
            raise ParseError("Strings may not contain NUL characters (\\u0000).")
        return data
