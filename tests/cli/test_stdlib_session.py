"""The CLI's own HTTP client (trainhub.cli.client.StdlibSession: http.client, or urllib.request
through a proxy) against a real local HTTP server: what it sends and how it reads answers."""

from __future__ import annotations

import json
import threading
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from trainhub.cli.client import CliError, TrainhubClient
from trainhub.cli.main import main

JOB = {"name": "projects/demo/locations/r/customJobs/5", "displayName": "five", "state": "JOB_STATE_RUNNING"}


class Server:
    """Answers every request with the next queued (status, headers, body) and records what came."""

    def __init__(self) -> None:
        self.answers: list[tuple[int, dict[str, str | None], bytes]] = []
        self.seen: list[dict[str, Any]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                outer.seen.append({"method": self.command, "path": self.path, "headers": dict(self.headers),
                                   "body": self.rfile.read(length) if length else b""})
                status, headers, body = outer.answers.pop(0)
                self.send_response(status)
                for key, value in {"Content-Length": str(len(body)), **headers}.items():
                    if value is not None:  # None leaves a header out
                        self.send_header(key, value)
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = do_PATCH = do_DELETE = _answer

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.handle_error = lambda request, address: None  # a client that gave up (the timeout test)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def queue(self, status: int, document: Any, headers: dict[str, str] | None = None) -> None:
        self.answers.append((status, {"Content-Type": "application/json", **(headers or {})},
                             json.dumps(document).encode()))


def _serving() -> Iterator[Server]:
    server = Server()
    thread = threading.Thread(target=server.httpd.serve_forever, daemon=True)
    thread.start()
    yield server
    server.httpd.shutdown()
    server.httpd.server_close()


@pytest.fixture
def server() -> Iterator[Server]:
    yield from _serving()


@pytest.fixture
def other_server() -> Iterator[Server]:
    yield from _serving()


@pytest.fixture
def environ(tmp_path: Path, server: Server, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    for name in ("http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY", "no_proxy", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
    return {"TRAINHUB_CONFIG": str(tmp_path / "c.json"), "TRAINHUB_URL": server.url, "TRAINHUB_TOKEN": "tk"}


def test_it_gets_a_resource_with_the_token_and_query(server: Server, environ: dict[str, str],
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    server.queue(200, {"customJobs": [JOB]})
    assert main(["ai", "custom-jobs", "list", "--region", "r", "--limit", "3", "--format", "json"],
                environ=environ) == 0
    (request,) = server.seen
    assert (request["method"], request["path"]) == ("GET", "/v1/projects/demo/locations/r/customJobs?pageSize=3")
    assert request["headers"]["Authorization"] == "Bearer tk"
    assert request["headers"]["Accept"] == "application/json"
    assert json.loads(capsys.readouterr().out) == [JOB]


def test_it_posts_json(server: Server, environ: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    server.queue(200, JOB)
    assert main(["ai", "custom-jobs", "create", "--region", "r", "--display-name", "five", "--worker-pool-spec",
                 "machine-type=n1-standard-4,container-image-uri=gcr.io/p/t:1"], environ=environ) == 0
    (request,) = server.seen
    assert request["method"] == "POST"
    assert request["headers"]["Content-Type"] == "application/json"
    assert json.loads(request["body"])["displayName"] == "five"
    assert "CustomJob [projects/demo/locations/r/customJobs/5] is submitted successfully." in capsys.readouterr().out


def test_it_reads_a_chunked_answer(server: Server, environ: dict[str, str],
                                   capsys: pytest.CaptureFixture[str]) -> None:
    body = json.dumps(JOB).encode()
    chunks = b"".join(b"%x;ext=1\r\n%s\r\n" % (len(part), part) for part in (body[:10], body[10:]))
    server.answers.append((200, {"Transfer-Encoding": "chunked", "Content-Length": None}, chunks + b"0\r\n\r\n"))
    assert main(["ai", "custom-jobs", "describe", "5", "--region", "r", "--format", "json"], environ=environ) == 0
    assert json.loads(capsys.readouterr().out) == JOB


def test_it_reports_a_chunked_answer_cut_short(server: Server, environ: dict[str, str],
                                               capsys: pytest.CaptureFixture[str]) -> None:
    server.answers.append((200, {"Transfer-Encoding": "chunked", "Content-Length": None}, b"40\r\n{}"))
    assert main(["ai", "custom-jobs", "describe", "5", "--region", "r"], environ=environ) == 1
    assert "the answer was cut short" in capsys.readouterr().err


def test_it_reports_the_servers_error_body(server: Server, environ: dict[str, str],
                                           capsys: pytest.CaptureFixture[str]) -> None:
    server.queue(404, {"error": {"code": 404, "status": "NOT_FOUND", "message": "CustomJob 9 not found."}})
    assert main(["ai", "custom-jobs", "describe", "9", "--region", "r"], environ=environ) == 1
    assert capsys.readouterr().err == "ERROR: (trainhub.ai.custom-jobs.describe) NOT_FOUND: CustomJob 9 not found.\n"


def test_it_names_the_target_of_a_redirect_instead_of_following_it(server: Server, environ: dict[str, str],
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    server.queue(301, {}, {"Location": "https://trainhub.example/v1/x"})
    assert main(["ai", "custom-jobs", "describe", "9", "--region", "r"], environ=environ) == 1
    err = capsys.readouterr().err
    assert "HTTP 301, a redirect to [https://trainhub.example/v1/x]" in err
    assert "--url" in err


def test_it_goes_through_the_proxy_the_environment_names(server: Server, environ: dict[str, str],
                                                         monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("http_proxy", server.url)  # the test server plays the proxy: it sees the absolute URL
    server.queue(200, JOB)
    server.queue(403, {"error": {"code": 403, "status": "PERMISSION_DENIED", "message": "no"}})
    environ["TRAINHUB_URL"] = "http://trainhub.invalid"
    assert main(["ai", "custom-jobs", "describe", "5", "--region", "r", "--format", "json"], environ=environ) == 0
    assert server.seen[0]["path"] == "http://trainhub.invalid/v1/projects/demo/locations/r/customJobs/5"
    assert json.loads(capsys.readouterr().out) == JOB
    assert main(["ai", "custom-jobs", "describe", "5", "--region", "r"], environ=environ) == 1
    assert capsys.readouterr().err == "ERROR: (trainhub.ai.custom-jobs.describe) PERMISSION_DENIED: no\n"


def test_it_reads_the_proxy_variables_on_every_request_and_leaves_urlopen_to_others(
        server: Server, other_server: Server, environ: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    environ["TRAINHUB_URL"] = "http://trainhub.invalid"
    for proxy in (server, other_server):
        monkeypatch.setenv("http_proxy", proxy.url)
        proxy.queue(200, JOB)
        assert main(["ai", "custom-jobs", "describe", "5", "--region", "r", "--format", "json"], environ=environ) == 0
        assert [seen["path"] for seen in proxy.seen] == ["http://trainhub.invalid/v1/projects/demo/locations/r/customJobs/5"]
    # The proxy named then is not urllib's for the rest of the process (make run's test fetched a page
    # through a proxy test's long-gone server).
    monkeypatch.delenv("http_proxy")
    server.queue(200, {})
    with urllib.request.urlopen(f"{server.url}/direct", timeout=10) as answer:
        assert answer.status == 200
    assert server.seen[-1]["path"] == "/direct"


def test_it_reports_a_server_that_hangs_up(server: Server, environ: dict[str, str],
                                           capsys: pytest.CaptureFixture[str]) -> None:
    server.answers.append((200, {"Content-Length": "100"}, b"{}"))  # promises 100 bytes, sends 2, closes
    assert main(["ai", "custom-jobs", "describe", "5", "--region", "r"], environ=environ) == 1
    assert capsys.readouterr().err.startswith(f"ERROR: cannot reach trainhub at {server.url}: ")


def test_it_times_out(server: Server, monkeypatch: pytest.MonkeyPatch) -> None:
    gate = threading.Event()
    server.answers.append((200, {}, b"{}"))
    answer = server.httpd.RequestHandlerClass._answer

    def slow(handler: Any) -> None:
        gate.wait(5)
        answer(handler)

    monkeypatch.setattr(server.httpd.RequestHandlerClass, "do_GET", slow)
    try:
        with pytest.raises(CliError, match=r"did not answer within 0.2s"):
            TrainhubClient(server.url, timeout=0.2).get("/v1/x")
    finally:
        gate.set()
