"""Capacity changes ask for a scheduler pass at once, so waiting jobs do not wait for beat."""

import pytest

from tests.conftest import later
from trainhub.inventory.models import Node, NodeState
from trainhub.inventory.services import node_heartbeat, node_pool_ensure, node_set_state, nodes_dedicate, nodes_release
from trainhub.scheduling import pass_requests, tasks

pytestmark = pytest.mark.django_db


@pytest.fixture
def passes_asked(monkeypatch, redis_client, django_capture_on_commit_callbacks):
    """asked(change) -> whether running ``change`` (committed) sent a scheduler pass task."""
    sent = []
    monkeypatch.setattr(tasks.scheduler_pass, "delay", lambda: sent.append(1))

    def asked(change) -> bool:
        pass_requests.claim(redis_client)  # as if a pass had just started: the next request sends
        sent.clear()
        with django_capture_on_commit_callbacks(execute=True):
            change()
        return bool(sent)

    return asked


def test_new_nodes_a_node_back_up_and_released_nodes_ask_for_a_pass(passes_asked, nodes, now):
    assert passes_asked(lambda: node_pool_ensure(name="t4", machine_type="n1-standard-4", node_count=4,
                                                 accelerator_type="NVIDIA_TESLA_T4", accelerator_count=4))
    node = Node.objects.filter(pool__name="t4").first()
    assert passes_asked(lambda: node_set_state(node=node, state=NodeState.DRAIN, reason="maintenance"))
    assert passes_asked(lambda: node_set_state(node=node, state=NodeState.UP))
    nodes_dedicate(nodes=[node], owner="persistentResources/1")
    assert passes_asked(lambda: nodes_release(owner="persistentResources/1"))


def test_a_heartbeat_reviving_a_down_node_asks_for_a_pass_and_a_routine_one_does_not(passes_asked, nodes, now):
    node = Node.objects.filter(pool__name="t4").first()
    assert not passes_asked(lambda: node_heartbeat(node_ids=[node.pk], now=later(now, 1)))
    node_set_state(node=node, state=NodeState.DOWN, reason="heartbeat expired")
    assert passes_asked(lambda: node_heartbeat(node_ids=[node.pk], now=later(now, 2)))
    node.refresh_from_db()
    assert node.state == NodeState.UP


def test_changes_that_add_nothing_do_not_ask(passes_asked, nodes):
    node = Node.objects.filter(pool__name="t4").first()
    assert not passes_asked(lambda: node_pool_ensure(name="t4", machine_type="n1-standard-4", node_count=1,
                                                     accelerator_type="NVIDIA_TESLA_T4", accelerator_count=4))
    assert not passes_asked(lambda: node_set_state(node=node, state=NodeState.UP))
    assert not passes_asked(lambda: nodes_release(owner="nobody"))
