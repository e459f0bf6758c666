"""HTTP access to a trainhub server for the CLI.

Every URL the CLI calls is composed here (`resource_path`, `TOKEN_PATH`, `TrainhubClient.url`),
and every failure, whether the server's Google error body or a network problem, leaves as a
`CliError` that `trainhub.cli.main` renders.

Requests go out through the standard library (`StdlibSession`: http.client, or urllib.request
where the environment names a proxy), since importing `requests` alone takes longer than a whole
`trainhub slurm sbatch` may. A caller can hand in a requests.Session instead (tests, programs that
embed the CLI): anything with requests' `request(method, url, *, params, json, headers, timeout)`
answering an object with status_code, reason, headers, content, text and json().
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections import namedtuple

# STATUS_BY_HTTP also names the error when a body carries no status (e.g. a proxy's HTML page).
from trainhub.common.status import BAD_REQUEST_TYPE, STATUS_BY_HTTP

TYPE_CHECKING = False  # typing.TYPE_CHECKING, which type checkers take as True, without importing typing
if TYPE_CHECKING:
    from typing import Any

DEFAULT_URL = "http://127.0.0.1:8000"
DEFAULT_PROJECT = "demo"
TOKEN_PATH = "/auth/token"
API_VERSION = "v1"
DEFAULT_TIMEOUT_SECONDS = 30.0

# Patterns rather than compiled expressions: compiling one costs start-up time, and few commands
# use them (re caches what it compiles).
#: urllib3 starts its messages with the connection object: "HTTPConnection(host=..., port=...): ".
_CONNECTION_PREFIX = r"^(<[^>]*>|\w+\([^)]*\)): "
_RESOURCE_NAME = (
    r"^projects/(?P<project>[^/]+)/locations/(?P<location>[^/]+)/(?P<collection>[^/]+)/(?P<id>[^/]+)$"
)


class CliError(Exception):
    """A failure to report as one `ERROR:` line, plus any field violations and a hint.

    `status` is the Google status name (INVALID_ARGUMENT, ...) when the server answered; it is
    empty for local failures such as an unreachable server or an unreadable file.
    """

    # A plain class, as are the CLI's other records: importing dataclasses costs every command
    # several milliseconds of start-up.
    def __init__(self, message: str, status: str = "", http_status: int | None = None,
                 violations: list[tuple[str, str]] | None = None, output: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.http_status = http_status
        self.violations = violations if violations is not None else []
        #: What the Slurm command printed before it failed, where the error body carries it (its
        #: ``text``: scontrol show node's nodes and ``Node NAME not found`` lines).
        self.output = output

    def __repr__(self) -> str:
        return (f"CliError(message={self.message!r}, status={self.status!r}, http_status={self.http_status!r}, "
                f"violations={self.violations!r})")


class _ParserExit(Exception):
    """Raised instead of SystemExit (by the argument parsers, trainhub.cli.parsing) so that main() can
    return the exit code."""

    def __init__(self, status: int) -> None:
        super().__init__(status)
        self.status = status


def error_from_response(response: Any) -> CliError:
    """Convert an error response, ideally a Google error body, into a CliError."""
    try:
        document = response.json()
        error = document.get("error")
    except (ValueError, AttributeError):
        document, error = {}, None
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
        output=document.get("text") if isinstance(document.get("text"), str) else "",
    )


def resource_path(
    project: str, location: str, collection: str, resource_id: str | None = None, suffix: str = ""
) -> str:
    """`/v1/projects/P/locations/L/COLLECTION[/ID][SUFFIX]`; suffix is `:cancel`, `/logs`, ..."""
    parts = ["", API_VERSION, "projects", project, "locations", location, collection]
    if resource_id is not None:
        parts.append(resource_id)
    return "/".join(map(_quote, parts)) + suffix


#: What urllib.parse.quote leaves as it is with safe="": letters, digits and "_.-~" (RFC 3986's unreserved).
_UNRESERVED = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-~")


def _quote(part: str) -> str:
    """urllib.parse.quote(part, safe=""), without importing urllib.parse (with ipaddress: ~4 ms of every
    command's start-up, where a path segment is all it was used for)."""
    if part.isascii() and part.replace("-", "").replace("_", "").replace(".", "").isalnum():
        return part
    return "".join(chr(byte) if byte in _UNRESERVED else f"%{byte:02X}" for byte in part.encode("utf-8"))


class ResourceRef(namedtuple("ResourceRef", "project location collection resource_id")):
    """One regional resource, e.g. a custom job: projects/P/locations/L/customJobs/ID."""

    __slots__ = ()

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
    match = re.match(_RESOURCE_NAME, value)
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
        project: str = DEFAULT_PROJECT,
        *,
        session: Any = None,
        timeout: float = DEFAULT_TIMEOUT_SECONDS,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.token = token
        self.project = project
        self.session = session if session is not None else StdlibSession()
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
        response = self._send(method, path, params=params, body=body, authenticated=authenticated)
        return self._document(response, method, path)

    def get_text(self, path: str, params: dict[str, Any] | None = None) -> tuple[str, str]:
        """GET a Slurm report's text and what the command writes to stderr: the body of the server's
        text/plain answer, which spares both sides the JSON (and the server the rows); the JSON's
        ``text`` and ``stderr`` where the server answers JSON (it does when there are error lines)."""
        response = self._send("GET", path, params=params, accept="text/plain")
        if response.headers.get("content-type", "").startswith("text/plain"):
            return response.content.decode("utf-8"), ""
        document = self._document(response, "GET", path)
        return document.get("text", ""), document.get("stderr", "")

    def _send(self, method: str, path: str, *, params: dict[str, Any] | None = None, body: Any = None,
              authenticated: bool = True, accept: str = "application/json") -> Any:
        """One request's answer with a status below 300; CliError for any failure."""
        headers = {"Accept": accept}
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
        except Exception as exc:
            error = self._transport_error(exc)
            if error is None:
                raise
            raise error from exc
        if response.status_code >= 400:
            raise error_from_response(response)
        if response.status_code >= 300:
            raise CliError(f"trainhub at {self.base_url} answered {method} {path} with HTTP {response.status_code}, "
                           f"a redirect to [{response.headers.get('location', '')}]: set --url (or TRAINHUB_URL) "
                           "to the server's own address")
        return response

    def _document(self, response: Any, method: str, path: str) -> dict[str, Any]:
        """The JSON object an answer carries ({} for an empty body); CliError when it is none."""
        if not response.content:
            return {}
        try:
            document = response.json()
        except ValueError as exc:
            raise CliError(f"trainhub at {self.base_url} sent a response that is not JSON for {method} {path}") from exc
        if not isinstance(document, dict):
            raise CliError(f"trainhub at {self.base_url} sent a JSON {type(document).__name__}, not an object")
        return document

    def _transport_error(self, exc: Exception) -> CliError | None:
        """The CliError for a failure to exchange a request, or None for any other exception."""
        # Only a requests session raises requests' errors, and then requests is loaded already.
        requests = sys.modules.get("requests")
        if isinstance(exc, ConnectionFailed) or (requests and isinstance(exc, requests.ConnectionError)):
            return CliError(f"cannot reach trainhub at {self.base_url}: {_reason(exc)}")
        if isinstance(exc, TimedOut) or (requests and isinstance(exc, requests.Timeout)):
            return CliError(f"trainhub at {self.base_url} did not answer within {self.timeout:g}s")
        if requests and isinstance(exc, requests.RequestException):
            return CliError(f"request to trainhub at {self.base_url} failed: {exc}")
        return None

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


def _reason(exc: BaseException) -> str:
    # requests nests urllib3's reason several levels deep; the innermost message is the useful one.
    reason: BaseException = exc
    while reason.args and isinstance(reason.args[0], BaseException):
        reason = reason.args[0]
    reason = getattr(reason, "reason", reason)
    return re.sub(_CONNECTION_PREFIX, "", str(reason))


# Sending requests with the standard library -------------------------------------------------------


class ConnectionFailed(Exception):
    """The server could not be reached, or broke the connection before it had answered."""


class TimedOut(Exception):
    """The server did not answer within the timeout."""


class StdlibResponse:
    """An answer as TrainhubClient reads it: the attributes of requests.Response it uses
    (``headers`` maps lower-case names to values)."""

    def __init__(self, status_code: int, reason: str, headers: dict[str, str], content: bytes) -> None:
        self.status_code, self.reason, self.headers, self.content = status_code, reason, headers, content

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", errors="replace")

    def json(self) -> Any:
        """The body decoded as JSON; ValueError when it is not JSON."""
        return json.loads(self.content)


class StdlibSession:
    """requests.Session's `request()` on the standard library, one connection per request (a
    command sends few).

    Plain `http://` - the usual way to a control plane on the cluster's own network - is one
    HTTP/1.1 exchange on a socket (`_exchange`): http.client alone, with the email package it parses
    headers with, costs more start-up time than the rest of the CLI. `https://`, and any URL
    for which the environment names a proxy, go through urllib.request, which brings TLS and
    applies the proxy and no_proxy variables as requests does.
    """

    user_agent = "trainhub-cli"

    def request(self, method: str, url: str, *, params: dict[str, Any] | None = None, json: Any = None,
                headers: dict[str, str] | None = None, timeout: float | None = None) -> StdlibResponse:
        if params:
            from urllib.parse import urlencode

            url += ("&" if "?" in url else "?") + urlencode(params)
        headers = {"User-Agent": self.user_agent, **(headers or {})}
        body = None
        if json is not None:
            body = _json_dumps(json).encode()
            headers["Content-Type"] = "application/json"
        try:
            target = _plain_http(url)
            if target is not None and not _proxy_named("http"):
                return _exchange(method, target, body, headers, timeout)
            return _urlopen(method, url, body, headers, timeout)
        except TimeoutError as exc:
            raise TimedOut(str(exc)) from exc
        except OSError as exc:
            raise ConnectionFailed(_os_reason(exc)) from exc
        except Exception as exc:
            http_client = sys.modules.get("http.client")  # urllib.request's, if that sent the request
            if http_client is not None and isinstance(exc, http_client.HTTPException):  # e.g. an answer cut short
                raise ConnectionFailed(str(exc) or type(exc).__name__) from exc
            raise


_json_dumps = json.dumps  # StdlibSession.request's `json` argument (requests' name) hides the module


def _proxy_named(scheme: str) -> bool:
    return any(os.environ.get(name) for name in (f"{scheme}_proxy", f"{scheme.upper()}_PROXY", "all_proxy",
                                                  "ALL_PROXY"))


class _HttpTarget(namedtuple("_HttpTarget", "netloc host port path query")):
    """Where a plain http:// request goes, as urllib.parse.urlsplit reads its URL: the netloc (for the
    Host header), the host name (lower case), the port (None: 80), the path and the query."""

    __slots__ = ()


#: Characters that send a URL to urlsplit: user info, IPv6 literals, fragments, and what urlsplit
#: would strip or refuse.
_NOT_PLAIN = frozenset("@[]#\\ ")


def _plain_http(url: str) -> _HttpTarget | None:
    """The target of a plain `http://host[:port][/path][?query]` URL, read as urlsplit reads it; None
    for an https:// URL, and every other URL is read by urlsplit itself (a plain one is read here so
    that a command imports no urllib.parse, and its ipaddress, to send a request)."""
    if url[:7] == "http://" and url.isascii() and url.isprintable() and _NOT_PLAIN.isdisjoint(url):
        rest = url[7:]
        cut = min((index for index in (rest.find("/"), rest.find("?")) if index >= 0), default=len(rest))
        netloc, (path, _, query) = rest[:cut], rest[cut:].partition("?")
        host, colon, port = netloc.partition(":")
        if host and (not colon or (port.isdigit() and len(port) <= 5 and int(port) <= 65535)):
            return _HttpTarget(netloc, host.lower(), int(port) if colon else None, path, query)
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    if parts.scheme != "http":
        return None
    return _HttpTarget(parts.netloc, parts.hostname, parts.port, parts.path, parts.query)


def _exchange(method: str, target: _HttpTarget, body: bytes | None, headers: dict[str, str],
              timeout: float | None) -> StdlibResponse:
    """Send one HTTP/1.1 request with `Connection: close` and read the answer until the server
    closes the connection."""
    import socket

    head = [f"{method} {target.path or '/'}{'?' + target.query if target.query else ''} HTTP/1.1",
            f"Host: {target.netloc.rpartition('@')[2]}", "Connection: close", "Accept-Encoding: identity",
            *(f"{name}: {value}" for name, value in headers.items())]
    if body is not None:
        head.append(f"Content-Length: {len(body)}")
    request = ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + (body or b"")
    host = target.host or ""
    # getaddrinfo encodes a str host with the idna codec, which costs an import (1.5 ms); ASCII needs none.
    address = (host.encode() if host.isascii() else host, target.port or 80)
    with socket.create_connection(address, timeout) as connection:
        connection.sendall(request)
        received = []
        while chunk := connection.recv(65536):
            received.append(chunk)
    return _read_answer(b"".join(received))


def _read_answer(data: bytes) -> StdlibResponse:
    """Status, headers and body of one whole HTTP/1.x answer (identity or chunked body)."""
    head, separator, body = data.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    version, _, status = status_line.partition(" ")
    code, _, reason = status.partition(" ")
    if not separator or not version.startswith("HTTP/") or not code.isdigit():
        raise ConnectionFailed("the connection closed before an answer came" if not data
                               else f"the answer is not HTTP: {status_line[:80]!r}")
    headers = {}
    for line in header_lines:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    if "chunked" in headers.get("transfer-encoding", "").lower():
        body = _unchunk(body)
    elif headers.get("content-length", "").isdigit():
        length = int(headers["content-length"])
        if len(body) < length:
            raise ConnectionFailed(f"the answer was cut short ({len(body)} of {length} bytes)")
        body = body[:length]
    return StdlibResponse(int(code), reason, headers, body)


def _unchunk(data: bytes) -> bytes:
    body, position = bytearray(), 0
    while True:
        line_end = data.find(b"\r\n", position)
        size_text = data[position:line_end].split(b";", 1)[0].strip()
        try:
            size = int(size_text, 16)
        except ValueError:
            size = -1
        start = line_end + 2
        if line_end < 0 or size < 0 or len(data) < start + size:
            raise ConnectionFailed("the answer was cut short (chunked body)")
        if size == 0:
            return bytes(body)
        body += data[start:start + size]
        position = start + size + 2


def _urlopen(method: str, url: str, body: bytes | None, headers: dict[str, str],
             timeout: float | None) -> StdlibResponse:
    import urllib.error
    import urllib.request

    request = urllib.request.Request(url, data=body, headers=headers, method=method)
    # An opener of its own, built now: urlopen's shared one reads the proxy variables once, on its first
    # use in the process, and would keep sending through that proxy - for this client (unlike requests,
    # which reads them on every request) and for any other caller of urlopen in the process.
    opener = urllib.request.build_opener()
    try:
        with opener.open(request, timeout=timeout) as response:  # noqa: S310 - the configured server
            return StdlibResponse(response.status, response.reason, _lower(response.headers), response.read())
    except urllib.error.HTTPError as error:  # an answer with a 4xx/5xx status: the client reads its body
        with error:
            return StdlibResponse(error.code, str(error.reason), _lower(error.headers), error.read())
    except urllib.error.URLError as error:
        if isinstance(error.reason, OSError):
            raise error.reason from error  # a timeout, a refused connection, a TLS failure...
        raise ConnectionFailed(str(error.reason)) from error


def _lower(headers: Any) -> dict[str, str]:
    return {name.lower(): value for name, value in headers.items()}


def _os_reason(exc: BaseException) -> str:
    """`Connection refused` rather than `[Errno 111] Connection refused`."""
    return (exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)) or type(exc).__name__
