"""`trainhub`: the command-line client, modelled on `gcloud ai custom-jobs ...`.

`main(argv)` runs in-process: it writes to sys.stdout / sys.stderr, returns the exit code (0 ok,
1 failure, 2 usage error) and takes its configuration from flags, the environment and the config
file written by `trainhub auth login`, in that order of precedence.

This module only assembles: each command group lives in its own module and registers itself
through a `register_*` function named in COMMAND_GROUPS or AI_GROUPS (a new group is one more
line there); what the commands share (parser helpers, Context, configuration, output) is in
trainhub.cli.base, beneath them.
"""

from __future__ import annotations

import os
import sys

from trainhub.cli.base import Context, config_path, read_config, resolve_settings
from trainhub.cli.client import CliError, _ParserExit
from trainhub.cli.slurm_submit import COMMAND as SBATCH_COMMAND
from trainhub.cli.slurm_submit import quick_args

TYPE_CHECKING = False  # typing.TYPE_CHECKING, which type checkers take as True, without importing typing
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from typing import Any

    from trainhub.cli.parsing import ArgumentParser

__all__ = ("COMMAND_GROUPS", "build_parser", "config_path", "main", "render_error")

#: Each command group as (name, help text, the function "module:name" that registers it). Only the
#: group a command line names is imported and built (start-up time: every sbatch in a shell loop
#: pays it); the help lists the others by name and help text, which must be the text their
#: register function gives (a test checks).
AI_GROUPS: tuple[tuple[str, str, str], ...] = (
    ("custom-jobs", "manage custom training jobs", "trainhub.cli.custom_jobs:register_custom_jobs"),
    ("hp-tuning-jobs", "manage hyperparameter tuning jobs", "trainhub.cli.hp_tuning_jobs:register"),
    ("persistent-resources", "manage persistent resources",
     "trainhub.cli.persistent_resources:register_persistent_resources"),
    ("operations", "inspect long-running operations", "trainhub.cli.persistent_resources:register_operations"),
)
AI_HELP = "Vertex-AI-compatible training resources"


def register_ai(subparsers: Any, common: ArgumentParser) -> None:
    """`trainhub ai ...`: the Vertex-AI-compatible resources."""
    from trainhub.cli.parsing import _add_group

    ai = _add_group(subparsers, "ai", AI_HELP, common)
    for name, help_text, register in AI_GROUPS:
        ai.add_lazy(name, help_text, register, common)


COMMAND_GROUPS: tuple[tuple[str, str, str], ...] = (
    ("auth", "manage trainhub credentials", "trainhub.cli.auth:register_auth"),
    ("ai", AI_HELP, "trainhub.cli.main:register_ai"),
    ("slurm", "Slurm's commands on a trainhub Slurm cluster", "trainhub.cli.slurm:register_slurm"),
    ("nodes", "add and manage machines (administrators)", "trainhub.cli.nodes:register_nodes"),
)


def build_parser() -> ArgumentParser:
    """The `trainhub` argument parser; each group's own parser is built when parsing reaches it."""
    from trainhub.cli.parsing import ArgumentParser, _global_flags

    common = _global_flags()
    parser = ArgumentParser(prog="trainhub", description="Command-line client of trainhub.", parents=[common],
                            allow_abbrev=False)
    subparsers = parser.add_subparsers(title="command groups", metavar="GROUP", required=True)
    for name, help_text, register in COMMAND_GROUPS:
        subparsers.add_lazy(name, help_text, register, common)
    return parser


# Errors -----------------------------------------------------------------------------------------

_EXPECTED_ERRORS = (CliError, OSError)
# These modules are imported only by the commands that use them (requests only with a session a
# caller passed in), so their errors are expected only once they are loaded.
_LOADED_LATER_ERRORS = (("trainhub.cli.worker_pool_spec", "ConfigFileError"), ("yaml", "YAMLError"),
                        ("requests", "RequestException"))


def _expected(exc: Exception) -> bool:
    """Whether ``exc`` is a failure to report in one ERROR line rather than a bug to show in full."""
    return isinstance(exc, _EXPECTED_ERRORS) or any(
        (module := sys.modules.get(name)) is not None and isinstance(exc, getattr(module, error))
        for name, error in _LOADED_LATER_ERRORS)


def _as_cli_error(exc: BaseException) -> CliError:
    if isinstance(exc, CliError):
        return exc
    requests = sys.modules.get("requests")
    if requests is not None and isinstance(exc, requests.RequestException):
        return CliError(f"request to trainhub failed: {exc}")
    if isinstance(exc, OSError) and exc.strerror:
        return CliError(f"{exc.filename}: {exc.strerror}" if exc.filename else exc.strerror)
    return CliError(str(exc))


def render_error(command: str, error: CliError) -> str:
    """The stderr text for a failure: the server's status and message with its field violations."""
    if error.status:
        lines = [f"ERROR: ({command}) {error.status}: {error.message}"]
    else:
        lines = [f"ERROR: {error.message}"]
    lines += [f"  - {field}: {description}" for field, description in error.violations]
    if error.http_status == 401 and not command.startswith("trainhub.auth."):
        lines.append("Run `trainhub auth login` to sign in, or pass --token / set TRAINHUB_TOKEN.")
    return "\n".join(lines)


def main(
    argv: Sequence[str] | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    session: Any = None,
) -> int:
    """Run one `trainhub` command and return its exit code.

    `environ` defaults to os.environ and `session` to the standard library's HTTP client
    (trainhub.cli.client.StdlibSession); a requests.Session or a fake may be passed instead, so
    callers (tests) can run commands in-process against a fake or live server.
    """
    environ = os.environ if environ is None else environ
    command = "trainhub"
    try:
        # `trainhub slurm sbatch`, which shell loops call once per job, without argparse where it can
        # (trainhub.cli.slurm_submit.quick_args); every other line, and every error and help, argparse's.
        args = quick_args(sys.argv[1:] if argv is None else argv)
        if args is not None:
            command = SBATCH_COMMAND
        else:
            args = build_parser().parse_args(argv)
            command = args._parser.prog.replace(" ", ".")  # trainhub.ai.custom-jobs.create
        path = config_path(environ)
        ctx = Context(args, resolve_settings(args, environ, read_config(path)), path, session)
        return args._handler(ctx)
    except _ParserExit as exc:
        return exc.status
    except KeyboardInterrupt:
        return 130
    except Exception as exc:
        if not _expected(exc):
            raise
        print(render_error(command, _as_cli_error(exc)), file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
