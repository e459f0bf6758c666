"""`trainhub slurm salloc [sbatch's options] [COMMAND [ARGS...]]`: an allocation, and COMMAND run here.

As Slurm 22.05's salloc (fixtures/22.05/salloc), on stderr:

- ``salloc: Granted job allocation N`` once the job runs and its nodes finished the prolog; a job
  still PENDING (not started) after GRANT_GRACE_SECONDS prints ``salloc: Pending job allocation N`` and ``salloc:
  job N queued and waiting for resources`` first, then ``salloc: job N has been allocated resources``.
- COMMAND (default: the user's $SHELL) runs on this machine with salloc's environment
  (jobenv.salloc_environment: SLURM_JOB_ID, SLURM_JOB_NODELIST, SLURM_NNODES, ...), and with
  trainhub's ``srun`` first on its PATH and the allocation's step credential, so ``srun hostname``
  runs a step on the allocation's nodes (trainhub.agent.srun, as inside a batch script).
- When COMMAND exits: ``salloc: Relinquishing job allocation N``; the job ends COMPLETED or FAILED
  with COMMAND's exit code, and salloc exits with it (a COMMAND killed by SIGHUP, SIGINT, SIGQUIT or
  SIGKILL: 0, by another signal: 1, as salloc.c does).
- SIGINT, SIGTERM or SIGHUP while pending: ``salloc: Job allocation N has been revoked.``, ``salloc:
  Job aborted due to signal``, exit 1; the job is cancelled.
- The allocation ends under COMMAND (scancel, time limit, its salloc silent too long): ``salloc: Job
  allocation N has been revoked.`` (after a time limit: ``salloc: Job N has exceeded its time limit
  and its allocation has been revoked.``) and COMMAND is hung up (SIGHUP), as salloc does to an
  interactive shell. Slurm 22.05 leaves a command without a terminal running (salloc-11); trainhub
  never leaves a command working on an allocation that is gone.

salloc calls the control plane every POLL_SECONDS while it waits and while COMMAND runs: that
keeps the allocation (an allocation whose salloc went silent ends: services.allocations).
"""

from __future__ import annotations

import os
import signal
import sys
import time
from collections import namedtuple

from trainhub.cli.client import CliError
from trainhub.cli.slurm_submit import alloc_place

TYPE_CHECKING = False  # typing.TYPE_CHECKING, which type checkers take as True, without importing typing
if TYPE_CHECKING:
    import subprocess
    import threading
    from typing import Any

GRANT_GRACE_SECONDS = 2.0
POLL_SECONDS = 2.0
#: A command killed by one of these was most likely stopped by its user: salloc exits 0 (salloc.c).
USER_SIGNALS = (signal.SIGHUP, signal.SIGINT, signal.SIGQUIT, signal.SIGKILL)


#: How the server words a refused allocation (trainhub.slurm.services.allocations.ALLOCATE_FAILED).
ALLOCATE_FAILED = "salloc: error: Job submit/allocate failed: "


class Words(namedtuple("Words", ["program", "allocate_failed", "pending", "allocated", "granted", "aborted",
                                 "revoked", "timed_out", "relinquishing", "hang_up"])):
    """What a command that makes its own allocation prints on stderr ({job}: the job id), where it
    prints anything: salloc's (fixtures/22.05/salloc) or srun's (fixtures/22.05/srun-alone).
    ``allocate_failed`` comes before the reason of a refused allocation; the others are lines:
    ``pending`` still pending after GRANT_GRACE_SECONDS, ``allocated`` granted after those,
    ``granted`` granted (after them or at once), ``aborted`` SIGINT, SIGTERM or SIGHUP while
    pending (the job is cancelled), ``revoked`` the job ended while pending or under COMMAND,
    ``timed_out`` it reached its time limit under COMMAND, ``relinquishing`` COMMAND exited;
    ``hang_up``: whether COMMAND is hung up (and ``revoked`` or ``timed_out`` said) when the
    allocation ends under it (salloc's shell), or left to say it itself (srun's step launcher, whose
    step ends with the job: fixtures/22.05/srun-details/scancel-8.err).
    (A named tuple: dataclasses would cost the CLI's start-up inspect.)"""

    __slots__ = ()


SALLOC = Words(
    program="salloc", allocate_failed=ALLOCATE_FAILED,
    pending=("salloc: Pending job allocation {job}", "salloc: job {job} queued and waiting for resources"),
    allocated=("salloc: job {job} has been allocated resources",),
    granted=("salloc: Granted job allocation {job}",),
    aborted=("salloc: Job allocation {job} has been revoked.", "salloc: Job aborted due to signal"),
    revoked=("salloc: Job allocation {job} has been revoked.",),
    timed_out=("salloc: Job {job} has exceeded its time limit and its allocation has been revoked.",),
    relinquishing=("salloc: Relinquishing job allocation {job}",), hang_up=True)


def _say(lines: tuple[str, ...], job: int) -> None:
    for line in lines:
        sys.stderr.write(line.format(job=job) + "\n")
    sys.stderr.flush()


class Allocation:
    """One salloc job as its salloc sees it over REST."""

    def __init__(self, client: Any, path: str, job_id: int) -> None:
        self.client = client
        self.path = path
        self.job_id = job_id
        #: The allocation ended under COMMAND: there is nothing left to relinquish.
        self.revoked = False

    def keep_alive(self) -> dict:
        return self.client.post(f"{self.path}:keepAlive", {})

    def step_credential(self) -> str:
        return self.client.post(f"{self.path}:stepCredential", {})["credential"]

    def relinquish(self, exit_code: int, signum: int, *, cancelled: bool = False, launch_failed: bool = False) -> None:
        """End the allocation with COMMAND's exit; ``cancelled``: CANCELLED by its user instead (srun
        whose step two Ctrl-C aborted); ``launch_failed``: FAILED, JobLaunchFailure (srun whose step
        was refused)."""
        body = {"exitCode": exit_code, "signal": signum}
        flags = {name: True for name, given in (("cancelled", cancelled), ("launchFailed", launch_failed)) if given}
        self.client.post(f"{self.path}:relinquish", {**body, **flags})


def _wait_granted(allocation: Allocation, interrupted: list[int], *, words: Words = SALLOC, now=time.monotonic,
                  sleep=time.sleep) -> dict | None:
    """Wait until the allocation is ready; its last answer, or None when it was revoked (an
    interrupt cancels it)."""
    started, pending_said = now(), False
    while True:
        if interrupted:
            allocation.relinquish(0, 0)
            _say(words.aborted, allocation.job_id)
            return None
        answer = allocation.keep_alive()
        state = answer["job"]["state"]
        if state not in ("PENDING", "RUNNING"):
            _say(words.revoked, allocation.job_id)
            return None
        if answer["ready"]:
            _say((words.allocated if pending_said else ()) + words.granted, allocation.job_id)
            return answer
        # a running job whose nodes are still in their prolog was allocated at once, as slurmctld's
        # job_allocate answers: only one still pending after the grace is said to wait
        if not pending_said and state == "PENDING" and now() - started >= GRANT_GRACE_SECONDS:
            _say(words.pending, allocation.job_id)
            pending_said = True
        sleep(0.25 if not pending_said else POLL_SECONDS)


#: trainhub.agent.srun's file, found beside this package without importing it (argparse, ssl, urllib.request).
SRUN_PROGRAM = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "agent", "srun.py")


def srun_directory(root: str) -> str:
    """A directory holding ``srun`` (trainhub.agent.srun run by this Python), to put first on the PATH."""
    import shlex

    directory = os.path.join(root, "bin")
    os.mkdir(directory)
    program = os.path.join(directory, "srun")
    with open(program, "w") as handle:
        handle.write(f"#!/bin/sh\nexec {shlex.quote(sys.executable)} -S {shlex.quote(SRUN_PROGRAM)} \"$@\"\n")
    os.chmod(program, 0o755)
    return directory


def command_environment(answer: dict, *, job_id: int, base_url: str, credential: str, bin_dir: str,
                        given: list[tuple[str, str | None]], words: Words = SALLOC) -> dict[str, str]:
    """This process's environment, salloc's variables (``given``: the sbatch options on the command
    line, as sbatch_argv.split_options reads them), and what srun needs."""
    import socket

    from trainhub.slurm.jobenv import salloc_environment

    job = answer["job"]
    env = dict(os.environ)
    env.update(salloc_environment(
        cluster_name=answer["clusterName"], job_id=job_id, job_name=job["name"], account=job["account"],
        partition=job["partition"], qos=job["qos"], hosts=answer["hosts"], cpus_per_node=answer["cpusPerNode"],
        num_tasks=job["tasks"], submit_dir=os.getcwd(), submit_host=socket.gethostname().split(".")[0],
        cpus_per_task=job["cpusPerTask"], tasks_given=any(name in ("ntasks", "ntasks-per-node") for name, _ in given),
        ntasks_per_node=next((int(value) for name, value in given if name == "ntasks-per-node" and value), None),
        node_aliases=words.program == "salloc",
        # what salloc exports of its GPU and memory options; srun outside an allocation gives its tasks no GPU one
        # (fixtures/22.05/cpus-per-gpu/srun.txt: no SLURM_GPUS, no SLURM_CPUS_PER_GPU)
        **({"gpus": (job.get("gpusPerJob", 0), job.get("gpusPerNodeOption", 0), job.get("gpusPerTask", 0)),
            "cpus_per_gpu": job.get("cpusPerGpu", 0),
            "memory": (job.get("memPerNode") or 0, job.get("memPerCpu") or 0, job.get("memPerGpu") or 0)}
           if words.program == "salloc" else {})))
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '/usr/local/bin:/usr/bin:/bin')}"
    env["TRAINHUB_URL"] = base_url
    env["TRAINHUB_STEP_CREDENTIAL"] = credential
    return env


def exit_status(returncode: int) -> tuple[int, int, int]:
    """(job exit code, job signal, salloc's exit status) of COMMAND's Popen returncode."""
    if returncode >= 0:
        return returncode, 0, returncode
    signum = -returncode
    return 0, signum, 0 if signum in USER_SIGNALS else 1


def _watch(allocation: Allocation, child: subprocess.Popen, stop: threading.Event, *,
           words: Words = SALLOC) -> None:
    """Keep the allocation alive while COMMAND runs; hang COMMAND up when the allocation ends under it."""
    while not stop.wait(POLL_SECONDS):
        try:
            job = allocation.keep_alive()["job"]
        except CliError:
            continue  # the control plane is away for a moment; the keep-alive timeout allows for it
        if job["state"] != "RUNNING":
            allocation.revoked = True
            if not words.hang_up:
                return
            _say(words.timed_out if job["state"] == "TIMEOUT" and job["reason"] != "InactiveLimit" else words.revoked,
                 allocation.job_id)
            if child.poll() is None:
                child.send_signal(signal.SIGHUP)
            return


def run(client: Any, cluster_path: str, argv: list[str]) -> int:
    """salloc: allocate, run COMMAND here, relinquish; salloc's exit status."""
    from trainhub.slurm.sbatch_argv import SbatchError, split_options

    try:
        given, command = split_options(argv)
    except SbatchError as exc:
        raise CliError(str(exc).replace("sbatch", "salloc")) from exc
    options = argv[:len(argv) - len(command)]
    if options and options[-1] == "--":
        options = options[:-1]
    return allocate_and_run(client, cluster_path, options, command or [os.environ.get("SHELL") or "/bin/sh"],
                            words=SALLOC, given=given)


def allocate_and_run(client: Any, cluster_path: str, options: list[str], command: list[str], *,
                     words: Words, given: list[tuple[str, str | None]], pass_interrupts: bool = False,
                     completes_job: bool = False) -> int:
    """Allocate with sbatch's ``options`` (``given``: them as sbatch_argv.split_options reads them),
    run ``command`` here with srun usable inside (its PATH finds trainhub's ``srun`` first), keep the
    allocation alive meanwhile, relinquish it with the command's exit code; the exit status
    (salloc's rules). ``pass_interrupts`` (srun without --pty, whose command is the step launcher):
    the command runs in a process group of its own and every SIGINT this process gets, from the
    terminal's Ctrl-C or ``kill -INT``, reaches it once (srun counts them: one says how the tasks
    are, two within a second abort the step). ``completes_job`` (srun outside an allocation, whose
    command is the step launcher): the job ends as the step launcher says, with its tasks' worst
    exit code or signal, or CANCELLED by its user after two Ctrl-C (fixtures/22.05/srun-abort/sacct-p.txt,
    job 1), or FAILED with JobLaunchFailure when its step was refused (fixtures/22.05/hostfile-edge,
    job 1), and is completed so even when it ended under the step."""
    try:
        answer = client.post(f"{cluster_path}/allocations", {"sallocArgs": options, **alloc_place()})
    except CliError as exc:
        if exc.http_status != 400:
            raise
        # The job was refused: Slurm's lines and exit status, not the CLI's ERROR.
        sys.stderr.write(exc.message.replace(ALLOCATE_FAILED, words.allocate_failed)
                         .replace("salloc: ", f"{words.program}: ") + "\n")
        return 1
    for warning in answer.get("warnings", ()):
        sys.stderr.write(f"{words.program}: {warning}\n")
    job_id = answer["jobId"]
    allocation = Allocation(client, f"{cluster_path}/jobs/{job_id}", job_id)
    interrupted: list[int] = []
    previous = {signum: signal.signal(signum, lambda signum, frame: interrupted.append(signum))
                for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    try:
        answer = _wait_granted(allocation, interrupted, words=words)
        if answer is None:
            return 1
        credential = allocation.step_credential()
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    # What runs COMMAND, loaded once the allocation is granted (a refused one needs none of it).
    import subprocess
    import tempfile
    import threading

    with tempfile.TemporaryDirectory(prefix="salloc-") as scratch:
        env = command_environment(answer, job_id=job_id, base_url=client.base_url, credential=credential,
                                  bin_dir=srun_directory(scratch), given=given, words=words)
        completion_path = os.path.join(scratch, "completion")
        if completes_job:
            env["TRAINHUB_SRUN_COMPLETION"] = completion_path  # trainhub.agent.srun.COMPLETION
        # The terminal's Ctrl-C and Ctrl-\ are COMMAND's; SIGTERM and SIGHUP to salloc are passed on.
        try:
            child = subprocess.Popen(command, env=env, process_group=0 if pass_interrupts else None)
        except OSError as exc:
            sys.stderr.write(f"salloc: error: {command[0]}: {exc.strerror}\n")
            child = None
        if child is not None:
            ignored = {signum: signal.signal(signum, signal.SIG_IGN)
                       for signum in ((signal.SIGQUIT,) if pass_interrupts else (signal.SIGINT, signal.SIGQUIT))}
            passed = {signum: signal.signal(signum, lambda signum, frame: child.send_signal(signum))
                      for signum in ((signal.SIGINT,) if pass_interrupts else ()) + (signal.SIGTERM, signal.SIGHUP)}
            stop = threading.Event()
            watcher = threading.Thread(target=_watch, args=(allocation, child, stop), kwargs={"words": words},
                                       daemon=True)
            watcher.start()
            try:
                returncode = child.wait()
            finally:
                stop.set()
                watcher.join()
                for signum, handler in {**ignored, **passed}.items():
                    signal.signal(signum, handler)
        else:
            returncode = 127
        completion = _completion(completion_path)
    code, signum, status = exit_status(returncode)
    if completion is not None:
        code, signum = completion["exitCode"], completion["signal"]
    if not allocation.revoked:
        _say(words.relinquishing, job_id)
    if not allocation.revoked or completion is not None:
        # srun completes its job even when it ended under the step: slurmctld keeps the exit code
        # for scontrol show job (fixtures/22.05/srun-timeout/scontrol-2.txt: ExitCode=0:15).
        allocation.relinquish(code, signum, cancelled=bool(completion and completion["cancelled"]),
                              launch_failed=bool(completion and completion.get("launchFailed")))
    return status


def _completion(path: str) -> dict | None:
    """How the step launcher says srun's job is to end (trainhub.agent.srun.COMPLETION); None
    when it wrote nothing (it was refused or interrupted before its step ran)."""
    import json

    try:
        with open(path) as handle:
            return json.load(handle)
    except FileNotFoundError:
        return None
