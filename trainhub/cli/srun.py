"""`trainhub slurm srun [sbatch's options] [-l] [--pty] [--exact] [--overlap] COMMAND [ARGS...]`
from a login shell: srun outside an allocation makes its own (srun.1), as Slurm 22.05's srun
does (fixtures/22.05/srun-alone):

- The job is queued as salloc's is (trainhub.cli.salloc.allocate_and_run: the same allocation,
  keep-alive and relinquish), named after COMMAND's basename unless -J (``srun /no/such/program``:
  JobName ``program``). A job still pending after a moment prints ``srun: job N queued and waiting
  for resources``, then ``srun: job N has been allocated resources``; granted at once, nothing.
  Refused: ``srun: error: Unable to allocate resources: REASON``, exit 1, no job.
- Once granted, one step runs on it: the allocation's command is trainhub's step launcher
  (trainhub.agent.srun, the ``srun`` a batch script or salloc's command runs) given the step's
  options (-N, -n, --ntasks-per-node as the job was given them; -l, --pty, --exact, --overlap, -m), so
  the tasks' output comes to this terminal (``-l``: ``N: `` labels), failed tasks print srun's
  ``srun: error: NODE: task N: Exited with exit code C``, and srun exits with the worst task's
  status. The job ends with that exit code (sacct: ``N`` and ``N.0``, no ``N.batch``: nothing ran
  as a batch script).
- SIGINT, SIGTERM or SIGHUP while pending: ``srun: Job allocation N has been revoked``, ``srun:
  Force Terminated JobId=N``, exit 1; the job is cancelled (sacct: ``CANCELLED by UID``, no step).
- While the step runs (without --pty) the step launcher is in a process group of its own and gets
  each SIGINT once, from Ctrl-C or ``kill -INT``: one says how the tasks are, two within a second
  abort the step (trainhub.agent.srun.Interrupts, fixtures/22.05/srun-details/int-*); the job then
  ends CANCELLED by its user, ExitCode 0:0, and the step CANCELLED by its user too, while srun exits
  with the step's status (fixtures/22.05/srun-abort, job 1; srun inside a batch script or salloc's
  command leaves the job running: jobs 2 and 3). The job
  ending under the step (scancel) is the step launcher's to say (srun-details/scancel-8.err):
  this process prints nothing of it and hangs nothing up.
- ``-v``: the options given (defined_options), then the step launcher's launch lines
  (srun-details/verbose-4.err); ``-vv`` adds 22.05's debug lines, the step launcher's
  (fixtures/22.05/srun-vv/vv-1.err).
"""

from __future__ import annotations

import os
import sys

from trainhub.cli.client import CliError
from trainhub.cli.salloc import Words, allocate_and_run

TYPE_CHECKING = False  # typing.TYPE_CHECKING, which type checkers take as True, without importing typing
if TYPE_CHECKING:
    from typing import Any

SRUN = Words(
    program="srun", allocate_failed="srun: error: Unable to allocate resources: ",
    pending=("srun: job {job} queued and waiting for resources",),
    allocated=("srun: job {job} has been allocated resources",),
    granted=(),
    aborted=("srun: Job allocation {job} has been revoked", "srun: Force Terminated JobId={job}"),
    revoked=("srun: Job allocation {job} has been revoked",),
    timed_out=("srun: Job allocation {job} has been revoked",),
    relinquishing=(), hang_up=False)
#: sbatch's options that also shape the step (the step asks for what the job was given).
STEP_SHAPE = ("nodes", "ntasks", "ntasks-per-node")


def _argument(name: str, value: str | None) -> str:
    return f"--{name}" if value is None else f"--{name}={value}"


def split(argv: list[str]) -> tuple[list[str], list[str]]:
    """(the allocation's sbatch options, the step launcher's arguments) of srun's command line."""
    from trainhub.slurm.sbatch_argv import OPTIONS, STEP_OPTIONS, SbatchError, split_options

    try:
        given, command = split_options(argv, OPTIONS | STEP_OPTIONS)
    except SbatchError as exc:
        raise CliError(str(exc).replace("sbatch", "srun")) from exc
    if not command:
        raise CliError("srun: fatal: No command given to execute.")
    job = [_argument(name, value) for name, value in given if name not in STEP_OPTIONS]
    # SLURM_HOSTFILE without -m is -m arbitrary (fixtures/22.05/small-diffs/alone-no-m.txt)
    if ("distribution", "arbitrary") in given or (os.environ.get("SLURM_HOSTFILE")
                                                  and not any(name == "distribution" for name, _ in given)):
        job += _arbitrary_allocation(given)
    if not any(name == "job-name" for name, _ in given):
        job.insert(0, f"--job-name={os.path.basename(command[0])}")
    step = [_argument(name, value) for name, value in given
            if name in STEP_OPTIONS or (name in STEP_SHAPE and not _node_range(name, value))]
    return job, ["srun", *step, "--", *command]


def _node_range(name: str, value: str | None) -> bool:
    """-N MIN-MAX shapes the job, not its step: the step runs on every node the job got, a task on each
    without -n (srun's job_create_allocation takes the allocation's node count; fixtures/22.05/alloc-range:
    ``srun -N 2-4`` on 4 idle nodes runs 4 tasks, on 2 free ones 2)."""
    return name == "nodes" and value is not None and "-" in value


def _arbitrary_allocation(given: list[tuple[str, str | None]]) -> list[str]:
    """``-m arbitrary`` outside an allocation: the job is given SLURM_HOSTFILE's nodes, as many, and
    one task a name unless -n (fixtures/22.05/srun-plane/srun-alone-arbitrary.txt: ``-n 3`` over gpu3,
    gpu1, gpu3 runs on gpu[1,3]; small-diffs/alone-*.txt: host lists and ``NAME*K`` read as in a job,
    no more lines than -n); the step launcher puts the tasks there. More nodes than -n are cut to the
    first in node-list order, the job asked for all of them so that it says ``can't run 2 processes on
    3 nodes`` (srun's _opt_verify; hostfile-edge/alone-comma-over). A file of more names than -n is
    allocated all the same and its step then fails (hostfile-edge/alone-over; srun-range/many-*: 5,000
    names with -n 2, counted, not listed, fail the same). Without the file srun
    refuses it (srun-alone-arbitrary-nohost.err), as it refuses a file it cannot read (read_hostfile)."""
    from trainhub.agent.srun import read_hostfile
    from trainhub.slurm.steps import first_nodes, hostfile_names

    path = os.environ.get("SLURM_HOSTFILE")
    if not path:
        raise CliError("srun: error: With Arbitrary distribution you need to specify a nodelist or hostfile "
                       "with the -w option")
    ntasks = next((int(value) for name, value in given if name == "ntasks" and value and value.isdigit()), None)
    try:
        _, nodes, tasks = hostfile_names(read_hostfile(path, ntasks))
    except ValueError as exc:
        message = str(exc)
        raise CliError(message if message.startswith("srun: ") else f"srun: error: {message}") from exc
    kept = first_nodes(nodes, ntasks) if ntasks is not None and len(nodes) > ntasks else nodes
    return [f"--nodelist={','.join(kept)}", f"--nodes={len(nodes)}", *([f"--ntasks={tasks}"] if ntasks is None else [])]


def defined_options(argv: list[str]) -> list[str]:
    """``srun -v``'s first lines: the options given, by name, as Slurm 22.05 lists them
    (fixtures/22.05/srun-details/verbose-4.err: ``srun: account             : physics``); none
    without -v. A flag's value is ``set`` (not recorded: only -A, -N, -p and -v were)."""
    from trainhub.slurm.sbatch_argv import OPTIONS, STEP_OPTIONS, split_options

    given, _ = split_options(argv, OPTIONS | STEP_OPTIONS)
    verbose = sum(name == "verbose" for name, _ in given)
    if not verbose:
        return []
    # The step launcher's lines (its imports are paid for with -v only).
    from trainhub.agent.srun import defined_options as option_lines

    values = {name: "set" if value is None else value for name, value in given}
    values["verbose"] = str(verbose)
    return option_lines(sorted(values.items()))


def run(client: Any, cluster_path: str, argv: list[str]) -> int:
    """srun: allocate, run one step there, relinquish; srun's exit status."""
    job, step = split(argv)
    for line in defined_options(argv):
        sys.stderr.write(line + "\n")
    # The step's own variables (SLURM_NTASKS, SLURM_NTASKS_PER_NODE) are the step launcher's to set.
    return allocate_and_run(client, cluster_path, job, step, words=SRUN, given=[],
                            pass_interrupts="--pty" not in step[:step.index("--")], completes_job=True)
