"""Job arrays (sbatch --array): the index expression, how squeue names array records, the
environment of a task. Pure Python.

Slurm 22.05's rules followed here (job_array.shtml, slurmctld's job_mgr.c ``_valid_array_inx`` and
``_create_job_array``; fixtures/22.05/array):
- ``--array`` takes ranges ``0-15``, lists ``1,3,5``, steps ``0-15:4`` and combinations of them, then an
  optional ``%N``: at most N tasks run at once. Every index must be below MaxArraySize; an empty, reversed,
  zero-step or malformed expression is refused with "Invalid job array specification" and takes no job id.
- The array is one record (job id = ArrayJobId) while its tasks pend. When a task starts it is split
  off under the cluster's next job id; the last task to start takes the array's own record.
- squeue names the pending record ``A_[3-5%2]`` (the pending indices, compressed into ranges, and the
  limit), a split-off task ``A_T``; ``squeue -r`` prints a pending record once per index.
- A task's environment: SLURM_ARRAY_JOB_ID, SLURM_ARRAY_TASK_ID, and SLURM_ARRAY_TASK_COUNT / _MIN / _MAX /
  _STEP of the whole array as submitted (STEP: the common difference of the indices, 1 when there is none).
- A --dependency on an array's job id waits for every task of it (combined_state).
- ``%A`` in --output/--error is the array job id, ``%a`` the task id (4294967294 while the record still
  stands for pending tasks, as scontrol shows it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

INVALID_ARRAY = "Invalid job array specification"
#: The pending reason of an array whose ``%`` limit is reached.
TASK_LIMIT = "JobArrayTaskLimit"
#: MaxArraySize's default (slurm.conf.5).
DEFAULT_MAX_ARRAY_SIZE = 1001
#: What %a stands for in the pending record's paths (NO_VAL - 1).
PENDING_TASK = 4294967294

#: At most 10 digits a number (a uint32; Python's int() refuses over 4,300 with a bare ValueError).
_PART = re.compile(r"(\d{1,10})(?:-(\d{1,10})(?::(\d{1,10}))?)?")
#: The largest ``%`` limit (its column is a 32-bit integer).
MAX_RUNNING_LIMIT = 2**31 - 1


class ArrayError(ValueError):
    """An --array expression slurmctld refuses."""


@dataclass(frozen=True)
class ArraySpec:
    """The indices of an --array expression (ascending, distinct) and its ``%`` limit (0 = none)."""

    task_ids: tuple[int, ...]
    max_running: int = 0


def parse_array(text: str, *, max_array_size: int = DEFAULT_MAX_ARRAY_SIZE) -> ArraySpec:
    """``0-15``, ``1,3,5``, ``0-15:4``, ``1-7:2,20``, each with an optional ``%N``."""
    expression, percent, limit = text.strip().partition("%")
    if percent and (not re.fullmatch(r"\d{1,10}", limit) or int(limit) > MAX_RUNNING_LIMIT):
        raise ArrayError(INVALID_ARRAY)
    ids: set[int] = set()
    for part in expression.split(","):
        match = _PART.fullmatch(part)
        if not match:
            raise ArrayError(INVALID_ARRAY)
        first = int(match.group(1))
        last = int(match.group(2)) if match.group(2) is not None else first
        step = int(match.group(3)) if match.group(3) is not None else 1
        if last < first or step < 1 or last >= max_array_size:
            raise ArrayError(INVALID_ARRAY)
        ids.update(range(first, last + 1, step))
    return ArraySpec(tuple(sorted(ids)), int(limit) if percent else 0)


def compress(task_ids: list[int] | tuple[int, ...]) -> str:
    """Ascending indices as Slurm prints a bitmap: runs of consecutive indices as ``a-b``, the rest
    one by one (``[0, 4, 8, 9, 10]`` -> ``0,4,8-10``)."""
    parts: list[str] = []
    index = 0
    while index < len(task_ids):
        end = index
        while end + 1 < len(task_ids) and task_ids[end + 1] == task_ids[end] + 1:
            end += 1
        parts.append(str(task_ids[index]) if end == index else f"{task_ids[index]}-{task_ids[end]}")
        index = end + 1
    return ",".join(parts)


def expand(text: str) -> list[int]:
    """compress's output (or any range/list expression without steps) back into indices."""
    return list(parse_array(text, max_array_size=2**32).task_ids) if text else []


def task_of(job_id: str) -> tuple[int | None, int | None]:
    """``A_T`` (an array's task, as squeue and scancel name it) -> (A, T); anything else -> (None, None)."""
    array_id, underscore, task = str(job_id).partition("_")
    if underscore and array_id.isdigit() and task.isdigit():
        return int(array_id), int(task)
    return None, None


def task_text(*, pending: str, task_id: int | None, max_running: int) -> str:
    """The record's ArrayTaskId as scontrol prints it: ``3-5%2`` for pending tasks, ``2`` for a task."""
    if task_id is not None:
        return str(task_id)
    return f"{pending}%{max_running}" if max_running else pending


def display_id(*, job_id: int, array_job_id: int | None, pending: str, task_id: int | None,
               max_running: int) -> str:
    """squeue's and sacct's JOBID: ``8``, ``1_7`` or ``1_[2-5%2]``."""
    if array_job_id is None:
        return str(job_id)
    if task_id is not None:
        return f"{array_job_id}_{task_id}"
    return f"{array_job_id}_[{task_text(pending=pending, task_id=None, max_running=max_running)}]"


def task_environment(*, array_job_id: int, task_id: int, tasks: str) -> dict[str, str]:
    """SLURM_ARRAY_* of one task; ``tasks`` is the whole array's index expression (compress's form)."""
    ids = expand(tasks)
    steps = {b - a for a, b in zip(ids, ids[1:], strict=False)}
    return {
        "SLURM_ARRAY_JOB_ID": str(array_job_id),
        "SLURM_ARRAY_TASK_ID": str(task_id),
        "SLURM_ARRAY_TASK_COUNT": str(len(ids)),
        "SLURM_ARRAY_TASK_MAX": str(ids[-1]),
        "SLURM_ARRAY_TASK_MIN": str(ids[0]),
        "SLURM_ARRAY_TASK_STEP": str(steps.pop() if len(steps) == 1 else 1),
    }


def combined_state(states: list[str]) -> str:
    """A whole array's state as a dependency on its job id sees it (sbatch.1: a dependency on an array
    waits for all its tasks): PENDING while a task pends, RUNNING while one runs, then COMPLETED when
    every task completed, else the first other ending state."""
    for waiting in ("PENDING", "RUNNING"):
        if waiting in states:
            return waiting
    return next((state for state in states if state != "COMPLETED"), "COMPLETED")


def file_pattern(pattern: str, *, array_job_id: int | None, task_id: int | None) -> str:
    """--output/--error with ``%A`` and ``%a`` resolved for an array record (``%%`` kept for the later
    substitutions); a job outside an array keeps its pattern (``%A`` is then its job id)."""
    if array_job_id is None:
        return pattern
    task = str(task_id if task_id is not None else PENDING_TASK)
    return re.sub(r"%(.)", lambda m: {"A": str(array_job_id), "a": task}.get(m.group(1), m.group(0)), pattern)
