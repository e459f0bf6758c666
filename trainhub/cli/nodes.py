"""`trainhub nodes join-token create|list|revoke`: an administrator adds and manages machines."""

from __future__ import annotations

from trainhub.cli import base as cli

TYPE_CHECKING = False  # typing.TYPE_CHECKING, which type checkers take as True, without importing typing
if TYPE_CHECKING:
    from typing import Any

NODE_COLUMNS: tuple[cli.Column, ...] = (
    ("NAME", cli._field("name")),
    ("POOL", cli._field("pool")),
    ("STATE", cli._field("state")),
    ("ADDRESS", cli._field("address")),
    ("GPUS", lambda node: ("simulated" if node.get("simulated") else
                           f"{len(node.get('gpus') or [])} x {(node.get('gpus') or [{}])[0].get('name', '-')}")),
    ("LAST_HEARTBEAT", cli._field("lastHeartbeatTime")),
)

_JOIN_MESSAGE = """\
Join token for pool [{pool}] (shown only once; expires {expireTime}):

  {token}

On the machine, as root:

  $ pip install trainhub
  $ trainhub-agent run --url {url} --token {token}"""


def register_nodes(subparsers: Any, common: cli.ArgumentParser) -> None:
    """`trainhub nodes join-token create|list|revoke`."""
    nodes = cli._add_group(subparsers, "nodes", "add and manage machines (administrators)", common)
    create = cli._add_command(nodes, "join-token", nodes_join_token, "create a join token for a node pool", common)
    create.add_argument("--pool", required=True, help="the node pool the machines join")
    create.add_argument("--expires-in-hours", type=cli._positive(int), default=24, help="default 24")
    create.add_argument("--max-uses", type=cli._positive(int), help="how many machines may join (default: any)")
    create.add_argument("--description", default="", help="a note shown on the machines page")
    listing = cli._add_command(nodes, "list", nodes_list, "list the machines that joined", common)
    cli._add_format(listing, ("table", "json", "yaml"))
    revoke = cli._add_command(nodes, "revoke", nodes_revoke, "revoke a node's credential", common)
    revoke.add_argument("node", help="node name")


def nodes_join_token(ctx: cli.Context) -> int:
    args = ctx.args
    body = {"expiresInHours": args.expires_in_hours, "description": args.description}
    if args.max_uses:
        body["maxUses"] = args.max_uses
    answer = ctx.client().post(f"/v1/nodePools/{args.pool}/joinTokens", body)
    cli._write(_JOIN_MESSAGE.format(url=ctx.settings.url, **answer))
    return 0


def nodes_list(ctx: cli.Context) -> int:
    cli._print_resources(ctx.client().get("/v1/nodes").get("nodes", []), ctx.args.format, NODE_COLUMNS)
    return 0


def nodes_revoke(ctx: cli.Context) -> int:
    ctx.client().post(f"/v1/nodes/{ctx.args.node}:revoke", {})
    cli._write(f"Node [{ctx.args.node}]'s credential is revoked; its agent can no longer reach trainhub.")
    return 0
