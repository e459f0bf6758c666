"""Walking a JSON document: every place in it, a copy with one place replaced, and the edge values
the fuzz tests put there - the values that found most 5xx bugs so far, which random generation
rarely draws: NUL characters, huge strings and arrays, numbers beyond int64 and float."""

from __future__ import annotations

import copy
from typing import Any

STRING_EDGES = ("", "\u0000", "x" * 100_000, "ünï 日本 🚀", "../../etc/passwd", "; rm -rf /")
NUMBER_EDGES = (-1, 0, 2**63, 10**30, 1e308, "NaN", "12")
#: Arrays: the empty one, and one of this many copies of an element.
HUGE_ARRAY_LENGTH = 10_000


def json_paths(document: Any, prefix: tuple = ()) -> list[tuple]:
    """Every key/index path inside a JSON document (the document itself is the empty path)."""
    found = [prefix]
    if isinstance(document, dict):
        for key, value in document.items():
            found += json_paths(value, prefix + (key,))
    elif isinstance(document, list):
        for index, value in enumerate(document):
            found += json_paths(value, prefix + (index,))
    return found


def value_at(document: Any, path: tuple) -> Any:
    for step in path:
        document = document[step]
    return document


def replaced(document: Any, path: tuple, value: Any) -> Any:
    """A copy of ``document`` with the value at ``path`` replaced (the document is left as it was)."""
    if not path:
        return value
    copied = copy.deepcopy(document)
    value_at(copied, path[:-1])[path[-1]] = value
    return copied
