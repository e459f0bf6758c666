"""The agent's side of the long poll: it waits on the URL the control plane announces and starts a
placement the moment it is committed; with no long poll announced (an older control plane), or one
that fails, it polls conditionally every ``poll_seconds`` instead."""

import datetime as dt
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.utils import timezone

from tests.agent.harness import agent_for_identity, join_nodes
from tests.inventory.test_long_poll import PROMPTLY, Served, _free_port, _place_on_both_a100s, _until
from trainhub.agent.client import Answer, ControlPlane
from trainhub.agent.node import LONG_POLL_SPREAD, NodeAgent, NodeSettings
from trainhub.inventory.models import Node
from trainhub.jobs.models import Replica

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def a100_identities(nodes, tmp_path):
    return join_nodes(tmp_path / "agent", list(Node.objects.filter(pool__name="a100").order_by("name")))


def test_an_agent_waits_on_the_announced_long_poll_and_starts_a_placement_at_once(
        live_server, a100_identities, tmp_path, api, now, settings):
    served = Served(settings.REDIS_URL)
    try:
        settings.TRAINHUB_AGENT_LONG_POLL_URL = f"http://127.0.0.1:{served.port}"
        identity = a100_identities[0]
        agent = NodeAgent(name=identity["node"], control_plane=ControlPlane(live_server.url, identity["credential"]),
                          settings=NodeSettings(work_dir=tmp_path, state_dir=tmp_path / "agent",
                                                facts={"simulated": True, "address": "127.0.0.1"}))
        agent.tick(now=timezone.now())
        assert agent.long_poll_url == served.url and agent.assignments["replicas"] == []
        with ThreadPoolExecutor(1) as between_rounds:
            waiting = between_rounds.submit(agent.wait_for_work)
            _until(lambda: served.waiting(Node.objects.get(name=identity["node"])), "the agent's long poll")
            placed = time.monotonic()
            _place_on_both_a100s(api, now)
            assert waiting.result(timeout=PROMPTLY) is True
        assert time.monotonic() - placed < PROMPTLY
        assert len(agent.assignments["replicas"]) == 1
        replica_id = agent.assignments["replicas"][0]["id"]
        agent.tick(now=timezone.now())  # the round after the wait fetches nothing and starts the replica
        # (its `true` may already have ended and been reported within the same round)
        assert Replica.objects.get(pk=replica_id).started_at is not None
        agent.shutdown()
    finally:
        served.stop()


def test_an_agent_polls_conditionally_without_a_long_poll_or_when_it_fails(a100_identities, tmp_path, settings,
                                                                          caplog):
    agent = agent_for_identity(a100_identities[0], tmp_path / "agent", tmp_path)
    agent.tick(now=timezone.now())
    assert agent.long_poll_url == "" and agent.wait_for_work() is False  # an older control plane

    settings.TRAINHUB_AGENT_LONG_POLL_URL = f"http://127.0.0.1:{_free_port()}"  # announced, but nothing listens
    agent.tick(now=timezone.now() + dt.timedelta(seconds=1))
    assert agent.long_poll_url.endswith("/agent/v1/assignments")
    assert agent.wait_for_work() is False
    assert "long poll" in caplog.text and agent.long_poll_retry_at > time.time()
    assert agent.wait_for_work() is False  # not tried again until a full-sync period has passed
    etag = agent.etag
    agent.tick(now=timezone.now() + dt.timedelta(seconds=2))  # the conditional poll still works
    assert agent.etag == etag


def test_idle_agents_that_start_together_spread_their_long_polls(a100_identities, tmp_path, settings):
    """After a control-plane restart every agent reconnects at once; each idle one asks for its own
    share of --long-poll-seconds, so their waits do not keep ending together."""
    settings.TRAINHUB_AGENT_LONG_POLL_URL = "http://127.0.0.1:9"
    agent = agent_for_identity(a100_identities[0], tmp_path / "agent", tmp_path)
    agent.tick(now=timezone.now())
    asked = []

    def long_poll(url, *, etag, wait):
        asked.append(wait)
        return Answer(304, None, etag)

    agent.api.long_poll = long_poll
    for _ in range(40):
        assert agent.wait_for_work() is True
    longest = agent.settings.long_poll_seconds
    assert all(LONG_POLL_SPREAD * longest <= wait <= longest for wait in asked)
    assert max(asked) - min(asked) > 0.1 * longest


def test_agent_flags_set_the_sync_period_and_the_long_poll(tmp_path):
    from trainhub.agent.main import _parser

    args = _parser().parse_args(["run", "--poll-seconds", "2", "--no-long-poll", "--long-poll-seconds", "20"])
    assert (args.poll_seconds, args.long_poll, args.long_poll_seconds) == (2.0, False, 20.0)
    defaults = _parser().parse_args(["run"])
    assert (defaults.poll_seconds, defaults.long_poll, defaults.long_poll_seconds) == (1.0, True, 25.0)
    with pytest.raises(SystemExit):
        _parser().parse_args(["run", "--long-poll-seconds", "31"])
