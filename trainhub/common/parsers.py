"""The API's JSON parser: DRF's, refusing strings with NUL characters.

PostgreSQL text cannot hold NUL (U+0000), so such a string anywhere in a body would fail at the
first query with a 500; no trainhub field has a use for one. See also middleware.ApiErrorMiddleware,
which refuses them in the path and the query string.
"""

from __future__ import annotations

from typing import Any

from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

NUL = "\x00"


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
        data = super().parse(stream, media_type, parser_context)
        if holds_nul(data):
            raise ParseError("Strings may not contain NUL characters (\\u0000).")
        return data
