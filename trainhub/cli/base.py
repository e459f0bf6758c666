"""What every `trainhub` command builds on: configuration, the argument parser and its helpers
(defined in trainhub.cli.parsing and read from here lazily), the `Context` a handler receives, and
output formatting.

The command modules (auth, custom_jobs, hp_tuning_jobs, persistent_resources, slurm) import this
module; `trainhub.cli.main` imports them and assembles the parser. Nothing here imports a command
module, so imports run one way: main -> commands -> base -> (parsing ->) client.

Every command pays this module's imports at start-up (a shell loop of `trainhub slurm sbatch`
pays them per job), so it imports only what every command needs; argparse only when a parser is
built (trainhub.cli.parsing), yaml where YAML is read or printed, and typing only by type checkers
(`TYPE_CHECKING`, below).
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections import namedtuple

# The defaults live beneath this module, where trainhub.cli.parsing reads them too.
from trainhub.cli.client import (
    DEFAULT_PROJECT,
    DEFAULT_URL,
    CliError,
    ResourceRef,
    TrainhubClient,
    parse_resource_ref,
)

TYPE_CHECKING = False  # typing.TYPE_CHECKING, which type checkers take as True, without importing typing
if TYPE_CHECKING:
    from argparse import ArgumentParser
    from collections.abc import Callable, Iterator, Mapping, Sequence
    from typing import Any, NoReturn

    Handler = Callable[["Context"], int]
    Column = tuple[str, Callable[[dict[str, Any]], str]]
    Register = Callable[[Any, "ArgumentParser"], None] | str


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


def resolve_settings(args: Any, environ: Mapping[str, str], stored: Mapping[str, Any]) -> Settings:
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


#: What the parsers are built with lives in trainhub.cli.parsing, which imports argparse (with re and
#: gettext): a `trainhub slurm sbatch` that trainhub.cli.quick parses never loads it. Its names are
#: still read here (``cli.ArgumentParser``, ``cli._add_command``...), imported on first use.
_PARSING = frozenset({"ArgumentParser", "_SubCommands", "_HelpFormatter", "_terminal_columns", "_arg_type", "_positive",
                      "_global_flags", "_add_group", "_add_command", "_add_region", "_add_format"})


def __getattr__(name: str) -> Any:
    if name in _PARSING:
        from trainhub.cli import parsing

        return getattr(parsing, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# Running a command ------------------------------------------------------------------------------


class Context:
    """What a command handler needs: its arguments, settings and a way to reach the server.

    `session` sends the requests: None for the standard library's (StdlibSession), or a
    requests.Session or a fake passed to main().
    """

    def __init__(self, args: Any, settings: Settings, config_file: str, session: Any = None) -> None:
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
