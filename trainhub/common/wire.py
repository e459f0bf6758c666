"""proto3-JSON wire helpers shared by every Vertex-compatible resource.

Google's REST clients send camelCase or snake_case names, enums by name or number, int64 as
strings, and durations as "1800s". These helpers normalise input and render output the way the
v1 API does. Pure Python, no Django.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from decimal import Decimal, InvalidOperation
from typing import Any

_SNAKE_PART = re.compile(r"_([a-z0-9])")
_DURATION = re.compile(r"^(-?\d+(?:\.\d{1,9})?)s$")


def camel_key(key: str) -> str:
    """`worker_pool_specs` -> `workerPoolSpecs`; camelCase keys are returned unchanged."""
    if "_" not in key:  # most keys: a REST create renames about 40 of them
        return key
    return _SNAKE_PART.sub(lambda m: m.group(1).upper(), key)


def camelize(value: Any, *, verbatim_maps: frozenset[str] = frozenset()) -> Any:
    """Rename every message key to camelCase, recursively.

    Keys listed in ``verbatim_maps`` hold proto maps (labels, ...): their own keys are user data
    and are kept as written.
    """
    if isinstance(value, dict):
        result = {}
        for key, item in value.items():
            new_key = camel_key(key) if isinstance(key, str) else key
            if new_key in verbatim_maps and isinstance(item, dict):
                result[new_key] = dict(item)
            else:
                result[new_key] = camelize(item, verbatim_maps=verbatim_maps)
        return result
    if isinstance(value, list):
        return [camelize(item, verbatim_maps=verbatim_maps) for item in value]
    return value


class WireError(ValueError):
    """A value that does not have the wire type its field requires."""


def parse_int(value: Any, *, minimum: int | None = None, maximum: int | None = None) -> int:
    """Accept a JSON number or a decimal string (int64 fields arrive as strings)."""
    if isinstance(value, bool):
        raise WireError("must be an integer, not a boolean")
    if isinstance(value, int):
        number = value
    elif isinstance(value, float) and value.is_integer():
        number = int(value)
    elif isinstance(value, str) and re.fullmatch(r"-?\d{1,19}", value.strip()):
        number = int(value.strip())
    else:
        raise WireError(f"must be an integer, got {value!r}")
    if minimum is not None and number < minimum:
        raise WireError(f"must be at least {minimum}, got {number}")
    if maximum is not None and number > maximum:
        raise WireError(f"must be at most {maximum}, got {number}")
    return number


def parse_enum(value: Any, names_by_number: dict[int, str], *, aliases: dict[str, str] | None = None) -> str:
    """Accept an enum by name or by number (`enum-encoding=int`); return its name."""
    if isinstance(value, bool):
        raise WireError("must be an enum name or number")
    if isinstance(value, int) or (isinstance(value, str) and re.fullmatch(r"[0-9]+", value.strip())):
        number = int(value.strip()) if isinstance(value, str) else value
        if number not in names_by_number:
            raise WireError(f"unknown enum number {number}")
        return names_by_number[number]
    if isinstance(value, str):
        name = value.strip()
        if aliases and name in aliases:
            name = aliases[name]
        if name in names_by_number.values():
            return name
        allowed = ", ".join(names_by_number.values())
        raise WireError(f"unknown value {value!r}; allowed: {allowed}")
    raise WireError(f"must be an enum name or number, got {value!r}")


def parse_duration(value: Any) -> Decimal:
    """Parse a google.protobuf.Duration ("1800s", "0.5s"); plain numbers are read as seconds."""
    if isinstance(value, bool):
        raise WireError("must be a duration such as \"1800s\"")
    if isinstance(value, float) and not math.isfinite(value):
        raise WireError(f"must be a finite duration, got {value!r}")
    if isinstance(value, (int, float)):
        seconds = Decimal(str(value))
    elif isinstance(value, str):
        match = _DURATION.match(value.strip())
        if not match:
            raise WireError(f"must be a duration such as \"1800s\", got {value!r}")
        try:
            seconds = Decimal(match.group(1))
        except InvalidOperation as exc:  # pragma: no cover - regex already guarantees digits
            raise WireError(f"bad duration {value!r}") from exc
    else:
        raise WireError(f"must be a duration such as \"1800s\", got {value!r}")
    if seconds < 0:
        raise WireError("must not be negative")
    if seconds > 315_576_000_000:
        raise WireError("is larger than the maximum protobuf Duration")
    return seconds


def format_duration(seconds: Decimal | int | float) -> str:
    value = Decimal(str(seconds)).normalize()
    text = format(value, "f")
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return f"{text}s"


def format_timestamp(moment: dt.datetime | None) -> str | None:
    """RFC 3339 in UTC with microseconds, as Google APIs emit ("2020-09-15T19:09:54.342080Z")."""
    if moment is None:
        return None
    return moment.astimezone(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_timestamp(value: str) -> dt.datetime:
    try:
        text = value.strip()
        if text.endswith("Z"):
            text = text[:-1] + "+00:00"
        moment = dt.datetime.fromisoformat(text)
    except (ValueError, AttributeError) as exc:
        raise WireError(f"must be an RFC 3339 timestamp, got {value!r}") from exc
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.timezone.utc)
    return moment
