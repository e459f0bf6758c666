"""`make test` runs the suite in several processes (pytest-xdist): each keeps its own Redis database and
rendezvous ports, which processes its tests start take from the environment."""

import os

from tests.conftest import keep_workers_apart


def test_the_third_worker_counts_two_redis_databases_down_and_shifts_its_ports_two_ranges_up(settings, monkeypatch):
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw2")
    monkeypatch.setenv("REDIS_URL", "")
    monkeypatch.setenv("TRAINHUB_RENDEZVOUS_PORTS", "")
    settings.REDIS_URL, settings.TRAINHUB_RENDEZVOUS_PORTS = "redis://:pw@10.0.0.5:6380/1", "29500-29999"

    keep_workers_apart(settings)

    assert settings.REDIS_URL == os.environ["REDIS_URL"] == "redis://:pw@10.0.0.5:6380/15"
    assert settings.TRAINHUB_RENDEZVOUS_PORTS == os.environ["TRAINHUB_RENDEZVOUS_PORTS"] == "30500-30999"


def test_the_first_worker_and_a_run_without_workers_keep_the_configured_stores(settings, monkeypatch):
    settings.REDIS_URL, settings.TRAINHUB_RENDEZVOUS_PORTS = "redis://127.0.0.1:6379/15", "29500-29999"
    for worker in ("gw0", None):
        if worker is None:
            monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
        else:
            monkeypatch.setenv("PYTEST_XDIST_WORKER", worker)

        keep_workers_apart(settings)

        assert (settings.REDIS_URL, settings.TRAINHUB_RENDEZVOUS_PORTS) == ("redis://127.0.0.1:6379/15", "29500-29999")


def test_an_embedded_redis_on_a_unix_socket_is_each_workers_own_already(settings, monkeypatch):
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw1")
    monkeypatch.setenv("TRAINHUB_RENDEZVOUS_PORTS", "")
    settings.REDIS_URL, settings.TRAINHUB_RENDEZVOUS_PORTS = "unix:///tmp/trainhub-test-redis-x/redis.socket", "100-199"

    keep_workers_apart(settings)

    assert settings.REDIS_URL == "unix:///tmp/trainhub-test-redis-x/redis.socket"
    assert settings.TRAINHUB_RENDEZVOUS_PORTS == "200-299"
