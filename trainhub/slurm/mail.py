"""Job mail (sbatch --mail-type/--mail-user): which transitions mail, to whom, and the subject line.

Pure Python, no Django. Slurm 22.05.8 as recorded on the harness (fixtures/22.05/mail, mail.sh;
slurmctld's ``mail_job_info`` in agent.c runs ``MailProg -s SUBJECT USER`` with an empty body):

- ``ALL`` is BEGIN, END, FAIL, REQUEUE, INVALID_DEPEND and STAGE_OUT (not the TIME_LIMIT ones);
  ``NONE`` (or nothing) mails nothing.
- BEGIN when the job starts: ``Slurm Job_id=1 Name=mbegin Began, Queued time 00:00:01``.
- At the end one mail at most (``job_completion_logger``): COMPLETED or CANCELLED (running or still
  pending) mail END ``... Ended, Run time 00:00:05, CANCELLED, ExitCode 0``; any other state (FAILED,
  TIMEOUT, NODE_FAIL, PREEMPTED, ...) mails FAIL ``... Failed, Run time 00:00:00, FAILED, ExitCode 3`` if
  asked, else END with the same tail. A job asking END,FAIL that fails gets only the Failed mail.
- REQUEUE (scontrol requeue, preemption): ``... Requeued, Run time 00:00:06``; a preempted job's when
  it is requeued, at the end of its GraceTime.
- INVALID_DEPEND when the job's dependency can never be satisfied (DependencyNeverSatisfied: at
  submission, or when a job it waits on fails): ``Slurm Job_id=5 Name=dinvalid Invalid dependency``
  (fixtures/22.05/release, release.sh). STAGE_OUT needs a burst buffer plugin: never sent here.
- TIME_LIMIT_50/80/90 when the run time reaches that share of the limit at slurmctld's periodic check:
  ``... Reached 50% of time limit, Run time 00:00:47``; TIME_LIMIT when it is over:
  ``... Reached time limit, Run time 00:01:17`` (then the TIMEOUT end mail).
- An array task: ``Slurm Array Task Job_id=13_2 (13) Name=...`` with ARRAY_TASKS (every task mails);
  without it the array mails once as a whole: ``Slurm Array Summary Job_id=12_* (12) Name=marray Began``
  when its first task starts, and at the end ``Slurm Array Summary Job_id=12_* (12) Name=marray Failed,
  Mixed, ExitCode [0-1]`` (tasks ended in different states; Failed: FAIL asked and a task did not
  complete), ``... Ended, COMPLETED, ExitCode [0-0]``, ``... Ended, FAILED, ExitCode [1-3]`` (END only),
  once every task has ended, whichever ends last.
- ``--mail-user`` defaults to the submitting user (trainhub: that user's e-mail address).

Public API::

    wanted(mail_type) -> frozenset[str]                # the types asked for, ALL expanded
    shown_types(mail_type) -> str                      # scontrol's MailType=
    end_type(wanted, state) -> str | None              # "END", "FAIL" or None
    time_limit_types(wanted, run_seconds, limit_seconds) -> list[str]   # TIME_LIMIT_50.. reached
    subject(kind, job, ...) -> str
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from trainhub.slurm.timefmt import format_secs

__all__ = ["ALL_TYPES", "MailJob", "end_type", "shown_types", "subject", "summary_subject", "time_limit_types",
           "wanted"]

#: What ``--mail-type=ALL`` stands for (sbatch.1).
ALL_TYPES = frozenset({"BEGIN", "END", "FAIL", "REQUEUE", "INVALID_DEPEND", "STAGE_OUT"})
#: TIME_LIMIT_<pct> types, lowest first.
_PERCENTS = ((50, "TIME_LIMIT_50"), (80, "TIME_LIMIT_80"), (90, "TIME_LIMIT_90"))
#: End states that mail END (everything else is a failure for mail).
_ENDED_STATES = frozenset({"COMPLETED", "CANCELLED"})


def wanted(mail_type: str) -> frozenset[str]:
    """The mail types a job's ``--mail-type`` asks for, ALL expanded, NONE dropped."""
    names = {name.strip().upper() for name in mail_type.split(",") if name.strip()}
    if "ALL" in names:
        names |= ALL_TYPES
    return frozenset(names - {"ALL", "NONE"})


#: The order print_mail_type names a job's mail types in (scontrol's MailType=).
_SHOWN_ORDER = ("ARRAY_TASKS", "INVALID_DEPEND", "BEGIN", "END", "FAIL", "REQUEUE", "STAGE_OUT", "TIME_LIMIT_50",
                "TIME_LIMIT_80", "TIME_LIMIT_90", "TIME_LIMIT")


def shown_types(mail_type: str) -> str:
    """scontrol show job's MailType=: the types asked for, ALL expanded, in print_mail_type's order
    whatever order --mail-type gave them in (fixtures/22.05/release: ``ALL`` and ``ALL,INVALID_DEPEND``
    are INVALID_DEPEND,BEGIN,END,FAIL,REQUEUE,STAGE_OUT; mail: ``END,FAIL``); "" for none."""
    types = wanted(mail_type)
    return ",".join(name for name in _SHOWN_ORDER if name in types)


def end_type(types: frozenset[str], state: str) -> str | None:
    """``job_completion_logger``: the one end mail for a job that ended ``state``, or None."""
    if state in _ENDED_STATES:
        return "END" if "END" in types else None
    if "FAIL" in types:
        return "FAIL"
    return "END" if "END" in types else None


def time_limit_types(types: frozenset[str], run_seconds: int, limit_seconds: int) -> list[str]:
    """TIME_LIMIT_50/80/90/TIME_LIMIT mails due for a job that has run ``run_seconds`` of its limit
    (slurmctld's ``job_time_limit`` check; the caller drops those already sent)."""
    due = [name for pct, name in _PERCENTS if name in types and run_seconds * 100 >= limit_seconds * pct]
    if "TIME_LIMIT" in types and run_seconds >= limit_seconds:
        due.append("TIME_LIMIT")
    return due


@dataclass(frozen=True)
class MailJob:
    """What a subject names: the job id, its array id and task (None outside arrays), its name."""

    job_id: int
    name: str
    array_job_id: int | None = None
    array_task_id: int | None = None


def _who(job: MailJob) -> str:
    if job.array_job_id is None:
        return f"Slurm Job_id={job.job_id} Name={job.name}"
    return f"Slurm Array Task Job_id={job.array_job_id}_{job.array_task_id} ({job.job_id}) Name={job.name}"


def subject(kind: str, job: MailJob, *, queued_seconds: int = 0, run_seconds: int = 0, state: str = "",
            exit_code: int = 0) -> str:
    """The subject slurmctld gives a job's (or one array task's) ``kind`` mail."""
    what = {
        "BEGIN": f"Began, Queued time {format_secs(queued_seconds)}",
        "END": f"Ended, Run time {format_secs(run_seconds)}, {state}, ExitCode {exit_code}",
        "FAIL": f"Failed, Run time {format_secs(run_seconds)}, {state}, ExitCode {exit_code}",
        "REQUEUE": f"Requeued, Run time {format_secs(run_seconds)}",
        "TIME_LIMIT": f"Reached time limit, Run time {format_secs(run_seconds)}",
        "INVALID_DEPEND": "Invalid dependency",
    }.get(kind) or f"Reached {kind.rsplit('_', 1)[1]}% of time limit, Run time {format_secs(run_seconds)}"
    return f"{_who(job)} {what}"


def summary_subject(kind: str, *, array_job_id: int, name: str,
                    ends: Iterable[tuple[str, int]] = ()) -> str:
    """An array's summary mail: BEGIN, or END/FAIL over every task's ``(state, exit_code)``."""
    head = f"Slurm Array Summary Job_id={array_job_id}_* ({array_job_id}) Name={name}"
    if kind == "BEGIN":
        return f"{head} Began"
    ends = list(ends)
    states = {state for state, _ in ends}
    codes = [code for _, code in ends] or [0]
    state = states.pop() if len(states) == 1 else "Mixed"
    return f"{head} {'Failed' if kind == 'FAIL' else 'Ended'}, {state}, ExitCode [{min(codes)}-{max(codes)}]"
