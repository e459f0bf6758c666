"""Walking a JSON document: every place in it, a copy with one place replaced, and the edge values
the fuzz tests put there - the values that found most 5xx bugs so far, which random generation
rarely draws: NUL characters, lone UTF-16 surrogates, huge strings and arrays, deep nesting,
numbers beyond int64 and float. ``hostile_values`` is a hypothesis strategy drawing them."""

from __future__ import annotations

import copy
import json
from typing import Any

from hypothesis import strategies as st

STRING_EDGES = ("", "\u0000", "x" * 100_000, "ünï 日本 🚀", "../../etc/passwd", "; rm -rf /")
NUMBER_EDGES = (-1, 0, 2**63, 10**30, 1e308, "NaN", "12")
#: Strings JSON can spell (``"\\udc80"``) but no UTF-8 text or database can hold. Kept apart from
#: STRING_EDGES: they cannot go into a URL or a command line.
SURROGATE_EDGES = ("\udc80", "ok\ud800", "\udfff\ud800")
#: Arrays nested this deep are past Python's recursion limit (json.loads itself fails on them).
DEEP_NESTING = 1_000
DEEP_TEXT = "[" * DEEP_NESTING + "]" * DEEP_NESTING
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


def nested(depth: int, leaf: Any = None) -> str:
    """JSON text of ``leaf`` inside ``depth`` arrays and objects, alternating."""
    opening = "".join('[' if level % 2 else '{"a":' for level in range(depth))
    closing = "".join(']' if level % 2 else '}' for level in reversed(range(depth)))
    return opening + json.dumps(leaf) + closing


#: Text with lone surrogates (hypothesis leaves category Cs out unless asked).
surrogate_text = st.text(st.characters(categories=["Cs", "L", "N"]), min_size=1, max_size=8).filter(
    lambda text: any("\ud800" <= char <= "\udfff" for char in text))
hostile_scalars = st.one_of(
    st.sampled_from(STRING_EDGES + NUMBER_EDGES + SURROGATE_EDGES), surrogate_text,
    st.integers(min_value=-(10**40), max_value=10**40), st.floats(allow_nan=False),
    st.integers(1, 200_000).map(lambda length: "x" * length), st.none(), st.booleans())
#: JSON values with the edge values anywhere inside them.
hostile_values = st.recursive(hostile_scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.one_of(st.text(max_size=8), surrogate_text), inner, max_size=4)),
    max_leaves=12)
#: JSON texts: a hostile value, or one buried 1 to 1,500 levels deep.
hostile_texts = st.one_of(
    hostile_values.map(json.dumps),
    st.builds(nested, st.integers(1, 1_500), hostile_scalars))
