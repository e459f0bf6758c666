"""The argument parsers of `trainhub`: argparse with subcommands built when a command line names them
(`_SubCommands.add_lazy`), a formatter that does not ask shutil for the terminal's width, and the
helpers the command modules add their flags with.

Imported the first time a parser is built (trainhub.cli.base reads these names from here lazily):
argparse brings re and gettext, and a `trainhub slurm sbatch` in a shell loop that trainhub.cli.quick
parses pays for none of it.
"""

from __future__ import annotations

import argparse
import importlib
import math
import os
import sys

from trainhub.cli.client import DEFAULT_PROJECT, DEFAULT_URL, _ParserExit

TYPE_CHECKING = False  # typing.TYPE_CHECKING, which type checkers take as True, without importing typing
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from typing import Any, NoReturn

    from trainhub.cli.base import Handler, Register


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
