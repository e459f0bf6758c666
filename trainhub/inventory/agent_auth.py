"""How a node's agent proves who it is: ``Authorization: Bearer thn_...`` (its node credential).

The agent API accepts nothing else, and the user API never accepts a node credential (it looks
up user API tokens only), as the Kubernetes Node authorizer keeps kubelets to node endpoints.
"""

from __future__ import annotations

from rest_framework import authentication, exceptions, permissions

from trainhub.inventory.selectors import NodeRef, node_by_credential


class NodePrincipal:
    """request.user for a node's agent: authenticated, never staff, member of no project."""

    is_authenticated = True
    is_active = True
    is_staff = False
    is_superuser = False

    def __init__(self, node: NodeRef):
        self.node = node

    def __str__(self) -> str:
        return f"node {self.node.name}"


def bearer_credential(header: str) -> str | None:
    """The credential of an ``Authorization: Bearer ...`` header; None for anything else."""
    scheme, _, raw = header.strip().partition(" ")
    if scheme.lower() != "bearer" or not raw.strip():
        return None
    return raw.strip()


class NodeCredentialAuthentication(authentication.BaseAuthentication):
    def authenticate(self, request):
        raw = bearer_credential(authentication.get_authorization_header(request).decode("latin-1"))
        if raw is None:
            return None
        node = node_by_credential(raw=raw)
        if node is None:
            raise exceptions.AuthenticationFailed("Invalid node credential: this endpoint is for node agents "
                                                  "(trainhub-agent join gives a node its credential).")
        return NodePrincipal(node), node

    def authenticate_header(self, request):
        return 'Bearer realm="trainhub-agent"'


class IsNodeAgent(permissions.BasePermission):
    message = "Only a joined node's agent may call the agent API."

    def has_permission(self, request, view) -> bool:
        return isinstance(request.auth, NodeRef)
