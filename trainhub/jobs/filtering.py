"""The `filter` parameter of customJobs.list, as Vertex documents it. Pure Python.

Supported: `display_name` with = != and : (":" takes * wildcards), `state` with = !=,
`create_time` with = != < <= > >= against an RFC 3339 time, `labels.KEY=VALUE`, `labels.KEY:*`;
clauses joined by AND. Both snake_case and camelCase field names are accepted.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from trainhub.common.wire import WireError, parse_timestamp

_CLAUSE = re.compile(r'\s*([A-Za-z_][A-Za-z0-9_.\-]*)\s*(!=|<=|>=|=|:|<|>)\s*("(?:[^"\\]|\\.)*"|[^\s"]+)\s*')
_FIELD_ALIASES = {"displayName": "display_name", "createTime": "create_time"}
_OPS_BY_FIELD = {
    "display_name": {"=", "!=", ":"},
    "state": {"=", "!="},
    "create_time": {"=", "!=", "<", "<=", ">", ">="},
}


class FilterError(ValueError):
    pass


@dataclass(frozen=True)
class Clause:
    field: str
    op: str
    value: object


def _split_and(expression: str) -> list[str]:
    parts, current, quoted = [], [], False
    tokens = re.split(r'(\s+AND\s+|")', expression)
    for token in tokens:
        if token == '"':
            quoted = not quoted
            current.append(token)
        elif not quoted and re.fullmatch(r"\s+AND\s+", token or ""):
            parts.append("".join(current))
            current = []
        else:
            current.append(token or "")
    parts.append("".join(current))
    return [part for part in parts if part.strip()]


def parse_filter(expression: str) -> list[Clause]:
    if len(expression) > 2000:
        raise FilterError("filter must be at most 2000 characters")
    clauses = []
    for part in _split_and(expression.strip()):
        if re.search(r"\bOR\b", part):
            raise FilterError("OR is not supported in filter; combine clauses with AND")
        match = _CLAUSE.fullmatch(part)
        if not match:
            raise FilterError(f"cannot parse filter clause {part.strip()!r}")
        field, op, raw = match.groups()
        value = raw[1:-1].replace('\\"', '"') if raw.startswith('"') else raw
        field = _FIELD_ALIASES.get(field, field)
        if field.startswith("labels."):
            if op not in ("=", "!=", ":"):
                raise FilterError(f"labels support =, != and :, not {op}")
            if op == ":" and value != "*":
                raise FilterError("labels.KEY: only takes * (has the label)")
        elif field not in _OPS_BY_FIELD:
            raise FilterError(f"unknown filter field {field!r}; use display_name, state, create_time or labels.KEY")
        elif op not in _OPS_BY_FIELD[field]:
            raise FilterError(f"operator {op} is not supported for {field}")
        if field == "create_time":
            try:
                value = parse_timestamp(value)
            except WireError as exc:
                raise FilterError(f"create_time {exc}") from exc
        clauses.append(Clause(field, op, value))
    return clauses
