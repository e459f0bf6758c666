"""HTTP access to a trainhub server for the CLI.

Every URL the CLI calls is composed here (`resource_path`, `TOKEN_PATH`, `TrainhubClient.url`),
and every failure, whether the server's Google error body or a network problem, leaves as a
`CliError` that `trainhub.cli.main` renders.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import requests

# STATUS_BY_HTTP also names the error when a body carries no status (e.g. a proxy's HTML page).
from trainhub.common.status import BAD_REQUEST_TYPE, STATUS_BY_HTTP

TOKEN_PATH = "/auth/token"
API_VERSION = "v1"
DEFAULT_TIMEOUT_SECONDS = 30.0

#: urllib3 starts its messages with the connection object: "HTTPConnection(host=..., port=...): ".
_CONNECTION_PREFIX = re.compile(r"^(<[^>]*>|\w+\([^)]*\)): ")
_RESOURCE_NAME = re.compile(
    r"^projects/(?P<project>[^/]+)/locations/(?P<location>[^/]+)/(?P<collection>[^/]+)/(?P<id>[^/]+)$"
)


@dataclass
class CliError(Exception):
    """A failure to report as one `ERROR:` line, plus any field violations and a hint.

    `status` is the Google status name (INVALID_ARGUMENT, ...) when the server answered; it is
    empty for local failures such as an unreachable server or an unreadable file.
    """

    message: str
    status: str = ""
    http_status: int | None = None
    violations: list[tuple[str, str]] = field(default_factory=list)

    def __post_init__(self) -> None:
        super().__init__(self.message)


def error_from_response(response: requests.Response) -> CliError:
    """Convert an error response, ideally a Google error body, into a CliError."""
    try:
        error = response.json().get("error")
    except (ValueError, AttributeError):
        error = None
    if not isinstance(error, dict):
        text = " ".join(response.text.split())[:200]
        return CliError(
            text or response.reason or "no error details were sent",
            status=STATUS_BY_HTTP.get(response.status_code, f"HTTP {response.status_code}"),
            http_status=response.status_code,
        )
    violations = [
        (str(violation.get("field", "")), str(violation.get("description", "")))
        for detail in error.get("details") or []
        if isinstance(detail, dict) and detail.get("@type") == BAD_REQUEST_TYPE
        for violation in detail.get("fieldViolations") or []
        if isinstance(violation, dict)
    ]
    return CliError(
        str(error.get("message") or response.reason or "no error message was sent"),
        status=str(error.get("status") or STATUS_BY_HTTP.get(response.status_code, f"HTTP {response.status_code}")),
        http_status=response.status_code,
        violations=violations,
    )


def resource_path(
    project: str, location: str, collection: str, resource_id: str | None = None, suffix: str = ""
) -> str:
    """`/v1/projects/P/locations/L/COLLECTION[/ID][SUFFIX]`; suffix is `:cancel`, `/logs`, ..."""
    parts = ["", API_VERSION, "projects", project, "locations", location, collection]
    if resource_id is not None:
        parts.append(resource_id)
    return "/".join(quote(part, safe="") for part in parts) + suffix


@dataclass(frozen=True)
class ResourceRef:
    """One regional resource, e.g. a custom job: projects/P/locations/L/customJobs/ID."""

    project: str
    location: str
    collection: str
    resource_id: str

    @property
    def name(self) -> str:
        """The full resource name."""
        return f"projects/{self.project}/locations/{self.location}/{self.collection}/{self.resource_id}"

    def path(self, suffix: str = "") -> str:
        """The API path of the resource, optionally with a custom verb or sub-collection."""
        return resource_path(self.project, self.location, self.collection, self.resource_id, suffix)


def parse_resource_ref(value: str, *, collection: str, project: str, location: str | None) -> ResourceRef:
    """Read a bare ID or a full resource name; a full name's project and location win.

    Raises ValueError with a user-facing message when the value is neither, or when a bare ID
    comes without a location.
    """
    match = _RESOURCE_NAME.match(value)
    if match:
        if match["collection"] != collection:
            raise ValueError(f"[{value}] is not a {collection} resource name")
        return ResourceRef(match["project"], match["location"], collection, match["id"])
    if not value or "/" in value:
        raise ValueError(f"expected an ID or projects/PROJECT/locations/REGION/{collection}/ID, got [{value}]")
    if not location:
        raise ValueError("--region is required unless a full resource name is given")
    return ResourceRef(project, location, collection, value)


class TrainhubClient:
    """JSON over HTTP to one trainhub server, authenticated by a bearer token."""

    def __init__(
        self,
        base_url: str,
        token: str | None = None,
        project: str = "demo",
        *,
        session: requests.Session | None = None,
        timeout: float = DEFAULT_TIMEOUT_SECONDS,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.token = token
        self.project = project
        self.session = session if session is not None else requests.Session()
        self.timeout = timeout

    def url(self, path: str) -> str:
        """The absolute URL of an API path."""
        return self.base_url + path

    def request(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, Any] | None = None,
        body: Any = None,
        authenticated: bool = True,
    ) -> dict[str, Any]:
        """Send one request and return the decoded JSON object; raise CliError on any failure."""
        headers = {"Accept": "application/json"}
        if authenticated and self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        try:
            response = self.session.request(
                method,
                self.url(path),
                params={k: v for k, v in (params or {}).items() if v is not None},
                json=body,
                headers=headers,
                timeout=self.timeout,
            )
        except requests.ConnectionError as exc:
            raise CliError(f"cannot reach trainhub at {self.base_url}: {_reason(exc)}") from exc
        except requests.Timeout as exc:
            raise CliError(f"trainhub at {self.base_url} did not answer within {self.timeout:g}s") from exc
        except requests.RequestException as exc:
            raise CliError(f"request to trainhub at {self.base_url} failed: {exc}") from exc
        if response.status_code >= 400:
            raise error_from_response(response)
        if not response.content:
            return {}
        try:
            document = response.json()
        except ValueError as exc:
            raise CliError(f"trainhub at {self.base_url} sent a response that is not JSON for {method} {path}") from exc
        if not isinstance(document, dict):
            raise CliError(f"trainhub at {self.base_url} sent a JSON {type(document).__name__}, not an object")
        return document

    def get(self, path: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """GET a JSON object."""
        return self.request("GET", path, params=params)

    def post(self, path: str, body: Any, *, authenticated: bool = True) -> dict[str, Any]:
        """POST a JSON body and return the JSON object answered."""
        return self.request("POST", path, body=body, authenticated=authenticated)

    def issue_token(self, username: str, password: str) -> str:
        """Exchange a username and password for an API token."""
        answer = self.post(TOKEN_PATH, {"username": username, "password": password}, authenticated=False)
        token = answer.get("token")
        if not isinstance(token, str) or not token:
            raise CliError(f"trainhub at {self.base_url} answered {TOKEN_PATH} without a token")
        return token


def _reason(exc: requests.ConnectionError) -> str:
    # requests nests urllib3's reason several levels deep; the innermost message is the useful one.
    reason: BaseException = exc
    while reason.args and isinstance(reason.args[0], BaseException):
        reason = reason.args[0]
    reason = getattr(reason, "reason", reason)
    return _CONNECTION_PREFIX.sub("", str(reason))
