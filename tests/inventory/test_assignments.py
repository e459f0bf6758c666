"""What a node's agent is told to run: an idle node's assignments in one compiled statement, the
same document the full read gives; a node with work gets its documents."""

import pytest

from tests.inventory.test_agent_api import joined  # noqa: F401 - the fixture
from tests.inventory.test_long_poll import _place_on_both_a100s
from trainhub.inventory.assignments import node_assignments, node_assignments_of
from trainhub.inventory.models import Node

pytestmark = pytest.mark.django_db(transaction=True)


def _in_full(node: Node) -> dict:
    return node_assignments(node=Node.objects.select_related("pool").get(pk=node.pk))


def test_an_idle_nodes_assignments_take_one_statement_and_are_the_full_document(joined,
                                                                                 django_assert_num_queries):
    node = Node.objects.get(name="a100-0")
    node_assignments_of(node.pk)  # compiled once per process
    with django_assert_num_queries(1):
        idle = node_assignments_of(node.pk)
    assert idle == _in_full(node) == {"node": "a100-0", "state": "UP", "replicas": [], "slurm": []}


def test_a_node_with_a_replica_gets_its_document_and_a_removed_node_none(api, joined, now):
    _place_on_both_a100s(api, now)
    node = Node.objects.get(name="a100-0")
    busy = node_assignments_of(node.pk)
    assert len(busy["replicas"]) == 1 and busy == _in_full(node)
    with pytest.raises(Node.DoesNotExist):
        node_assignments_of(Node.objects.order_by("-pk").first().pk + 1)
