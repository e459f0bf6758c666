"""`trainhub slurm ...`: Slurm's own commands against a trainhub Slurm cluster.

    trainhub slurm sbatch [--cluster C] [sbatch options] (--wrap CMD | SCRIPT [ARGS...])
    trainhub slurm salloc [--cluster C] [sbatch options] [COMMAND [ARGS...]]   (trainhub.cli.salloc)
    trainhub slurm squeue|sprio|sshare|sacct --cluster C [their flags]
    trainhub slurm scancel --cluster C JOBID...
    trainhub slurm scontrol --cluster C hold|release|requeue JOBID... | update jobid=N nice=V | show step [N[.M]]
    trainhub slurm sacctmgr --cluster C [-i] [-n] [-p|-P] COMMAND...

Output is what the Slurm command prints; the server renders the sprio/squeue/sshare/sacct/sacctmgr
text, so the CLI and the web console show the same thing. sbatch reads the script file here and
sends its text (the server never opens a user's path) with the options, which the server parses; the
CLI reads only sbatch's grammar (trainhub.slurm.sbatch_argv) to tell the options from the script.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from trainhub.cli import base as cli
from trainhub.cli.client import CliError, resource_path

DEFAULT_REGION = "us-central1"
#: Replaced by tests instead of reading a terminal.
_input: Any = input
CLUSTERS = "slurmClusters"


def _cluster_path(ctx: Any, suffix: str = "") -> str:
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


def _print(text: str) -> None:
    if text:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
        sys.stdout.flush()


def sbatch(ctx: Any) -> int:
    """Submit a batch job; prints `Submitted batch job N`."""
    # sbatch's grammar only (the server parses the values), and only here: squeue/sprio need none of it.
    from trainhub.slurm.sbatch_argv import SbatchError, split_options

    argv = list(ctx.args.sbatch_args)
    try:
        _, rest = split_options(argv)
    except SbatchError as exc:
        raise CliError(str(exc)) from exc
    body: dict[str, Any] = {"sbatchArgs": argv[:len(argv) - len(rest)]}
    if rest:
        try:
            body["script"] = Path(rest[0]).read_text(encoding="utf-8")
        except OSError as exc:
            raise CliError(f"sbatch: error: Unable to open file {rest[0]}") from exc
        body["scriptArgs"] = rest[1:]
    answer = ctx.client().post(_cluster_path(ctx, "/jobs"), body)
    _print(answer.get("message", ""))
    if answer.get("stderr"):
        sys.stderr.write(answer["stderr"] + "\n")
    if answer.get("notice"):
        sys.stderr.write(f"sbatch: {answer['notice']}\n")
    return 0


def salloc(ctx: Any) -> int:
    """Allocate nodes, run COMMAND here with srun usable inside, relinquish (trainhub.cli.salloc)."""
    from trainhub.cli import salloc as allocation

    return allocation.run(ctx.client(), _cluster_path(ctx), list(ctx.args.salloc_args))


def _view(name: str, flags: dict[str, str]) -> Any:
    def run(ctx: Any) -> int:
        params = {param: getattr(ctx.args, attribute) for attribute, param in flags.items()}
        params = {key: ("true" if value is True else value) for key, value in params.items()
                  if value not in (None, False, "")}
        _print(ctx.client().get(_cluster_path(ctx, f"/{name}"), params).get("text", ""))
        return 0

    run.__doc__ = f"print {name}'s output"
    return run


def scancel(ctx: Any) -> int:
    client = ctx.client()
    for job_id in ctx.args.job_ids:
        client.post(_cluster_path(ctx, f"/jobs/{job_id}:cancel"), {})
    return 0


def scontrol(ctx: Any) -> int:
    """scontrol hold|release|requeue JOBID... | update jobid=N nice=V | show step [JOBID[.STEPID]]"""
    words = ctx.args.words
    client = ctx.client()
    if words[:2] == ["show", "step"] and len(words) <= 3:
        answer = client.get(_cluster_path(ctx, "/steps"), {"step": words[2]} if len(words) == 3 else {})
        _print(answer.get("text", ""))
        return 0 if answer.get("rows") else 1
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
                   "`scontrol update jobid=N nice=V` and `scontrol show step [JOBID[.STEPID]]`")


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


def register_slurm(subparsers: Any, common: Any) -> None:
    """`trainhub slurm ...` (registered in trainhub.cli.main.COMMAND_GROUPS)."""

    class CommandParser(cli.ArgumentParser):
        """sbatch's parser hands every argument it does not know to sbatch's own option parser."""

        passthrough: str | None = None

        def parse_known_args(self, args=None, namespace=None):
            namespace, extras = super().parse_known_args(args, namespace)
            if self.passthrough:
                setattr(namespace, self.passthrough, extras)
                return namespace, []
            return namespace, extras

    help_text = "Slurm's commands on a trainhub Slurm cluster"
    group = subparsers.add_parser("slurm", help=help_text, description=help_text, parents=[common], allow_abbrev=False)
    commands = group.add_subparsers(title="commands", metavar="COMMAND", required=True, parser_class=CommandParser)

    def command(name: str, handler: Any, text: str) -> Any:
        parser = cli._add_command(commands, name, handler, text, common)
        parser.add_argument("--cluster", help="Slurm cluster id (default: the region's only cluster)")
        parser.add_argument("--region", default=DEFAULT_REGION, help=f"location (default {DEFAULT_REGION})")
        return parser

    command("sbatch", sbatch, "submit a batch script: sbatch's options, then --wrap CMD or SCRIPT [ARGS...]"
            ).passthrough = "sbatch_args"
    command("salloc", salloc, "allocate nodes and run COMMAND (default $SHELL) here; srun inside runs steps on them"
            ).passthrough = "salloc_args"

    squeue = command("squeue", _view("squeue", {"user": "user", "partition": "partition", "states": "states",
                                                "jobs": "jobs", "start": "start", "long": "long", "format": "format",
                                                "output_format": "outputFormat", "array": "array",
                                                "steps": "steps"}),
                     "view the queue (squeue's columns and reasons)")
    squeue.add_argument("-u", "--user")
    squeue.add_argument("-p", "--partition")
    squeue.add_argument("-t", "--states")
    squeue.add_argument("-j", "--jobs")
    squeue.add_argument("--start", action="store_true", help="expected start times of pending jobs")
    squeue.add_argument("-l", "--long", action="store_true")
    squeue.add_argument("-r", "--array", action="store_true", help="an array's pending tasks one per line")
    squeue.add_argument("-s", "--steps", action="store_true", help="the running job steps (srun)")
    squeue.add_argument("-o", "--format", help="squeue's -o format string (%%i %%a %%C %%b %%y ...)")
    squeue.add_argument("-O", "--Format", dest="output_format", help="squeue's -O field list (JobID,Account,...)")

    sinfo = command("sinfo", _view("sinfo", {"nodes": "nodes", "long": "long", "summarize": "summarize",
                                             "reasons": "reasons", "partition": "partition"}),
                    "partitions and nodes with their states (sinfo's layouts)")
    sinfo.add_argument("-N", "--Node", dest="nodes", action="store_true")
    sinfo.add_argument("-l", "--long", action="store_true")
    sinfo.add_argument("-s", "--summarize", action="store_true")
    sinfo.add_argument("-R", "--list-reasons", dest="reasons", action="store_true")
    sinfo.add_argument("-p", "--partition")

    sprio = command("sprio", _view("sprio", {"long": "long", "weights": "weights", "norm": "norm", "user": "user",
                                             "jobs": "jobs", "partition": "partition"}),
                    "priority factors of pending jobs")
    sprio.add_argument("-l", "--long", action="store_true")
    sprio.add_argument("-w", "--weights", action="store_true")
    sprio.add_argument("-n", "--norm", action="store_true")
    sprio.add_argument("-u", "--user")
    sprio.add_argument("-j", "--jobs")
    sprio.add_argument("-p", "--partition")

    sshare = command("sshare", _view("sshare", {"long": "long", "all": "all", "accounts": "accounts",
                                                "users": "users"}), "fair-share of associations")
    sshare.add_argument("-l", "--long", action="store_true")
    sshare.add_argument("-a", "--all", action="store_true")
    sshare.add_argument("-A", "--accounts")
    sshare.add_argument("-u", "--users")

    sacct = command("sacct", _view("sacct", {"jobs": "jobs", "user": "user", "allusers": "allusers",
                                             "duplicates": "duplicates", "starttime": "starttime",
                                             "endtime": "endtime", "state": "state", "brief": "brief",
                                             "allocations": "allocations", "parsable": "parsable"}),
                    "accounting records of jobs")
    sacct.add_argument("-j", "--jobs")
    sacct.add_argument("-u", "--user")
    sacct.add_argument("-a", "--allusers", action="store_true")
    sacct.add_argument("-D", "--duplicates", action="store_true")
    sacct.add_argument("-S", "--starttime")
    sacct.add_argument("-E", "--endtime")
    sacct.add_argument("-s", "--state")
    sacct.add_argument("-b", "--brief", action="store_true")
    sacct.add_argument("-X", "--allocations", action="store_true")
    sacct.add_argument("-p", "--parsable", action="store_true")

    cancel = command("scancel", scancel, "cancel jobs")
    cancel.add_argument("job_ids", nargs="+", metavar="JOBID")

    control = command("scontrol", scontrol, "hold, release, requeue or renice jobs; show running steps")
    control.add_argument("words", nargs="+", metavar="WORD")

    manager = command("sacctmgr", sacctmgr, "accounts, users, QOS: add|modify|delete|show")
    manager.add_argument("-i", "--immediate", action="store_true", help="commit without asking")
    manager.add_argument("-n", "--noheader", action="store_true")
    manager.add_argument("-p", "--parsable", action="store_true")
    manager.add_argument("-P", "--parsable2", action="store_true")
    manager.add_argument("words", nargs=argparse.REMAINDER, metavar="COMMAND")
