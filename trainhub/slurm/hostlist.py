"""Slurm host lists: ``a4-[0-3,7],login-0`` <-> ``["a4-0", "a4-1", "a4-2", "a4-3", "a4-7", "login-0"]``.

Public API (pure Python, no Django)::

    compress(names: Iterable[str]) -> str     # SLURM_JOB_NODELIST, NodeName=/Nodes= in slurm.conf, squeue NODELIST
    expand(text: str) -> list[str]            # the inverse; raises HostlistError on malformed text
    HostlistError(ValueError)

As slurm:src/common/hostlist.c does, names are grouped by the prefix before their trailing
number, numbers are sorted and joined into ranges, and zero padding is kept (``node[01-10]``):
consecutive numbers share a range when their digit counts match or neither is zero-padded
(``n[9-10]``, ``node[09-10]``; ``n08`` and ``n9`` stay apart). Duplicates are dropped. Names without a trailing number are printed as
they are. Groups print in order of their prefix, as ``hostlist_ranged_string`` of a sorted list.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ["HostlistError", "compress", "expand"]

_TRAILING_NUMBER = re.compile(r"^(.*?)(\d+)$")
_BRACKETED = re.compile(r"^([^\[\]]*)\[([^\[\]]+)\]([^\[\]]*)$")
_RANGE = re.compile(r"^(\d+)(?:-(\d+))?$")
#: Guard against "n[0-999999999]" exhausting memory.
_MAX_EXPANDED = 1_000_000


class HostlistError(ValueError):
    """A host list expression Slurm would not parse."""


def _split_top_level(text: str) -> list[str]:
    parts, depth, current = [], 0, []
    for char in text:
        if char == "[":
            depth += 1
        elif char == "]":
            depth -= 1
        if char == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    parts.append("".join(current))
    return parts


def expand(text: str) -> list[str]:
    """Every host named by a host list expression, in the order written."""
    hosts: list[str] = []
    for part in _split_top_level(text.strip()):
        part = part.strip()
        if not part:
            raise HostlistError(f"empty host name in {text!r}")
        if "[" not in part and "]" not in part:
            hosts.append(part)
            continue
        match = _BRACKETED.match(part)
        if not match:
            raise HostlistError(f"invalid host range {part!r}: use prefix[1-3,5]")
        prefix, ranges, suffix = match.groups()
        for item in ranges.split(","):
            bounds = _RANGE.match(item.strip())
            if not bounds:
                raise HostlistError(f"invalid range {item!r} in {part!r}")
            low_text, high_text = bounds.group(1), bounds.group(2) or bounds.group(1)
            low, high = int(low_text), int(high_text)
            if high < low:
                raise HostlistError(f"range {item!r} in {part!r} goes backwards")
            if len(hosts) + high - low + 1 > _MAX_EXPANDED:
                raise HostlistError(f"{text!r} names more than {_MAX_EXPANDED:,} hosts")
            width = len(low_text) if _padded(low_text) else 0
            hosts.extend(f"{prefix}{number:0{width}d}{suffix}" for number in range(low, high + 1))
    return hosts


def _padded(digits: str) -> bool:
    return len(digits) > 1 and digits.startswith("0")


def _joinable(previous: str, following: str) -> bool:
    """Consecutive numbers share a range if their widths match or neither is zero-padded."""
    return int(following) == int(previous) + 1 and (
        len(previous) == len(following) or not (_padded(previous) or _padded(following)))


def _ranges(numbers: list[str]) -> list[str]:
    runs: list[list[str]] = []
    for digits in numbers:
        if runs and _joinable(runs[-1][-1], digits):
            runs[-1].append(digits)
        else:
            runs.append([digits])
    return [run[0] if len(run) == 1 else f"{run[0]}-{run[-1]}" for run in runs]


def compress(names: Iterable[str]) -> str:
    """The shortest Slurm host list expression naming exactly ``names``."""
    groups: dict[str, set[str]] = {}
    pieces: list[tuple[str, str]] = []
    for name in set(names):
        match = _TRAILING_NUMBER.match(name)
        if match:
            groups.setdefault(match.group(1), set()).add(match.group(2))
        else:
            pieces.append((name, name))
    for prefix, numbers in groups.items():
        ranges = _ranges(sorted(numbers, key=lambda digits: (int(digits), len(digits))))
        if len(ranges) == 1 and "-" not in ranges[0]:
            pieces.append((prefix, f"{prefix}{ranges[0]}"))
        else:
            pieces.append((prefix, f"{prefix}[{','.join(ranges)}]"))
    return ",".join(text for _, text in sorted(pieces))
