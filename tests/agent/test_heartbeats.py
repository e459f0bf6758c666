"""When the agent heart-beats: while the long poll answers (it counts as contact) only when its
running replicas or facts change, when the control plane says the node is in another state, and
every few minutes; while it polls, every heartbeatSeconds as before. Facts are looked at afresh
every facts_seconds and reach the node when they change."""

import pytest
from django.conf import settings as django_settings

from tests.agent.harness import agent_for_identity, join_nodes
from tests.conftest import later
from trainhub.inventory.models import Node, NodeState
from trainhub.scheduling.services import nodes_sweep_heartbeats

pytestmark = pytest.mark.django_db(transaction=True)
FACTS = {"simulated": True, "address": "127.0.0.1", "hostname": "gpu-1"}


@pytest.fixture
def long_poll_announced(settings):
    """The control plane announces a long poll (the tests step rounds and never wait on it)."""
    settings.TRAINHUB_AGENT_LONG_POLL_URL = "http://127.0.0.1:9"


@pytest.fixture
def agent(nodes, tmp_path):
    identity = join_nodes(tmp_path / "agent", [Node.objects.get(name="a100-0")])[0]
    found = {"facts": dict(FACTS)}
    made = agent_for_identity(identity, tmp_path / "agent", tmp_path, discover=lambda: dict(found["facts"]),
                              facts_seconds=60.0)
    made.settings.facts = dict(FACTS)
    made.found = found
    sent = []
    post = made.api.post

    def recording(path, body):
        if path == "/agent/v1/heartbeat":
            sent.append(body)
        return post(path, body)

    made.api.post = recording
    made.heartbeats = sent
    return made


def test_a_long_polling_agent_heart_beats_every_few_minutes_and_a_polling_one_every_period(
        agent, long_poll_announced, now, settings):
    agent.tick(now=now)
    assert len(agent.heartbeats) == 1 and agent.long_poll_url
    for seconds in (11, 100, 299):
        agent.tick(now=later(now, seconds))
    assert len(agent.heartbeats) == 1
    agent.tick(now=later(now, 301))
    assert len(agent.heartbeats) == 2
    settings.TRAINHUB_AGENT_LONG_POLL_URL = ""  # no long poll any more: the heartbeat is the contact again
    agent.tick(now=later(now, 312))
    agent.tick(now=later(now, 323))
    assert len(agent.heartbeats) == 4


def test_changed_facts_reach_the_node_at_the_next_look_and_unchanged_ones_are_not_resent(
        agent, long_poll_announced, now):
    agent.tick(now=now)
    assert agent.heartbeats[0]["facts"]["address"] == "127.0.0.1"
    agent.found["facts"] = {**FACTS, "address": "10.1.2.3", "hostname": "gpu-1b"}
    agent.tick(now=later(now, 30))
    assert len(agent.heartbeats) == 1  # not looked at again yet
    agent.tick(now=later(now, 61))
    assert agent.heartbeats[-1]["facts"]["address"] == "10.1.2.3"
    node = Node.objects.get(name="a100-0")
    assert (node.address, node.hostname, node.facts["address"]) == ("10.1.2.3", "gpu-1b", "10.1.2.3")
    agent.tick(now=later(now, 122))  # looked at again, unchanged: nothing to send
    assert len(agent.heartbeats) == 2
    agent.tick(now=later(now, 401))  # the periodic beat carries no facts
    assert len(agent.heartbeats) == 3 and "facts" not in agent.heartbeats[-1]


def test_a_node_marked_down_while_its_agent_was_silent_is_up_again_the_round_its_agent_is_heard(
        agent, long_poll_announced, now):
    agent.tick(now=now)
    ttl = django_settings.TRAINHUB_NODE_HEARTBEAT_TTL_SECONDS
    nodes_sweep_heartbeats(now=later(now, ttl + 1))
    assert Node.objects.get(name="a100-0").state == NodeState.DOWN
    agent.tick(now=later(now, ttl + 2))  # the assignments say DOWN; the last heartbeat was answered UP
    assert len(agent.heartbeats) == 2
    assert Node.objects.get(name="a100-0").state == NodeState.UP
    agent.tick(now=later(now, ttl + 3))
    assert len(agent.heartbeats) == 2
