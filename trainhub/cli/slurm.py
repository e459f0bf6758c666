"""`trainhub slurm ...`: Slurm's own commands against a trainhub Slurm cluster.

    trainhub slurm sbatch [--cluster C] [sbatch options] (--wrap CMD | SCRIPT [ARGS...])
    trainhub slurm salloc [--cluster C] [sbatch options] [COMMAND [ARGS...]]   (trainhub.cli.salloc)
    trainhub slurm srun [--cluster C] [sbatch options] [-l] [--pty] COMMAND [ARGS...]   (trainhub.cli.srun)
    trainhub slurm squeue|sprio|sshare|sacct --cluster C [their flags]
    trainhub slurm scancel --cluster C JOBID...
    trainhub slurm scontrol --cluster C hold|release|requeue JOBID... | update jobid=N nice=V | [-o] show job [N]
        | show step [N[.M]] | [-o] show node[s] [NAMES]
    trainhub slurm sacctmgr --cluster C [-i] [-n] [-p|-P] COMMAND...

Output is what the Slurm command prints; the server renders the sprio/squeue/sshare/sacct/sacctmgr
text, so the CLI and the web console show the same thing. sbatch reads the script file here and
sends its text (the server never opens a user's path) with the options, which the server parses; the
CLI reads only sbatch's grammar (trainhub.slurm.sbatch_argv) to tell the options from the script.
"""

from __future__ import annotations

import argparse
import sys

from trainhub.cli import base as cli
from trainhub.cli.client import CliError
from trainhub.cli.slurm_submit import DEFAULT_REGION, sbatch
from trainhub.cli.slurm_submit import cluster_path as _cluster_path
from trainhub.cli.slurm_submit import print_text as _print

TYPE_CHECKING = False  # typing.TYPE_CHECKING, which type checkers take as True, without importing typing
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from trainhub.cli.base import Handler

#: Replaced by tests instead of reading a terminal.
_input: Any = input


def salloc(ctx: Any) -> int:
    """Allocate nodes, run COMMAND here with srun usable inside, relinquish (trainhub.cli.salloc)."""
    from trainhub.cli import salloc as allocation

    return allocation.run(ctx.client(), _cluster_path(ctx), list(ctx.args.salloc_args))


def srun(ctx: Any) -> int:
    """Allocate nodes, run COMMAND there as one step with its output here, relinquish (trainhub.cli.srun)."""
    from trainhub.cli import srun as step

    return step.run(ctx.client(), _cluster_path(ctx), list(ctx.args.srun_args))


def _view(name: str, flags: dict[str, str]) -> Any:
    def run(ctx: Any) -> int:
        params = {param: getattr(ctx.args, attribute) for attribute, param in flags.items()}
        params = {key: ("true" if value is True else value) for key, value in params.items()
                  if value not in (None, False, "")}
        text, stderr = ctx.client().get_text(_cluster_path(ctx, f"/{name}"), params)
        sys.stderr.write(stderr)
        _print(text)
        return 0

    run.__doc__ = f"print {name}'s output"
    return run


def scancel(ctx: Any) -> int:
    client = ctx.client()
    for job_id in ctx.args.job_ids:
        client.post(_cluster_path(ctx, f"/jobs/{job_id}:cancel"), {})
    return 0


def _show_named(ctx: Any, report: str, parameter: str, names: list[str]) -> int:
    """scontrol show node[s] [NAMES] | partition [NAME]: what it prints, with its exit status 1 and its
    ``Node NAME not found`` lines where a name is no node's (the server's 404 carries them); a list
    it cannot parse is the server's 400, its message on stderr."""
    params = {parameter: names[0]} if names else {}
    if ctx.args.oneliner:
        params["oneliner"] = "true"
    try:
        text, _ = ctx.client().get_text(_cluster_path(ctx, f"/{report}"), params)
    except CliError as exc:
        if exc.http_status == 404 and exc.output:
            _print(exc.output)
            return 1
        raise
    _print(text)
    return 0


def scontrol(ctx: Any) -> int:
    """scontrol hold|release|requeue JOBID... | update jobid=N nice=V | show job [JOBID] | show step [JOBID[.STEPID]]
    | show partition [NAME] | show node[s] [NAMES]"""
    words = ctx.args.words
    if words[:2] in (["show", "node"], ["show", "nodes"]) and len(words) <= 3:
        return _show_named(ctx, "scontrolNodes", "node", words[2:])
    if words[:2] in (["show", "partition"], ["show", "partitions"]) and len(words) <= 3:
        return _show_named(ctx, "scontrolPartitions", "partition", words[2:])
    client = ctx.client()
    if words[:2] == ["show", "step"] and len(words) <= 3:
        answer = client.get(_cluster_path(ctx, "/steps"), {"step": words[2]} if len(words) == 3 else {})
        _print(answer.get("text", ""))
        return 0 if answer.get("rows") else 1
    if words[:2] == ["show", "job"] and len(words) <= 3:
        params = {"job": words[2]} if len(words) == 3 else {}
        if ctx.args.oneliner:
            params["oneliner"] = "true"
        text, stderr = client.get_text(_cluster_path(ctx, "/scontrolJobs"), params)
        sys.stderr.write(stderr)
        _print(text)
        return 1 if stderr else 0
    if words and words[0] in ("hold", "release", "requeue") and len(words) > 1:
        for job_id in words[1:]:
            client.post(_cluster_path(ctx, f"/jobs/{job_id}:{words[0]}"), {})
        return 0
    if words and words[0] == "update":
        fields = dict(word.split("=", 1) for word in words[1:] if "=" in word)
        fields = {key.lower(): value for key, value in fields.items()}
        if set(fields) == {"jobid", "nice"}:
            client.post(_cluster_path(ctx, f"/jobs/{fields['jobid']}:update"), {"nice": fields["nice"]})
            return 0
    raise CliError("scontrol: error: trainhub supports `scontrol hold|release|requeue JOBID...`, "
                   "`scontrol update jobid=N nice=V`, `scontrol [-o] show job [JOBID]`, "
                   "`scontrol show step [JOBID[.STEPID]]`, `scontrol [-o] show partition [NAME]` and "
                   "`scontrol [-o] show node[s] [NAMES]`")


def sacctmgr(ctx: Any) -> int:
    """Without -i a change is shown and committed only if the user answers y, as sacctmgr asks."""
    args = ctx.args
    options = [flag for flag, given in (("-i", args.immediate), ("-n", args.noheader), ("-p", args.parsable),
                                        ("-P", args.parsable2)) if given]
    path = _cluster_path(ctx, ":sacctmgr")
    answer = ctx.client().post(path, {"command": options + list(args.words)})
    if not answer.get("needsConfirmation"):
        _print(answer.get("output", ""))
        return int(answer.get("exitCode", 0))
    sys.stdout.write(answer.get("output", ""))
    sys.stdout.flush()
    interactive = sys.stdin.isatty()
    reply = _input() if interactive else ""
    if reply.strip().lower() not in ("y", "yes"):
        # Without a terminal nothing was typed after the prompt, so the line still has to end.
        _print((" " if interactive else "\n ") + "Changes Discarded")
        return 0
    confirmed = ctx.client().post(path, {"command": ["-i", *options, *args.words]})
    return int(confirmed.get("exitCode", 0))


class _CommandParser(cli.ArgumentParser):
    """sbatch's, salloc's and srun's parsers hand every argument they do not know to the Slurm command's
    own option parser, as the list `passthrough` names."""

    passthrough: str | None = None

    def parse_known_args(self, args=None, namespace=None):
        namespace, extras = super().parse_known_args(args, namespace)
        if self.passthrough:
            setattr(namespace, self.passthrough, extras)
            return namespace, []
        return namespace, extras


def _passthrough(dest: str) -> Callable[[_CommandParser], None]:
    def arguments(parser: _CommandParser) -> None:
        parser.passthrough = dest

    return arguments


def _squeue_arguments(parser: _CommandParser) -> None:
    parser.add_argument("-u", "--user")
    parser.add_argument("-p", "--partition")
    parser.add_argument("-t", "--states")
    parser.add_argument("-j", "--jobs")
    parser.add_argument("--start", action="store_true", help="expected start times of pending jobs")
    parser.add_argument("-l", "--long", action="store_true")
    parser.add_argument("-r", "--array", action="store_true", help="an array's pending tasks one per line")
    parser.add_argument("-s", "--steps", action="store_true", help="the running job steps (srun)")
    parser.add_argument("-o", "--format", help="squeue's -o format string (%%i %%a %%C %%b %%y ...)")
    parser.add_argument("-O", "--Format", dest="output_format", help="squeue's -O field list (JobID,Account,...)")


def _sinfo_arguments(parser: _CommandParser) -> None:
    parser.add_argument("-N", "--Node", dest="nodes", action="store_true")
    parser.add_argument("-l", "--long", action="store_true")
    parser.add_argument("-s", "--summarize", action="store_true")
    parser.add_argument("-R", "--list-reasons", dest="reasons", action="store_true")
    parser.add_argument("-p", "--partition")


def _sprio_arguments(parser: _CommandParser) -> None:
    parser.add_argument("-l", "--long", action="store_true")
    parser.add_argument("-w", "--weights", action="store_true")
    parser.add_argument("-n", "--norm", action="store_true")
    parser.add_argument("-u", "--user")
    parser.add_argument("-j", "--jobs")
    parser.add_argument("-p", "--partition")


def _sshare_arguments(parser: _CommandParser) -> None:
    parser.add_argument("-l", "--long", action="store_true")
    parser.add_argument("-a", "--all", action="store_true")
    parser.add_argument("-A", "--accounts")
    parser.add_argument("-u", "--users")


def _sacct_arguments(parser: _CommandParser) -> None:
    parser.add_argument("-j", "--jobs")
    parser.add_argument("-u", "--user")
    parser.add_argument("-a", "--allusers", action="store_true")
    parser.add_argument("-D", "--duplicates", action="store_true")
    parser.add_argument("-S", "--starttime")
    parser.add_argument("-E", "--endtime")
    parser.add_argument("-s", "--state")
    parser.add_argument("-b", "--brief", action="store_true")
    parser.add_argument("-X", "--allocations", action="store_true")
    parser.add_argument("-p", "--parsable", action="store_true")


def _scancel_arguments(parser: _CommandParser) -> None:
    parser.add_argument("job_ids", nargs="+", metavar="JOBID")


def _scontrol_arguments(parser: _CommandParser) -> None:
    parser.add_argument("-o", "--oneliner", action="store_true", help="show job/node: each record on one line")
    parser.add_argument("words", nargs="+", metavar="WORD")


def _sacctmgr_arguments(parser: _CommandParser) -> None:
    parser.add_argument("-i", "--immediate", action="store_true", help="commit without asking")
    parser.add_argument("-n", "--noheader", action="store_true")
    parser.add_argument("-p", "--parsable", action="store_true")
    parser.add_argument("-P", "--parsable2", action="store_true")
    parser.add_argument("words", nargs=argparse.REMAINDER, metavar="COMMAND")


#: Each command: its name, handler, help text and the function adding its own arguments (after
#: --cluster and --region). A command line builds the parser of the command it names only: every
#: sbatch in a shell loop would pay for building the others.
COMMANDS: tuple[tuple[str, Handler, str, Callable[[_CommandParser], None]], ...] = (
    ("sbatch", sbatch, "submit a batch script: sbatch's options, then --wrap CMD or SCRIPT [ARGS...]",
     _passthrough("sbatch_args")),
    ("salloc", salloc, "allocate nodes and run COMMAND (default $SHELL) here; srun inside runs steps on them",
     _passthrough("salloc_args")),
    ("srun", srun, "allocate nodes and run COMMAND there as one step (its output here), then release them",
     _passthrough("srun_args")),
    ("squeue", _view("squeue", {"user": "user", "partition": "partition", "states": "states", "jobs": "jobs",
                                "start": "start", "long": "long", "format": "format",
                                "output_format": "outputFormat", "array": "array", "steps": "steps"}),
     "view the queue (squeue's columns and reasons)", _squeue_arguments),
    ("sinfo", _view("sinfo", {"nodes": "nodes", "long": "long", "summarize": "summarize", "reasons": "reasons",
                              "partition": "partition"}),
     "partitions and nodes with their states (sinfo's layouts)", _sinfo_arguments),
    ("sprio", _view("sprio", {"long": "long", "weights": "weights", "norm": "norm", "user": "user", "jobs": "jobs",
                              "partition": "partition"}),
     "priority factors of pending jobs", _sprio_arguments),
    ("sshare", _view("sshare", {"long": "long", "all": "all", "accounts": "accounts", "users": "users"}),
     "fair-share of associations", _sshare_arguments),
    ("sacct", _view("sacct", {"jobs": "jobs", "user": "user", "allusers": "allusers", "duplicates": "duplicates",
                              "starttime": "starttime", "endtime": "endtime", "state": "state", "brief": "brief",
                              "allocations": "allocations", "parsable": "parsable"}),
     "accounting records of jobs", _sacct_arguments),
    ("scancel", scancel, "cancel jobs", _scancel_arguments),
    ("scontrol", scontrol, "hold, release, requeue or renice jobs; show jobs, running steps and nodes", _scontrol_arguments),
    ("sacctmgr", sacctmgr, "accounts, users, QOS: add|modify|delete|show", _sacctmgr_arguments),
)


def _command(name: str, handler: Handler, help_text: str,
             add_arguments: Callable[[_CommandParser], None]) -> Callable[[Any, Any], None]:
    """The function that adds the parser of one command (`cli._SubCommands.add_lazy`)."""

    def register(commands: Any, common: Any) -> None:
        parser = cli._add_command(commands, name, handler, help_text, common)
        parser.add_argument("--cluster", help="Slurm cluster id (default: the region's only cluster)")
        parser.add_argument("--region", default=DEFAULT_REGION, help=f"location (default {DEFAULT_REGION})")
        add_arguments(parser)

    return register


def register_slurm(subparsers: Any, common: Any) -> None:
    """`trainhub slurm ...` (registered in trainhub.cli.main.COMMAND_GROUPS)."""
    help_text = "Slurm's commands on a trainhub Slurm cluster"
    group = subparsers.add_parser("slurm", help=help_text, description=help_text, parents=[common], allow_abbrev=False)
    commands = group.add_subparsers(title="commands", metavar="COMMAND", required=True, parser_class=_CommandParser)
    for name, handler, text, add_arguments in COMMANDS:
        commands.add_lazy(name, text, _command(name, handler, text, add_arguments), common)
