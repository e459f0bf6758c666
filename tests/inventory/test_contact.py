"""A held long poll is the node's contact (trainhub.inventory.contact): the long-poll process records
it in Redis, the heartbeat sweep writes it to the nodes' last heartbeat, and a node whose agent
only long-polls stays UP while one that stops goes DOWN after the heartbeat TTL, as before."""

import datetime as dt
import socket
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.conf import settings
from django.utils import timezone

from tests.inventory.test_agent_api import post
from tests.inventory.test_agent_api import joined  # noqa: F401 - the fixture
from tests.inventory.test_long_poll import PATH, PROMPTLY, Served, _until
from trainhub.inventory import contact
from trainhub.inventory.models import Node, NodeState
from trainhub.inventory.services import node_credential_revoke
from trainhub.scheduling import working_memory
from trainhub.scheduling.services import nodes_sweep_heartbeats

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def served(monkeypatch):
    monkeypatch.setattr(contact, "RECORD_SECONDS", 0.05)
    server = Served(settings.REDIS_URL)
    yield server
    server.stop()


def _recorded(redis_client, node: Node) -> float | None:
    return redis_client.zscore(contact.CONTACTS, node.pk)


def _silence_everyone(redis_client, since: dt.datetime) -> None:
    """Every node last heard of at ``since``, in the database and in the heartbeat keys."""
    Node.objects.update(last_heartbeat=since)
    redis_client.delete(*redis_client.keys(f"{working_memory.HEARTBEAT_PREFIX}*"), contact.CONTACTS)


def test_a_node_whose_agent_only_long_polls_stays_up(served, joined, redis_client):
    ttl = settings.TRAINHUB_NODE_HEARTBEAT_TTL_SECONDS
    node = Node.objects.get(name="a100-0")
    long_ago = timezone.now() - dt.timedelta(seconds=ttl + 30)
    etag = served.get(joined[node.name], wait=0).headers["ETag"]
    _silence_everyone(redis_client, long_ago)
    with ThreadPoolExecutor(1) as agent:
        answer = agent.submit(served.get, joined[node.name], etag, 3)
        _until(lambda: served.waiting(node), "the long poll to wait")
        for _ in range(2):  # the second time, nothing asked since the last record: only the held poll counts
            redis_client.delete(contact.CONTACTS)
            _until(lambda: _recorded(redis_client, node) is not None, "the held long poll's contact")
        assert nodes_sweep_heartbeats(now=timezone.now()) == Node.objects.count() - 1
        assert answer.result(timeout=PROMPTLY).status_code == 304
    node.refresh_from_db()
    assert node.state == NodeState.UP
    assert timezone.now() - node.last_heartbeat < dt.timedelta(seconds=PROMPTLY)
    assert set(Node.objects.exclude(pk=node.pk).values_list("state", flat=True)) == {NodeState.DOWN}


@pytest.mark.parametrize("heard", ["long poll", "heartbeat"])
def test_a_silent_node_goes_down_a_heartbeat_ttl_after_its_last_contact_however_it_was_heard(
        heard, joined, redis_client):
    ttl = settings.TRAINHUB_NODE_HEARTBEAT_TTL_SECONDS
    node = Node.objects.get(name="a100-0")
    last = timezone.now().replace(microsecond=0) + dt.timedelta(seconds=100)
    if heard == "long poll":
        contact.contacts_commands(redis_client, {node.pk: last.timestamp()})
    else:
        assert post("/agent/v1/heartbeat", {"time": last.timestamp(), "running": []},
                    joined[node.name]).status_code == 200
    assert nodes_sweep_heartbeats(now=last + dt.timedelta(seconds=ttl - 1)) == Node.objects.count() - 1
    node.refresh_from_db()
    assert (node.state, node.last_heartbeat) == (NodeState.UP, last)
    assert nodes_sweep_heartbeats(now=last + dt.timedelta(seconds=ttl + 1)) == 1
    node.refresh_from_db()
    assert node.state == NodeState.DOWN and node.state_reason.startswith("heartbeat expired")


def test_an_older_contact_never_moves_a_later_heartbeat_back_nor_brings_a_down_node_up(joined, redis_client):
    node = Node.objects.get(name="a100-0")
    beat = timezone.now().replace(microsecond=0)
    assert post("/agent/v1/heartbeat", {"time": beat.timestamp(), "running": []}, joined[node.name]).status_code == 200
    Node.objects.filter(name="a100-1").update(state=NodeState.DOWN, state_reason="heartbeat expired (test)")
    contact.contacts_commands(redis_client, {node.pk: beat.timestamp() - 5,
                                             Node.objects.get(name="a100-1").pk: beat.timestamp() + 5})
    nodes_sweep_heartbeats(now=beat)
    assert Node.objects.get(pk=node.pk).last_heartbeat == beat
    down = Node.objects.get(name="a100-1")
    assert down.state == NodeState.DOWN and down.last_heartbeat == beat + dt.timedelta(seconds=5)


def test_an_agent_that_hangs_up_stops_waiting_and_counting_as_contact_at_once(served, joined):
    node = Node.objects.get(name="a100-0")
    etag = served.get(joined[node.name], wait=0).headers["ETag"]
    agent = socket.create_connection(("127.0.0.1", served.port))
    agent.sendall(f"GET {PATH}?wait=20 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {joined[node.name]}\r\n"
                  f"If-None-Match: {etag}\r\n\r\n".encode())
    _until(lambda: served.waiting(node), "the long poll to wait")
    agent.close()  # killed: the 20 s wait must not go on holding the node as contacted
    _until(lambda: not served.waiting(node), "the hung-up long poll to end", timeout=PROMPTLY)


def test_a_revoked_credentials_long_poll_is_refused_and_is_no_contact(served, joined, redis_client):
    revoked, other = Node.objects.get(name="a100-0"), Node.objects.get(name="a100-1")
    node_credential_revoke(node=revoked, now=timezone.now())
    redis_client.delete(contact.CONTACTS)
    answer = served.get(joined[revoked.name], wait=0)
    assert answer.status_code == 401 and answer.json()["error"]["status"] == "UNAUTHENTICATED"
    assert served.get(joined[other.name], wait=0).status_code == 200
    _until(lambda: _recorded(redis_client, other) is not None, "the other node's contact")
    assert _recorded(redis_client, revoked) is None


def test_contact_is_recorded_often_enough_to_reach_the_database_within_a_short_heartbeat_ttl():
    assert contact.record_period(60) == contact.RECORD_SECONDS == 5.0
    assert contact.record_period(4) == 1.0  # the sweep runs every 2 s: recorded + swept < 4 s
