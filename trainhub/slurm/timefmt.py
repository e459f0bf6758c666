"""Slurm time strings: parsing ``-t/--time`` and slurm.conf durations, printing them as Slurm does.

Public API (pure Python, no Django; ``None`` always means UNLIMITED/INFINITE)::

    parse_seconds(text: str) -> int | None        # time_str2secs: any duration form, in seconds
    parse_minutes(text: str) -> int | None        # time_str2mins: seconds rounded UP to minutes
    parse_time_limit(text: str) -> int | None     # sbatch/srun -t: minutes; "0" means no limit
    format_secs(seconds: int | None) -> str       # secs2time_str: "UNLIMITED", "02:03:04", "1-02:03:04"
    format_mins(minutes: int | None) -> str       # mins2time_str: the same from minutes
    format_elapsed(seconds: int) -> str           # squeue TIME cells: "0:00", "1:02:03", "1-02:03:04"
    format_time_limit(minutes: int | None) -> str # squeue TIME_LIMIT cells: "UNLIMITED" or as above
    TimeFormatError(ValueError)                   # raised for any string Slurm would reject

Accepted forms (slurm:src/common/parse_time.c ``time_str2secs``; sbatch.1 ``--time``):
``minutes``, ``minutes:seconds``, ``hours:minutes:seconds``, ``days-hours``,
``days-hours:minutes``, ``days-hours:minutes:seconds``, and ``-1`` / ``INFINITE`` / ``UNLIMITED``
(any case) for no limit. Fields are not range-checked (``90`` minutes and ``0:90`` are fine, as
in Slurm). ``time_str2mins`` rounds seconds up: ``"0:30"`` is one minute.

Where this is stricter than Slurm: Slurm's validator counts digit groups and then ``sscanf``s, so
it lets through degenerate strings such as ``"1-"`` (one day) or ``"-5"`` (a negative duration
that later fails elsewhere). Those are rejected here: every field must be a run of digits.

Printing follows the C helpers exactly: ``secs2time_str``/``mins2time_str`` (sacct Elapsed,
Timelimit, CPUTime; scontrol) pad hours to two digits, while squeue's ``_print_secs`` (TIME,
TIME_LIMIT) drops leading zero fields (``0:00``, ``5:07``, ``1:00:00``) and prints ``INVALID`` for a
negative value or one over a year.
"""

from __future__ import annotations

import re

__all__ = [
    "TimeFormatError",
    "format_elapsed",
    "format_mins",
    "format_secs",
    "format_time_limit",
    "parse_minutes",
    "parse_seconds",
    "parse_time_limit",
]

_UNLIMITED_WORDS = frozenset({"-1", "INFINITE", "UNLIMITED"})
_WITH_DAYS = re.compile(r"^(\d+)-(\d+)(?::(\d+))?(?::(\d+))?$")
_CLOCK = re.compile(r"^(\d+)(?::(\d+))?(?::(\d+))?$")
_SECONDS_PER_DAY = 86_400
#: squeue prints INVALID beyond this (``_print_secs``: ``time > 365 * 24 * 3600``).
_SQUEUE_MAX_SECONDS = 365 * _SECONDS_PER_DAY


class TimeFormatError(ValueError):
    """A duration string Slurm would not accept."""


def parse_seconds(text: str) -> int | None:
    """Seconds in a Slurm duration string, or None for UNLIMITED (``time_str2secs``)."""
    value = text.strip() if isinstance(text, str) else ""
    if not value:
        raise TimeFormatError("a time is required")
    if value.upper() in _UNLIMITED_WORDS:
        return None
    if match := _WITH_DAYS.match(value):
        days, hours, minutes, seconds = (int(group or 0) for group in match.groups())
        return days * _SECONDS_PER_DAY + hours * 3600 + minutes * 60 + seconds
    if match := _CLOCK.match(value):
        first, second, third = match.groups()
        if third is not None:  # hours:minutes:seconds
            return int(first) * 3600 + int(second) * 60 + int(third)
        return int(first) * 60 + int(second or 0)  # minutes[:seconds]
    raise TimeFormatError(
        f"invalid time {text!r}: use minutes, minutes:seconds, hours:minutes:seconds, days-hours, "
        "days-hours:minutes, days-hours:minutes:seconds or UNLIMITED"
    )


def parse_minutes(text: str) -> int | None:
    """Whole minutes (seconds rounded up), or None for UNLIMITED (``time_str2mins``)."""
    seconds = parse_seconds(text)
    return None if seconds is None else -(-seconds // 60)


#: The longest time limit a job record holds, in minutes (a signed 32-bit column; Slurm's own,
#: a uint32 below its INFINITE and NO_VAL markers, is of the same order: some 4,000 years).
MAX_TIME_LIMIT_MINUTES = 2**31 - 1


def parse_time_limit(text: str) -> int | None:
    """A job's ``-t/--time`` in minutes; None = no limit. ``0`` also means no limit (sbatch.1:
    "A time limit of zero requests that no time limit be imposed"). Longer than
    MAX_TIME_LIMIT_MINUTES is refused."""
    minutes = parse_minutes(text)
    if minutes is not None and minutes > MAX_TIME_LIMIT_MINUTES:
        raise TimeFormatError(f"time limit {text!r} is longer than {MAX_TIME_LIMIT_MINUTES} minutes")
    return None if minutes == 0 else minutes


def _days_clock(seconds: int) -> tuple[int, int, int, int]:
    return seconds // _SECONDS_PER_DAY, seconds // 3600 % 24, seconds // 60 % 60, seconds % 60


def format_secs(seconds: int | None) -> str:
    """``secs2time_str``: ``UNLIMITED``, ``HH:MM:SS`` or ``D-HH:MM:SS`` (``INVALID`` if negative)."""
    if seconds is None:
        return "UNLIMITED"
    if seconds < 0:
        return "INVALID"
    days, hours, minutes, secs = _days_clock(int(seconds))
    if days:
        return f"{days}-{hours:02d}:{minutes:02d}:{secs:02d}"
    return f"{hours:02d}:{minutes:02d}:{secs:02d}"


def format_mins(minutes: int | None) -> str:
    """``mins2time_str``: like :func:`format_secs` for a value in minutes."""
    return format_secs(None if minutes is None else minutes * 60)


def format_elapsed(seconds: int) -> str:
    """squeue's ``_print_secs``: ``M:SS``, ``H:MM:SS`` or ``D-HH:MM:SS``; ``INVALID`` when negative or
    more than a year."""
    if seconds < 0 or seconds > _SQUEUE_MAX_SECONDS:
        return "INVALID"
    days, hours, minutes, secs = _days_clock(int(seconds))
    if days:
        return f"{days}-{hours:02d}:{minutes:02d}:{secs:02d}"
    if hours:
        return f"{hours}:{minutes:02d}:{secs:02d}"
    return f"{minutes}:{secs:02d}"


def format_time_limit(minutes: int | None) -> str:
    """squeue's TIME_LIMIT cell (``%l``): ``UNLIMITED`` or the limit printed like TIME."""
    return "UNLIMITED" if minutes is None else format_elapsed(minutes * 60)
