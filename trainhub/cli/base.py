"""What every `trainhub` command builds on: configuration, the argument parser and its helpers,
the `Context` a handler receives, and output formatting.

The command modules (auth, custom_jobs, hp_tuning_jobs, persistent_resources, slurm) import this
module; `trainhub.cli.main` imports them and assembles the parser. Nothing here imports a command
module, so imports run one way: main -> commands -> base -> client.

Every command pays this module's imports at start-up (a shell loop of `trainhub slurm sbatch`
pays them per job), so it imports only what every command needs; yaml is imported where YAML is
read or printed, and typing only by type checkers (`TYPE_CHECKING`, below).
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import os
import sys
import time
from collections import namedtuple

from trainhub.cli.client import CliError, ResourceRef, TrainhubClient, parse_resource_ref

TYPE_CHECKING = False  # typing.TYPE_CHECKING, which type checkers take as True, without importing typing
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Mapping, Sequence
    from typing import Any, NoReturn

    Handler = Callable[["Context"], int]
    Column = tuple[str, Callable[[dict[str, Any]], str]]
    Register = Callable[[Any, "ArgumentParser"], None] | str

DEFAULT_URL = "http://127.0.0.1:8000"
DEFAULT_PROJECT = "demo"

# Module-level so tests replace it instead of sleeping.
_sleep: Callable[[float], None] = time.sleep


# Configuration ---------------------------------------------------------------------------------


class Settings(namedtuple("Settings", "url token project")):
    """Where (url) and as whom (token: str | None, project) the CLI talks to trainhub."""

    __slots__ = ()


# Paths are strings and os.path's: pathlib would add its imports to every command's start-up.


def config_path(environ: Mapping[str, str]) -> str:
    """`$TRAINHUB_CONFIG`, else `$XDG_CONFIG_HOME/trainhub/config.json`, else `~/.config/...`."""
    if environ.get("TRAINHUB_CONFIG"):
        return os.path.expanduser(environ["TRAINHUB_CONFIG"])
    base = environ.get("XDG_CONFIG_HOME") or os.path.join(environ.get("HOME") or os.path.expanduser("~"), ".config")
    return os.path.join(base, "trainhub", "config.json")


def read_config(path: str) -> dict[str, Any]:
    """The stored configuration, or `{}` when there is no config file yet."""
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except FileNotFoundError:
        return {}
    try:
        stored = json.loads(text)
    except ValueError as exc:
        raise CliError(f"config file [{path}] is not valid JSON ({exc}); fix or delete it") from exc
    if not isinstance(stored, dict):
        raise CliError(f"config file [{path}] must hold a JSON object; fix or delete it")
    return stored


def write_config(path: str, values: Mapping[str, Any]) -> None:
    """Write the configuration readable by the owner only, since it holds a token."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), mode=0o700, exist_ok=True)
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


class _SubCommands(argparse._SubParsersAction):
    """Subcommands whose parsers can be built when the command line chooses one (`add_lazy`): a
    `trainhub` run builds and imports only the command group, and within it the command, it runs,
    and lists the others in the help by their name and help text."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._lazy: dict[str, tuple[Register, ArgumentParser]] = {}

    def add_lazy(self, name: str, help_text: str, register: Register, common: ArgumentParser) -> None:
        """List ``name`` with ``help_text``; when it is chosen, call ``register`` (a function, or
        "module:function" to import it only then), which takes this action and `common`, as the
        other register functions do, to add its parser."""
        self._name_parser_map[name] = None  # a valid choice; its parser comes in __call__
        self._choices_actions.append(self._ChoicesPseudoAction(name, (), help_text))
        self._lazy[name] = (register, common)

    def build(self, name: str) -> None:
        """Add the parser of the lazy choice ``name`` now."""
        register, common = self._lazy.pop(name)
        del self._name_parser_map[name]
        listed = len(self._choices_actions)
        if isinstance(register, str):
            module, function = register.split(":")
            register = getattr(importlib.import_module(module), function)
        register(self, common)
        del self._choices_actions[listed:]  # the choice is listed already, in its place

    def __call__(self, parser: Any, namespace: Any, values: Any, option_string: Any = None) -> None:
        if values and values[0] in self._lazy:
            self.build(values[0])
        super().__call__(parser, namespace, values, option_string)


class _HelpFormatter(argparse.HelpFormatter):
    """argparse's formatter given the terminal's width, so that it does not import shutil to ask
    (shutil brings zlib, bz2 and lzma: about 2 ms of every command's start-up, since argparse
    makes a formatter for each parser it builds)."""

    def __init__(self, prog: str, indent_increment: int = 2, max_help_position: int = 24,
                 width: int | None = None) -> None:
        super().__init__(prog, indent_increment, max_help_position,
                         width if width is not None else _terminal_columns() - 2)


def alloc_place() -> dict[str, Any]:
    """Where this sbatch or salloc runs, as slurmctld records it (scontrol's AllocNode:Sid): this
    host's short name and this process's session id."""
    import socket

    return {"allocNode": socket.gethostname().split(".")[0], "allocSid": os.getsid(0)}


def _terminal_columns() -> int:
    """What shutil.get_terminal_size().columns answers: $COLUMNS, else the terminal's width, else 80."""
    try:
        columns = int(os.environ.get("COLUMNS", "0"))
    except ValueError:
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns or 80


class ArgumentParser(argparse.ArgumentParser):
    """argparse that raises _ParserExit rather than exiting the interpreter, and whose subcommands
    can be built lazily (`_SubCommands.add_lazy`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", _HelpFormatter)
        super().__init__(*args, **kwargs)
        self.register("action", "parsers", _SubCommands)

    def exit(self, status: int = 0, message: str | None = None) -> NoReturn:
        if message:
            self._print_message(message, sys.stderr)
        raise _ParserExit(status)


def _arg_type(parse: Callable[[str], Any]) -> Callable[[str], Any]:
    """Adapt a parser raising SpecError to argparse, which reports ArgumentTypeError verbatim."""

    def convert(text: str) -> Any:
        # Imported here: the spec parsers that raise it come from that module, which the commands
        # without spec flags (sbatch, squeue...) need not load.
        from trainhub.cli.worker_pool_spec import SpecError

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


def _add_format(parser: ArgumentParser, choices: Sequence[str]) -> None:
    parser.add_argument("--format", choices=choices, default=choices[0], help=f"output format (default {choices[0]})")


# Running a command ------------------------------------------------------------------------------


class Context:
    """What a command handler needs: its arguments, settings and a way to reach the server.

    `session` sends the requests: None for the standard library's (StdlibSession), or a
    requests.Session or a fake passed to main().
    """

    def __init__(self, args: argparse.Namespace, settings: Settings, config_file: str, session: Any = None) -> None:
        self.args = args
        self.settings = settings
        self.config_file = config_file
        self.session = session

    def client(self) -> TrainhubClient:
        """A client for the configured server."""
        return TrainhubClient(self.settings.url, self.settings.token, self.settings.project, session=self.session)

    def usage_error(self, message: str) -> NoReturn:
        """Report a usage error the way argparse does (exit code 2)."""
        self.args._parser.error(message)

    def resource(self, value: str, collection: str) -> ResourceRef:
        """The regional resource ``value`` names: an ID (with --region) or a full resource name."""
        try:
            return parse_resource_ref(value, collection=collection, project=self.settings.project,
                                      location=self.args.region)
        except ValueError as exc:
            self.usage_error(str(exc))


# Output -----------------------------------------------------------------------------------------


def _write(text: str) -> None:
    sys.stdout.write(text if text.endswith("\n") else text + "\n")
    sys.stdout.flush()


_YAML_OPTIONS: dict[str, Any] = {"sort_keys": False, "allow_unicode": True, "default_flow_style": False}


def _render(document: Any, fmt: str) -> str:
    if fmt == "json":
        return json.dumps(document, indent=2, ensure_ascii=False)
    import yaml  # here, not at the top: most commands never print YAML, and importing it costs start-up time

    return yaml.safe_dump(document, **_YAML_OPTIONS)


def _print_resources(resources: list[dict[str, Any]], fmt: str, columns: Sequence[Column]) -> None:
    if fmt == "json":
        _write(_render(resources, fmt))
    elif fmt == "yaml":
        if resources:
            import yaml

            _write(yaml.safe_dump_all(resources, **_YAML_OPTIONS))
    elif resources:
        rows = [[header for header, _ in columns]] + [[cell(resource) for _, cell in columns] for resource in resources]
        widths = [max(len(row[i]) for row in rows) for i in range(len(columns))]
        _write("\n".join("  ".join(value.ljust(width) for value, width in zip(row, widths)).rstrip() for row in rows))
    if not resources:
        print("Listed 0 items.", file=sys.stderr)


def _field(name: str) -> Callable[[dict[str, Any]], str]:
    return lambda resource: str(resource.get(name, ""))


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
