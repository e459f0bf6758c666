"""`trainhub auth login|print-token`: obtain, store and show the API token the CLI sends."""

from __future__ import annotations

import getpass

from trainhub.cli import base as cli
from trainhub.cli.client import CliError

TYPE_CHECKING = False  # typing.TYPE_CHECKING, which type checkers take as True, without importing typing
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

# Module-level so tests replace it instead of reading a terminal.
_getpass: Callable[[str], str] = getpass.getpass


def register_auth(subparsers: Any, common: cli.ArgumentParser) -> None:
    """`trainhub auth login|print-token`."""
    auth = cli._add_group(subparsers, "auth", "manage trainhub credentials", common)
    login = cli._add_command(auth, "login", auth_login,
                             "obtain a token with --username/--password, or store one given with --token", common)
    login.add_argument("--username", help="user to log in as")
    login.add_argument("--password", help="password (prompted for when omitted)")
    cli._add_command(auth, "print-token", auth_print_token, "print the token the CLI would send", common)


def auth_login(ctx: cli.Context) -> int:
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
    stored = cli.read_config(ctx.config_file)
    stored.update(url=ctx.settings.url, token=token)
    if getattr(args, "project", None):
        stored["project"] = args.project
    cli.write_config(ctx.config_file, stored)
    who = f" as [{args.username}]" if args.username else ""
    cli._write(f"Logged in to [{ctx.settings.url}]{who}; credentials saved in [{ctx.config_file}].")
    return 0


def auth_print_token(ctx: cli.Context) -> int:
    """Print the token that requests would carry."""
    if not ctx.settings.token:
        raise CliError("no token is configured; run `trainhub auth login` first")
    cli._write(ctx.settings.token)
    return 0
