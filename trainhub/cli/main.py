"""`trainhub`: the command-line client, modelled on `gcloud ai custom-jobs ...`.

`main(argv)` runs in-process: it writes to sys.stdout / sys.stderr, returns the exit code (0 ok,
1 failure, 2 usage error) and takes its configuration from flags, the environment and the config
file written by `trainhub auth login`, in that order of precedence.

This module only assembles: each command group lives in its own module and registers itself
through a `register_*` function listed in COMMAND_GROUPS or AI_GROUPS (a new group is one more
function there); what the commands share (parser helpers, Context, configuration, output) is in
trainhub.cli.base, beneath them.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import requests
import yaml

from trainhub.cli.auth import register_auth
from trainhub.cli.base import (
    ArgumentParser,
    Context,
    _ParserExit,
    _add_group,
    _global_flags,
    config_path,
    read_config,
    resolve_settings,
)
from trainhub.cli.client import CliError
from trainhub.cli.custom_jobs import register_custom_jobs
from trainhub.cli.hp_tuning_jobs import register as register_hp_tuning_jobs
from trainhub.cli.persistent_resources import register_operations, register_persistent_resources
from trainhub.cli.slurm import register_slurm
from trainhub.cli.worker_pool_spec import ConfigFileError

__all__ = ("COMMAND_GROUPS", "build_parser", "config_path", "main", "render_error")

AI_GROUPS: tuple[Callable[[Any, ArgumentParser], None], ...] = (
    register_custom_jobs, register_hp_tuning_jobs, register_persistent_resources, register_operations)


def register_ai(subparsers: Any, common: ArgumentParser) -> None:
    """`trainhub ai ...`: the Vertex-AI-compatible resources."""
    ai = _add_group(subparsers, "ai", "Vertex-AI-compatible training resources", common)
    for register in AI_GROUPS:
        register(ai, common)


COMMAND_GROUPS: tuple[Callable[[Any, ArgumentParser], None], ...] = (register_auth, register_ai, register_slurm)


def build_parser() -> ArgumentParser:
    """The full `trainhub` argument parser."""
    common = _global_flags()
    parser = ArgumentParser(prog="trainhub", description="Command-line client of trainhub.", parents=[common],
                            allow_abbrev=False)
    subparsers = parser.add_subparsers(title="command groups", metavar="GROUP", required=True)
    for register in COMMAND_GROUPS:
        register(subparsers, common)
    return parser


# Errors -----------------------------------------------------------------------------------------

_EXPECTED_ERRORS = (CliError, ConfigFileError, requests.RequestException, OSError, yaml.YAMLError)


def _as_cli_error(exc: BaseException) -> CliError:
    if isinstance(exc, CliError):
        return exc
    if isinstance(exc, requests.RequestException):
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
    session: requests.Session | None = None,
) -> int:
    """Run one `trainhub` command and return its exit code.

    `environ` defaults to os.environ and `session` to a fresh requests.Session; both are there
    so callers (tests) can run commands in-process against a fake or live server.
    """
    environ = os.environ if environ is None else environ
    command = "trainhub"
    try:
        args = build_parser().parse_args(argv)
        command = args._parser.prog.replace(" ", ".")  # trainhub.ai.custom-jobs.create
        path = config_path(environ)
        ctx = Context(args, resolve_settings(args, environ, read_config(path)), path, session)
        return args._handler(ctx)
    except _ParserExit as exc:
        return exc.status
    except KeyboardInterrupt:
        return 130
    except _EXPECTED_ERRORS as exc:
        print(render_error(command, _as_cli_error(exc)), file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
