"""Administrators' REST calls for machines: join tokens and the joined nodes (the CLI's
`trainhub nodes ...`). Platform administrators only, as the machines page."""

from __future__ import annotations

import datetime as dt

from django.utils import timezone
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from trainhub.common.errors import ApiError, FieldViolation, invalid_argument
from trainhub.iam.permissions import IsPlatformAdmin
from trainhub.inventory.models import Node, NodePool
from trainhub.inventory.selectors import joined_nodes
from trainhub.inventory.services import join_token_create, node_credential_revoke

MAX_TOKEN_HOURS = 24 * 30


def _whole_number(body: dict, name: str, *, default: int | None, low: int, high: int) -> int | None:
    value = body.get(name, default)
    if value is None:
        return None
    if isinstance(value, str) and value.isdigit():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise invalid_argument([FieldViolation(name, f"a whole number from {low} to {high}")])
    return value


def _named(model, name: str, what: str):
    found = model.objects.filter(name=name).first()
    if found is None:
        raise ApiError(404, f"{what} {name!r} does not exist.")
    return found


def _iso(moment: dt.datetime | None) -> str | None:
    return moment.isoformat().replace("+00:00", "Z") if moment else None


class JoinTokens(APIView):
    """POST /v1/nodePools/{pool}/joinTokens {expiresInHours, maxUses, description} -> the token, once."""

    permission_classes = [IsPlatformAdmin]
    schema = None

    def post(self, request: Request, pool: str) -> Response:
        node_pool = _named(NodePool, pool, "Node pool")
        body = request.data if isinstance(request.data, dict) else {}
        hours = _whole_number(body, "expiresInHours", default=24, low=1, high=MAX_TOKEN_HOURS)
        uses = _whole_number(body, "maxUses", default=None, low=1, high=100000)
        description = body.get("description", "")
        if not isinstance(description, str) or len(description) > 200:
            raise invalid_argument([FieldViolation("description", "a string of at most 200 characters")])
        token, raw = join_token_create(pool=node_pool, created_by=request.user.get_username(), now=timezone.now(),
                                       ttl=dt.timedelta(hours=hours), max_uses=uses, description=description)
        return Response({"token": raw, "pool": node_pool.name, "expireTime": _iso(token.expires_at),
                         "maxUses": token.max_uses})


def node_document(node: Node) -> dict:
    return {"name": node.name, "pool": node.pool.name, "state": node.state, "stateReason": node.state_reason,
            "address": node.address, "simulated": node.simulated, "gpus": node.facts.get("gpus", []),
            "cpus": node.facts.get("cpus"), "memoryBytes": node.facts.get("memoryBytes"),
            "agentVersion": node.facts.get("agentVersion", ""), "joinTime": _iso(node.joined_at),
            "lastHeartbeatTime": _iso(node.last_heartbeat), "credentialLive": node.credential_live}


class JoinedNodes(APIView):
    """GET /v1/nodes -> {nodes: [...]}: every machine an agent joined, with its facts."""

    permission_classes = [IsPlatformAdmin]
    schema = None

    def get(self, request: Request) -> Response:
        return Response({"nodes": [node_document(node) for node in joined_nodes()]})


class NodeRevoke(APIView):
    """POST /v1/nodes/{node}:revoke -> cut the node's agent off (its credential stops working)."""

    permission_classes = [IsPlatformAdmin]
    schema = None

    def post(self, request: Request, node: str) -> Response:
        found = _named(Node, node, "Node")
        return Response({"revoked": node_credential_revoke(node=found, now=timezone.now())})
