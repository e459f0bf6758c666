"""`make run`: a calm terminal (services log to files under var/logs, the banner says where), and
PORT and BIND choose the address the web server listens on."""

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path


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


def test_make_run_prints_only_the_banner_and_logs_services_to_files(tmp_path):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {**os.environ, "TRAINHUB_VAR_DIR": str(tmp_path), "PORT": str(port), "PYTHONUNBUFFERED": "1"}
    env.pop("REDIS_URL", None)
    env.pop("DATABASE_URL", None)
    process = subprocess.Popen([sys.executable, "-m", "trainhub.devrun"], env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, cwd=Path(devrun.ROOT))
    lines = []
    worker_log = tmp_path / "logs" / "worker.log"
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not any("service logs:" in line for line in lines):
            line = process.stdout.readline()
            if not line:
                break
            lines.append(line)
        code, not_found = _get(f"http://127.0.0.1:{port}/no-such-page")
        # The worker has started and written its banner: to its file, not to make run's terminal.
        while time.monotonic() < deadline and not (worker_log.exists() and worker_log.stat().st_size):
            time.sleep(0.1)
    finally:
        process.send_signal(signal.SIGINT)
        rest, _ = process.communicate(timeout=60)
    output = "".join(lines) + rest
    assert "trainhub is running at" in output, output
    assert "celery" not in output.lower() and "Applying" not in output, output
    assert "celery" in worker_log.read_text() and (tmp_path / "logs" / "setup.log").read_text()
    # DEBUG is off: a mistyped address gets trainhub's page with a way back, not Django's URL list.
    assert code == 404 and "Back to your jobs" in not_found, (not_found[:500], output)
    assert "URLconf" not in not_found and "DEBUG = True" not in not_found


def test_make_run_turns_debug_off_unless_asked():
    assert devrun.service_environment({})["DEBUG"] == "false"
    assert devrun.service_environment({"DEBUG": "true"})["DEBUG"] == "true"
