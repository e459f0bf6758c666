"""sbatch --dependency: parsing, and testing a job's dependencies against the other jobs. Pure Python.

Syntax (sbatch.1): ``type:job_id[:job_id...]`` items separated by ``,`` (all must be satisfied) or
``?`` (any one suffices), never both; ``singleton`` has no job id. Types:

- ``after``: the job has begun (or was cancelled before it began);
- ``afterany``: the job has ended, in any state;
- ``afterok``: the job ended COMPLETED (exit code 0);
- ``afternotok``: the job ended in any other state (FAILED, CANCELLED, TIMEOUT, NODE_FAIL, ...);
- ``singleton``: no earlier job of the same user and job name is still pending or running.

What slurmctld keeps and ``scontrol show job`` prints as ``Dependency=``: one item per job id,
``afterany:2(unfulfilled),afterany:4(unfulfilled)``; a satisfied item is dropped from a ``,`` list (an
``after:1`` whose job runs disappears); a ``?`` list is cleared by any satisfied item. An item that can
no longer be satisfied (afterok of a failed job) reads ``(failed)``, and the job pends with reason
DependencyNeverSatisfied (fixtures/22.05/scenario/scontrol-job-*.txt, squeue-*.txt).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["DependencyError", "DependencyStatus", "JobFacts", "evaluate", "job_ids", "parse_dependency",
           "pending_reason"]

KINDS = ("after", "afterany", "afterok", "afternotok", "singleton")
UNFULFILLED, FAILED = "unfulfilled", "failed"
#: The pending reason of a dependency that can no longer be satisfied.
NEVER_SATISFIED = "DependencyNeverSatisfied"
#: Job states that are not over yet (everything else has ended).
_ACTIVE = frozenset({"PENDING", "RUNNING", "COMPLETING", "SUSPENDED", "CONFIGURING"})
_ITEM = re.compile(r"(after|afterany|afterok|afternotok):(\d+(?::\d+)*)|(singleton)")


class DependencyError(ValueError):
    """A --dependency slurmctld refuses ("Job dependency problem")."""


@dataclass(frozen=True)
class Item:
    kind: str
    job_id: int | None
    state: str = UNFULFILLED

    def text(self) -> str:
        head = self.kind if self.job_id is None else f"{self.kind}:{self.job_id}"
        return f"{head}({self.state})"


@dataclass(frozen=True)
class JobFacts:
    """What a dependency looks at of another job."""

    job_id: int
    state: str


@dataclass(frozen=True)
class DependencyStatus:
    """``text``: what remains (scontrol's Dependency=, "" once satisfied); ``reason``: the pending
    reason it gives (None once satisfied)."""

    text: str
    reason: str | None


def _split(text: str) -> tuple[list[str], str]:
    if "," in text and "?" in text:
        raise DependencyError("a dependency list may not mix ',' and '?'")
    separator = "?" if "?" in text else ","
    return text.split(separator), separator


def parse_dependency(text: str, *, job_id: int | None = None) -> str:
    """--dependency's value as slurmctld stores it (every item unfulfilled); "" for an empty value."""
    text = text.strip()
    if not text:
        return ""
    parts, separator = _split(text)
    items: list[Item] = []
    for part in parts:
        match = _ITEM.fullmatch(part.strip())
        if match is None:
            raise DependencyError(f"invalid dependency {part!r}")
        if match.group(3):
            items.append(Item("singleton", None))
            continue
        for number in match.group(2).split(":"):
            if job_id is not None and int(number) == job_id:
                raise DependencyError("a job cannot depend on itself")
            items.append(Item(match.group(1), int(number)))
    return separator.join(item.text() for item in dict.fromkeys(items))


def _items(text: str) -> tuple[list[Item], str]:
    parts, separator = _split(text)
    items = []
    for part in parts:
        head, _, state = part.partition("(")
        kind, _, number = head.partition(":")
        items.append(Item(kind, int(number) if number else None, state.rstrip(")") or UNFULFILLED))
    return items, separator


def _item_state(item: Item, facts: Callable[[int], JobFacts | None], singleton_blocked: bool) -> str | None:
    """None: satisfied; else UNFULFILLED or FAILED."""
    if item.kind == "singleton":
        return UNFULFILLED if singleton_blocked else None
    other = facts(item.job_id)
    if other is None:  # purged: slurmctld counts an unknown job as done
        return None
    if item.kind == "after":
        return UNFULFILLED if other.state == "PENDING" else None
    if other.state in _ACTIVE:
        return UNFULFILLED
    if item.kind == "afterany":
        return None
    completed = other.state == "COMPLETED"
    if item.kind == "afterok":
        return None if completed else FAILED
    return FAILED if completed else None


def evaluate(text: str, facts: Callable[[int], JobFacts | None], *, singleton_blocked: bool = False
             ) -> DependencyStatus:
    """Test a job's remaining dependency ``text``; ``facts(job_id)`` gives another job (None if
    unknown), ``singleton_blocked`` whether an earlier job of its user and name is still active."""
    if not text:
        return DependencyStatus("", None)
    items, separator = _items(text)
    states = [_item_state(item, facts, singleton_blocked) for item in items]
    if separator == "?" and any(state is None for state in states):
        return DependencyStatus("", None)
    remaining = separator.join(Item(item.kind, item.job_id, state).text()
                               for item, state in zip(items, states) if state is not None)
    return DependencyStatus(remaining, pending_reason(remaining))


def job_ids(text: str) -> set[int]:
    """The job ids a stored dependency names."""
    return {item.job_id for item in _items(text)[0] if item.job_id is not None} if text else set()


def pending_reason(text: str) -> str | None:
    """The reason a stored dependency gives: Dependency, DependencyNeverSatisfied, or None (none left)."""
    if not text:
        return None
    return NEVER_SATISFIED if f"({FAILED})" in text and (
        "?" not in text or f"({UNFULFILLED})" not in text) else "Dependency"
