"""Every route of the URL conf as a concrete path, so access tests cover new endpoints by themselves.

A route with a parameter this module has no sample value for fails the tests that use it, naming
the parameter: a new endpoint cannot slip past them unseen.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from django.urls import URLPattern, URLResolver, get_resolver
from rest_framework.views import APIView

#: Routes anyone may call, and why.
PUBLIC = {
    "login": "the login form",
    "logout": "logging out needs no account",
    "healthz": "load balancer probe; says only 'ok'",
    "schema": "the OpenAPI document describes the API, no data",
    "swagger-ui": "renders the OpenAPI document",
    "auth-token": "exchanges a username and password for a token",
    "agent-join": "a machine trades a join token (checked by the view) for its node credential",
}
#: The agent API authenticates node credentials in a header only, never a session cookie.
AGENT_API = ("agent-join", "agent-heartbeat", "agent-assignments", "agent-replica-started", "agent-replica-logs",
             "agent-replica-exited", "agent-slurm-logs", "agent-slurm-report", "agent-srun-steps", "agent-srun-step",
             "agent-srun-step-cancel", "agent-srun-step-input", "agent-slurm-task-input", "agent-slurm-task-logs",
             "agent-slurm-tasks-exited")
#: Routes refusing a session POST without a CSRF token is not needed for, and why.
CSRF_EXEMPT = {
    "auth-token": "takes JSON credentials, not a session; a cross-site form cannot send JSON",
    **{name: "the agent API takes no session: a browser's cookie authenticates nothing there" for name in AGENT_API},
}
_PARAMETER = re.compile(r"<(?:\w+:)?(\w+)>")


@dataclass(frozen=True)
class Route:
    name: str
    route: str
    view: object

    @property
    def is_api(self) -> bool:
        view_class = getattr(self.view, "cls", None)
        return isinstance(view_class, type) and issubclass(view_class, APIView)

    @property
    def parameters(self) -> list[str]:
        return _PARAMETER.findall(self.route)

    def path(self, values: dict[str, str]) -> str:
        missing = [name for name in self.parameters if name not in values]
        assert not missing, f"route {self.route!r} ({self.name}) has parameter(s) {missing} with no sample value " \
                            f"in the security tests: add them to the values these tests fill routes with"
        return "/" + _PARAMETER.sub(lambda match: values[match.group(1)], self.route)

    def methods(self) -> list[str]:
        """The HTTP methods the view answers (API views: its handlers; pages: GET and POST)."""
        if self.is_api:
            return [m for m in ("get", "post", "put", "patch", "delete") if hasattr(self.view.cls, m)]
        return ["get", "post"]


def _walk(patterns, prefix: str, namespace: str):
    for entry in patterns:
        if isinstance(entry, URLResolver):
            if entry.namespace == "admin":
                continue  # the admin site is its own; tests cover it separately
            yield from _walk(entry.url_patterns, prefix + str(entry.pattern),
                             f"{namespace}{entry.namespace}:" if entry.namespace else namespace)
        elif isinstance(entry, URLPattern):
            yield Route(f"{namespace}{entry.name or ''}", prefix + str(entry.pattern), entry.callback)


def routes() -> list[Route]:
    """Every route except the admin site, with its full route string."""
    return list(_walk(get_resolver().url_patterns, "", ""))


def protected_routes() -> list[Route]:
    return [route for route in routes() if route.name not in PUBLIC]
