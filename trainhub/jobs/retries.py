"""What a replica's exit means for its job: Vertex AI's retry rules as pure functions (no Django).

The rules, from Vertex's "Understanding the training service" (shared/reference/vertex-api.md,
"Worker restarts", lines 212-223, and the Scheduling proto, lines 144-147):

- "Non-zero exit → worker restarted immediately on the same VM." "Common errors" (user code
  exception, OOM) "are permanent → whole job shut down." "Non-permanent errors: up to 5 restarts
  per worker; then the entire job is retried up to 3 times before failing."
- "Transient exit codes that trigger job retry (up to 3): SIGABRT (6; 134 custom containers),
  SIGSEGV (11; 139 custom containers)."
- OOM: "The replica REPLICA_NAME ran out of memory and exited with a non-zero status of EXIT_CODE."
  User code: "The replica REPLICA_NAME exited with a non-zero status of EXIT_CODE. Termination
  reason: REASON." (the reference's space before each final period is its placeholder's).
- ``disableRetries``: "no retry on internal errors after start; if true overrides
  restartJobOnWorkerRestart to false". trainhub reads it as "no retry of any kind": the first
  failure ends the job.
- ``restartJobOnWorkerRestart``: "restart the entire CustomJob if a worker restarts": a worker
  restart becomes a job retry (and so counts against the 3 job retries).

Exit statuses come in two forms: a container runtime reports 128 + N for a process killed by
signal N, the subprocess executor reports -N. Which ones are "non-permanent" is trainhub's reading
of the rule above (see ``classify_exit``).
"""

from __future__ import annotations

import enum
import signal
from dataclasses import dataclass

MAX_WORKER_RESTARTS = 5
MAX_JOB_RETRIES = 3


class ExitKind(enum.Enum):
    SUCCEEDED = "succeeded"
    #: Non-permanent: restart the worker on its node (then retry the job).
    RESTART_WORKER = "restart-worker"
    #: Transient (SIGABRT, SIGSEGV): retry the whole job.
    RETRY_JOB = "retry-job"
    #: Permanent: out of memory.
    OUT_OF_MEMORY = "out-of-memory"
    #: Permanent: the user's code exited non-zero on its own.
    USER_ERROR = "user-error"


_TRANSIENT = {signal.SIGABRT, signal.SIGSEGV}


def exit_signal(exit_code: int) -> int | None:
    """The signal that killed the process, from either form (-N or 128 + N), else None."""
    if exit_code < 0:
        return -exit_code
    if 128 < exit_code <= 128 + 64:
        return exit_code - 128
    return None


def signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def classify_exit(exit_code: int) -> ExitKind:
    """What a replica's exit status means (the control plane's own stops are never judged).

    - 0: success.
    - Killed by SIGABRT or SIGSEGV (134/139, -6/-11): transient, the job is retried (Vertex's
      "Transient exit codes that trigger job retry").
    - Killed by SIGKILL (137, -9) that the control plane did not send: the kernel's OOM killer is
      what kills a replica so, and a container runtime reports an OOM kill as 137: out of memory
      (permanent).
    - Killed by any other signal (SIGTERM from outside, SIGHUP, SIGBUS, SIGILL, ...): the process
      did not choose to fail, so the error is non-permanent and the worker restarts.
    - Any other status (1-128, 193-255: the program's own exit, an uncaught exception, 126/127
      command not runnable): a user-code error, permanent - a restart would fail the same way.
    """
    if exit_code == 0:
        return ExitKind.SUCCEEDED
    number = exit_signal(exit_code)
    if number is None:
        return ExitKind.USER_ERROR
    if number in _TRANSIENT:
        return ExitKind.RETRY_JOB
    if number == signal.SIGKILL:
        return ExitKind.OUT_OF_MEMORY
    return ExitKind.RESTART_WORKER


def termination_reason(exit_code: int) -> str:
    number = exit_signal(exit_code)
    return "Error" if number is None else f"killed by {signal_name(number)}"


@dataclass(frozen=True)
class Decision:
    """What to do after a replica's failure: restart the worker, retry the job, or fail it."""

    action: str  # "restart-worker" | "retry-job" | "fail"
    message: str


RESTART_WORKER, RETRY_JOB, FAIL = "restart-worker", "retry-job", "fail"


def decide(*, task: str, exit_code: int, worker_restarts: int, job_retries: int,
           disable_retries: bool = False, restart_job_on_worker_restart: bool = False) -> Decision:
    """The next step after replica ``task`` exited non-zero with ``exit_code``.

    ``worker_restarts``: how often this worker was already restarted in this job attempt;
    ``job_retries``: how often the job was already retried.
    """
    kind = classify_exit(exit_code)
    if kind is ExitKind.SUCCEEDED:
        raise ValueError("a replica that exited 0 did not fail")
    if kind is ExitKind.OUT_OF_MEMORY:
        return Decision(FAIL, f"The replica {task} ran out of memory and exited with a non-zero status of {exit_code}.")
    failed = (f"The replica {task} exited with a non-zero status of {exit_code}. "
              f"Termination reason: {termination_reason(exit_code)}.")
    if kind is ExitKind.USER_ERROR or disable_retries:
        return Decision(FAIL, failed)
    if kind is ExitKind.RESTART_WORKER and not restart_job_on_worker_restart and worker_restarts < MAX_WORKER_RESTARTS:
        return Decision(RESTART_WORKER, f"{failed} Restarting it on its node "
                                        f"(restart {worker_restarts + 1} of {MAX_WORKER_RESTARTS}).")
    if job_retries < MAX_JOB_RETRIES:
        return Decision(RETRY_JOB, f"{failed} Retrying the job (retry {job_retries + 1} of {MAX_JOB_RETRIES}).")
    return Decision(FAIL, f"{failed} The job was already retried {job_retries} times.")
