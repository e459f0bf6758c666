"""`trainhub`: the command-line client, modelled on `gcloud ai custom-jobs ...`.

`main(argv)` runs in-process: it writes to sys.stdout / sys.stderr, returns the exit code (0 ok,
1 failure, 2 usage error) and takes its configuration from flags, the environment and the config
file written by `trainhub auth login`, in that order of precedence.

Command groups register themselves through `register_*` functions listed in COMMAND_GROUPS and
AI_GROUPS; a later group (`trainhub slurm`, `trainhub ai persistent-resources`) is one more
function there.
"""

from __future__ import annotations

import argparse
import getpass
import json
import math
import os
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import requests
import yaml

from trainhub.cli.client import (
    CliError,
    ResourceRef,
    TrainhubClient,
    parse_resource_ref,
    resource_path,
)
from trainhub.cli.persistent_resources import register_operations, register_persistent_resources
from trainhub.cli.slurm import register_slurm
from trainhub.cli.worker_pool_spec import (
    ConfigFileError,
    SpecError,
    build_custom_job,
    load_job_spec_config,
    parse_key_values,
    parse_worker_pool_spec,
    split_list,
)

DEFAULT_URL = "http://127.0.0.1:8000"
DEFAULT_PROJECT = "demo"
DEFAULT_POLLING_INTERVAL_SECONDS = 2.0
CUSTOM_JOBS = "customJobs"
TERMINAL_JOB_STATES = frozenset({"JOB_STATE_SUCCEEDED", "JOB_STATE_FAILED", "JOB_STATE_CANCELLED"})

# Module-level so tests replace them instead of sleeping or reading a terminal.
_sleep: Callable[[float], None] = time.sleep
_getpass: Callable[[str], str] = getpass.getpass

_JOB_CREATED_MESSAGE = """\
CustomJob [{name}] is submitted successfully.

Your job is still active. You may view the status of your job with the command

  $ trainhub ai custom-jobs describe {name}

or continue streaming the logs with the command

  $ trainhub ai custom-jobs stream-logs {name}"""

_JOB_CANCEL_MESSAGE = """\
Request to cancel custom job [{job_id}] has been sent

You may view the status of your job with the command

  $ trainhub ai custom-jobs describe {name}"""

Handler = Callable[["Context"], int]
Column = tuple[str, Callable[[dict[str, Any]], str]]


# Configuration ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Settings:
    """Where and as whom the CLI talks to trainhub."""

    url: str
    token: str | None
    project: str


def config_path(environ: Mapping[str, str]) -> Path:
    """`$TRAINHUB_CONFIG`, else `$XDG_CONFIG_HOME/trainhub/config.json`, else `~/.config/...`."""
    if environ.get("TRAINHUB_CONFIG"):
        return Path(environ["TRAINHUB_CONFIG"]).expanduser()
    base = environ.get("XDG_CONFIG_HOME") or os.path.join(environ.get("HOME") or str(Path.home()), ".config")
    return Path(base) / "trainhub" / "config.json"


def read_config(path: Path) -> dict[str, Any]:
    """The stored configuration, or `{}` when there is no config file yet."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    try:
        stored = json.loads(text)
    except ValueError as exc:
        raise CliError(f"config file [{path}] is not valid JSON ({exc}); fix or delete it") from exc
    if not isinstance(stored, dict):
        raise CliError(f"config file [{path}] must hold a JSON object; fix or delete it")
    return stored


def write_config(path: Path, values: Mapping[str, Any]) -> None:
    """Write the configuration readable by the owner only, since it holds a token."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        # O_CREAT's mode only applies to a new file; an existing one may have been wider.
        os.fchmod(handle.fileno(), 0o600)
        json.dump(dict(values), handle, indent=2, sort_keys=True)
        handle.write("\n")


def resolve_settings(args: argparse.Namespace, environ: Mapping[str, str], stored: Mapping[str, Any]) -> Settings:
    """Flag, then environment variable, then config file, then default, for each setting."""

    def pick(name: str, default: str | None) -> str | None:
        for value in (getattr(args, name, None), environ.get(f"TRAINHUB_{name.upper()}"), stored.get(name)):
            if value:
                return str(value)
        return default

    return Settings(
        url=pick("url", DEFAULT_URL) or DEFAULT_URL,
        token=pick("token", None),
        project=pick("project", DEFAULT_PROJECT) or DEFAULT_PROJECT,
    )


# Argument parsing ------------------------------------------------------------------------------


class _ParserExit(Exception):
    """Raised instead of SystemExit so that main() can return the exit code."""

    def __init__(self, status: int) -> None:
        super().__init__(status)
        self.status = status


class ArgumentParser(argparse.ArgumentParser):
    """argparse that raises _ParserExit rather than exiting the interpreter."""

    def exit(self, status: int = 0, message: str | None = None) -> NoReturn:
        if message:
            self._print_message(message, sys.stderr)
        raise _ParserExit(status)


def _arg_type(parse: Callable[[str], Any]) -> Callable[[str], Any]:
    """Adapt a parser raising SpecError to argparse, which reports ArgumentTypeError verbatim."""

    def convert(text: str) -> Any:
        try:
            return parse(text)
        except SpecError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from exc

    return convert


def _positive(kind: type[int] | type[float]) -> Callable[[str], Any]:
    def convert(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            value = 0
        if not (value > 0 and math.isfinite(value)):
            raise argparse.ArgumentTypeError(f"must be a positive {kind.__name__}, got [{text}]")
        return value

    return convert


def _global_flags() -> ArgumentParser:
    # SUPPRESS keeps an unset flag out of the namespace, so a subcommand's copy of the flag does
    # not overwrite a value given before the subcommand.
    common = ArgumentParser(add_help=False, allow_abbrev=False)
    group = common.add_argument_group("global flags")
    group.add_argument("--url", default=argparse.SUPPRESS,
                       help=f"trainhub server URL (env TRAINHUB_URL; default {DEFAULT_URL})")
    group.add_argument("--token", default=argparse.SUPPRESS, help="API bearer token (env TRAINHUB_TOKEN)")
    group.add_argument("--project", default=argparse.SUPPRESS,
                       help=f"project ID (env TRAINHUB_PROJECT; default {DEFAULT_PROJECT})")
    return common


def _add_group(subparsers: Any, name: str, help_text: str, common: ArgumentParser) -> Any:
    group = subparsers.add_parser(name, help=help_text, description=help_text, parents=[common], allow_abbrev=False)
    return group.add_subparsers(title="commands", metavar="COMMAND", required=True)


def _add_command(
    subparsers: Any, name: str, handler: Handler, help_text: str, common: ArgumentParser
) -> ArgumentParser:
    parser = subparsers.add_parser(name, help=help_text, description=help_text, parents=[common], allow_abbrev=False)
    parser.set_defaults(_handler=handler, _parser=parser)
    return parser


def _add_region(parser: ArgumentParser, *, required: bool) -> None:
    help_text = "region (location)" + ("" if required else "; not needed with a full resource name")
    parser.add_argument("--region", required=required, help=help_text)


def _add_job(parser: ArgumentParser) -> None:
    parser.add_argument("job", metavar="JOB", help="job ID or full name projects/P/locations/L/customJobs/ID")
    _add_region(parser, required=False)


def _add_format(parser: ArgumentParser, choices: Sequence[str]) -> None:
    parser.add_argument("--format", choices=choices, default=choices[0], help=f"output format (default {choices[0]})")


def register_auth(subparsers: Any, common: ArgumentParser) -> None:
    """`trainhub auth login|print-token`."""
    auth = _add_group(subparsers, "auth", "manage trainhub credentials", common)
    login = _add_command(auth, "login", auth_login,
                         "obtain a token with --username/--password, or store one given with --token", common)
    login.add_argument("--username", help="user to log in as")
    login.add_argument("--password", help="password (prompted for when omitted)")
    _add_command(auth, "print-token", auth_print_token, "print the token the CLI would send", common)


def register_custom_jobs(subparsers: Any, common: ArgumentParser) -> None:
    """`trainhub ai custom-jobs create|list|describe|cancel|stream-logs`."""
    jobs = _add_group(subparsers, "custom-jobs", "manage custom training jobs", common)

    create = _add_command(jobs, "create", custom_jobs_create, "create a custom job", common)
    _add_region(create, required=True)
    create.add_argument("--display-name", required=True, help="display name of the job")
    create.add_argument("--config", metavar="FILE", help="YAML file holding a CustomJobSpec; flags override its values")
    create.add_argument("--worker-pool-spec", action="append", type=_arg_type(parse_worker_pool_spec),
                        metavar="SPEC", help="machine-type=M,replica-count=N,accelerator-type=T,accelerator-count=N,"
                        "container-image-uri=U | executor-image-uri=U,python-module=M (repeat for more pools)")
    create.add_argument("--command", type=split_list, metavar="ARG,...",
                        help="container entrypoint for every pool")
    create.add_argument("--args", type=split_list, metavar="ARG,...",
                        help="arguments for every pool (write --args=--flag=1 when the first starts with -)")
    create.add_argument("--python-package-uris", type=split_list, metavar="URI,...",
                        help="packages for the executor-image-uri pools")
    create.add_argument("--labels", type=_arg_type(parse_key_values), metavar="KEY=VALUE,...",
                        help="labels of the job")
    create.add_argument("--persistent-resource-id", metavar="ID", help="run on this persistent resource")

    listing = _add_command(jobs, "list", custom_jobs_list, "list custom jobs", common)
    _add_region(listing, required=True)
    listing.add_argument("--filter", help="server-side filter expression, e.g. state=JOB_STATE_RUNNING")
    listing.add_argument("--limit", type=_positive(int), help="stop after this many jobs")
    listing.add_argument("--page-size", type=_positive(int), help="jobs to request per page")
    _add_format(listing, ("table", "json", "yaml"))

    describe = _add_command(jobs, "describe", custom_jobs_describe, "show a custom job", common)
    _add_job(describe)
    _add_format(describe, ("yaml", "json"))

    _add_job(_add_command(jobs, "cancel", custom_jobs_cancel, "cancel a custom job", common))

    stream = _add_command(jobs, "stream-logs", custom_jobs_stream_logs, "print a job's logs until it ends", common)
    _add_job(stream)
    stream.add_argument("--polling-interval", type=_positive(float), default=DEFAULT_POLLING_INTERVAL_SECONDS,
                        metavar="SECONDS", help="seconds between polls (default %(default)s)")
    stream.add_argument("--task-name", help="only this task's logs, e.g. workerpool0-0")


def register_hp_tuning_jobs(subparsers: Any, common: ArgumentParser) -> None:
    """`trainhub ai hp-tuning-jobs ...`, defined in trainhub.cli.hp_tuning_jobs (imported here, at
    parser-building time, because it builds on this module's helpers)."""
    from trainhub.cli import hp_tuning_jobs

    hp_tuning_jobs.register(subparsers, common)


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


# Running a command ------------------------------------------------------------------------------


@dataclass
class Context:
    """What a command handler needs: its arguments, settings and a way to reach the server."""

    args: argparse.Namespace
    settings: Settings
    config_file: Path
    session: requests.Session | None = None

    def client(self) -> TrainhubClient:
        """A client for the configured server."""
        return TrainhubClient(self.settings.url, self.settings.token, self.settings.project, session=self.session)

    def usage_error(self, message: str) -> NoReturn:
        """Report a usage error the way argparse does (exit code 2)."""
        self.args._parser.error(message)

    def job(self) -> ResourceRef:
        """The custom job named by the JOB argument and --region."""
        return self.resource(self.args.job, CUSTOM_JOBS)

    def resource(self, value: str, collection: str) -> ResourceRef:
        """The regional resource ``value`` names: an ID (with --region) or a full resource name."""
        try:
            return parse_resource_ref(value, collection=collection, project=self.settings.project,
                                      location=self.args.region)
        except ValueError as exc:
            self.usage_error(str(exc))


def _write(text: str) -> None:
    sys.stdout.write(text if text.endswith("\n") else text + "\n")
    sys.stdout.flush()


_YAML_OPTIONS: dict[str, Any] = {"sort_keys": False, "allow_unicode": True, "default_flow_style": False}


def _render(document: Any, fmt: str) -> str:
    if fmt == "json":
        return json.dumps(document, indent=2, ensure_ascii=False)
    return yaml.safe_dump(document, **_YAML_OPTIONS)


def _print_resources(resources: list[dict[str, Any]], fmt: str, columns: Sequence[Column]) -> None:
    if fmt == "json":
        _write(_render(resources, fmt))
    elif fmt == "yaml":
        if resources:
            _write(yaml.safe_dump_all(resources, **_YAML_OPTIONS))
    elif resources:
        rows = [[header for header, _ in columns]] + [[cell(resource) for _, cell in columns] for resource in resources]
        widths = [max(len(row[i]) for row in rows) for i in range(len(columns))]
        _write("\n".join("  ".join(value.ljust(width) for value, width in zip(row, widths)).rstrip() for row in rows))
    if not resources:
        print("Listed 0 items.", file=sys.stderr)


def _field(name: str) -> Callable[[dict[str, Any]], str]:
    return lambda resource: str(resource.get(name, ""))


CUSTOM_JOB_COLUMNS: tuple[Column, ...] = (
    ("JOB_ID", lambda job: str(job.get("name", "")).rsplit("/", 1)[-1]),
    ("DISPLAY_NAME", _field("displayName")),
    ("STATE", _field("state")),
    ("CREATE_TIME", _field("createTime")),
)


def _paginate(client: TrainhubClient, path: str, key: str, params: dict[str, Any], limit: int | None) -> Iterator[dict]:
    """Every resource of a list call, following nextPageToken until `limit` or the last page."""
    count, token, seen = 0, None, set()
    while True:
        page = client.get(path, {**params, "pageToken": token})
        for resource in page.get(key) or []:
            if limit is not None and count >= limit:
                return
            count += 1
            yield resource
        token = page.get("nextPageToken")
        # A token seen before would make us loop forever on a misbehaving server.
        if not token or token in seen or (limit is not None and count >= limit):
            return
        seen.add(token)


def auth_login(ctx: Context) -> int:
    """Store a token for the server: issued for --username/--password, or given with --token."""
    args = ctx.args
    token = getattr(args, "token", None)
    if args.username and token:
        ctx.usage_error("give either --username or --token, not both")
    if not args.username and not token:
        ctx.usage_error("either --username (to log in) or --token (to store a token) is required")
    if args.username:
        password = args.password if args.password is not None else _getpass("Password: ")
        token = ctx.client().issue_token(args.username, password)
    stored = read_config(ctx.config_file)
    stored.update(url=ctx.settings.url, token=token)
    if getattr(args, "project", None):
        stored["project"] = args.project
    write_config(ctx.config_file, stored)
    who = f" as [{args.username}]" if args.username else ""
    _write(f"Logged in to [{ctx.settings.url}]{who}; credentials saved in [{ctx.config_file}].")
    return 0


def auth_print_token(ctx: Context) -> int:
    """Print the token that requests would carry."""
    if not ctx.settings.token:
        raise CliError("no token is configured; run `trainhub auth login` first")
    _write(ctx.settings.token)
    return 0


def custom_jobs_create(ctx: Context) -> int:
    """Submit a CustomJob built from --config and the flags."""
    args = ctx.args
    try:
        body = build_custom_job(
            display_name=args.display_name,
            config=load_job_spec_config(args.config) if args.config else None,
            worker_pool_specs=args.worker_pool_spec,
            command=args.command,
            args=args.args,
            python_package_uris=args.python_package_uris,
            labels=args.labels,
            persistent_resource_id=args.persistent_resource_id,
        )
    except SpecError as exc:
        ctx.usage_error(str(exc))
    client = ctx.client()
    job = client.post(resource_path(client.project, args.region, CUSTOM_JOBS), body)
    _write(_JOB_CREATED_MESSAGE.format(name=job.get("name", "")))
    return 0


def custom_jobs_list(ctx: Context) -> int:
    """List jobs of the region as a table, or raw as JSON / YAML."""
    args = ctx.args
    client = ctx.client()
    params = {"filter": args.filter, "pageSize": args.page_size or args.limit}
    path = resource_path(client.project, args.region, CUSTOM_JOBS)
    jobs = list(_paginate(client, path, CUSTOM_JOBS, params, args.limit))
    _print_resources(jobs, args.format, CUSTOM_JOB_COLUMNS)
    return 0


def custom_jobs_describe(ctx: Context) -> int:
    """Print one job."""
    job = ctx.client().get(ctx.job().path())
    _write(_render(job, ctx.args.format))
    return 0


def custom_jobs_cancel(ctx: Context) -> int:
    """Ask the server to cancel a job; cancellation itself is asynchronous."""
    ref = ctx.job()
    ctx.client().post(ref.path(":cancel"), {})
    _write(_JOB_CANCEL_MESSAGE.format(job_id=ref.resource_id, name=ref.name))
    return 0


def format_log_entry(entry: Mapping[str, Any]) -> str:
    """One log line as gcloud prints it: `INFO<TAB>time<TAB>task<TAB>text` (ERROR for stderr)."""
    severity = "ERROR" if entry.get("stream") == "stderr" else "INFO"
    text = str(entry.get("text", "")).rstrip("\n")
    return f"{severity}\t{entry.get('time', '')}\t{entry.get('taskName', '')}\t{text}"


def custom_jobs_stream_logs(ctx: Context) -> int:
    """Print log entries as they arrive until the job has ended and no entry is left."""
    args = ctx.args
    path = ctx.job().path("/logs")
    client = ctx.client()
    after = 0
    while True:
        page = client.get(path, {"after": after, "taskName": args.task_name})
        entries = page.get("entries") or []
        for entry in entries:
            _write(format_log_entry(entry))
        after = page.get("nextAfter", max((int(entry.get("id", after)) for entry in entries), default=after))
        if entries:
            continue  # more may be waiting; only an empty answer means we are caught up
        if page.get("jobState") in TERMINAL_JOB_STATES:
            return 0
        _sleep(args.polling_interval)


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
