"""What every `trainhub slurm` command shares (the cluster's path, printing Slurm's text) and `sbatch`,
which shell loops call once per job - so this module imports no argparse.

`quick_args` reads the usual `trainhub slurm sbatch [--cluster C] [sbatch options] --wrap CMD` itself,
as the argparse parser of trainhub.cli.slurm would: argparse, with re and gettext, and building three
parsers (trainhub, slurm, sbatch) were a fifth of a call's start-up. Any command line it could read
differently from argparse - help, `--`, a flag abbreviated or glued to a value argparse might take
apart, a flag's value that looks like an option - it leaves to argparse, so
every error and help text stays argparse's own (tests/cli/test_quick_args.py compares the two).
"""

from __future__ import annotations

import sys

from trainhub.cli.client import CliError, resource_path

TYPE_CHECKING = False  # typing.TYPE_CHECKING, which type checkers take as True, without importing typing
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

DEFAULT_REGION = "us-central1"
CLUSTERS = "slurmClusters"
#: The flags sbatch's argparse parser knows besides -h/--help (its own, then the global ones), each
#: taking one value; everything else on the line is sbatch's, passed through in order.
VALUED_FLAGS = ("--cluster", "--region", "--url", "--token", "--project")
#: The flags `trainhub` and `trainhub slurm` know (they may come before `slurm` and `sbatch`).
GLOBAL_FLAGS = ("--url", "--token", "--project")
COMMAND = "trainhub.slurm.sbatch"


def cluster_path(ctx: Any, suffix: str = "") -> str:
    """The cluster named by --cluster, or the region's only cluster."""
    client = ctx.client()
    cluster = ctx.args.cluster
    if not cluster:
        names = [item["name"].rsplit("/", 1)[-1] for item in
                 client.get(resource_path(client.project, ctx.args.region, CLUSTERS)).get(CLUSTERS, [])]
        if len(names) != 1:
            raise CliError(f"{len(names)} Slurm clusters in {client.project}/{ctx.args.region}"
                           + (f" ({', '.join(names)})" if names else "") + ": pass --cluster")
        cluster = ctx.args.cluster = names[0]
    return resource_path(client.project, ctx.args.region, CLUSTERS, cluster, suffix)


def alloc_place() -> dict[str, Any]:
    """Where this sbatch, salloc or srun runs, as slurmctld records it: this host's short name and this
    process's session id (scontrol's AllocNode:Sid), and its working directory (the job's WorkDir
    without --chdir, which sbatch takes relative to it)."""
    import os
    import socket

    return {"allocNode": socket.gethostname().split(".")[0], "allocSid": os.getsid(0), "submitDir": os.getcwd()}


def print_text(text: str) -> None:
    if text:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
        sys.stdout.flush()


def submitted_script_path(name: str, given: list[tuple[str, str | None]]) -> str:
    """The script file sbatch reads and names as the job's Command: ``name`` looked for in the last
    --chdir (relative to here) or here, then on PATH (sbatch_argv.script_path)."""
    import os

    from trainhub.slurm.sbatch_argv import script_path

    chdirs = [value for option, value in given if option == "chdir" and value]
    return script_path(name, chdir=os.path.join(os.getcwd(), chdirs[-1]) if chdirs else os.getcwd(),
                       search=os.environ.get("PATH"), is_file=os.path.isfile)


def sbatch(ctx: Any) -> int:
    """Submit a batch job; prints `Submitted batch job N`."""
    # sbatch's grammar only (the server parses the values), and only here: squeue/sprio need none of it.
    from trainhub.slurm.sbatch_argv import SbatchError, split_options

    argv = list(ctx.args.sbatch_args)
    try:
        given, rest = split_options(argv)
    except SbatchError as exc:
        raise CliError(str(exc)) from exc
    body: dict[str, Any] = {"sbatchArgs": argv[:len(argv) - len(rest)], **alloc_place()}
    if rest:
        path = submitted_script_path(rest[0], given)
        try:
            with open(path, encoding="utf-8") as script:
                body["script"] = script.read()
        except OSError as exc:
            raise CliError(f"sbatch: error: Unable to open file {path}") from exc
        body["scriptPath"], body["scriptArgs"] = path, rest[1:]
    answer = ctx.client().post(cluster_path(ctx, "/jobs"), body)
    for warning in answer.get("warnings", ()):
        sys.stderr.write(f"sbatch: {warning}\n")
    print_text(answer.get("message", ""))
    if answer.get("stderr"):
        sys.stderr.write(answer["stderr"] + "\n")
    if answer.get("notice"):
        sys.stderr.write(f"sbatch: {answer['notice']}\n")
    return 0


class QuickArgs:
    """The attributes argparse's namespace would hold for the sbatch command line quick_args read."""

    def __init__(self, **values: Any) -> None:
        self.__dict__.update(values)

    def __eq__(self, other: object) -> bool:
        return vars(self) == vars(other)

    def __repr__(self) -> str:
        return f"QuickArgs({vars(self)!r})"


def quick_args(argv: Sequence[str]) -> QuickArgs | None:
    """`trainhub slurm sbatch ...`'s arguments as trainhub.cli.slurm's parser gives them (but for
    ``_parser``), or None when argv is another command or any line argparse must read itself."""
    values: dict[str, Any] = {"cluster": None, "region": DEFAULT_REGION}
    passed: list[str] = []
    arguments = iter(argv)
    expected = ["slurm", "sbatch"]  # the words before sbatch's own arguments; global flags may come between
    for argument in arguments:
        if argument[:1] == "-" and len(argument) > 1:
            name, equals, value = argument.partition("=")
            if name in (VALUED_FLAGS if not expected else GLOBAL_FLAGS):
                if not equals:
                    value = next(arguments, None)
                    if value is None or value[:1] == "-":  # missing, or a value argparse may take for a flag
                        return None
                values[name[2:]] = value
                continue
            # -h/--help and anything argparse might take for them, or for an abbreviation of a flag
            # (allow_abbrev is off, but not for every form on every Python), and "--".
            if expected or name[:2] == "-h" or name[:3] == "--h" or name == "--" or any(
                    flag.startswith(name) for flag in VALUED_FLAGS):
                return None
        elif expected:
            if argument != expected.pop(0):
                return None
            continue
        passed.append(argument)
    if expected:
        return None
    return QuickArgs(**values, sbatch_args=passed, _handler=sbatch)
