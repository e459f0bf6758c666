"""What sbatch reads of a cluster (snapshot.load_for_submission) agrees with the whole cluster's
state (snapshot.load_cluster) on the partition's nodes: a node whose agent's heartbeat is older than
the TTL, or that never sent one, takes no new job."""

import datetime as dt

from django.conf import settings

from trainhub.inventory.models import Node
from trainhub.slurm import snapshot


def test_a_node_is_available_to_sbatch_only_while_its_heartbeat_is_fresh(accounts, now):
    ttl = dt.timedelta(seconds=settings.TRAINHUB_NODE_HEARTBEAT_TTL_SECONDS)
    fresh, stale = Node.objects.filter(dedicated_to=accounts.owner_key, pool__name="a4").order_by("name")
    Node.objects.filter(pk=fresh.pk).update(last_heartbeat=now - ttl)  # the TTL's edge: still alive
    Node.objects.filter(pk=stale.pk).update(last_heartbeat=now - ttl - dt.timedelta(microseconds=1))
    state, _ = snapshot.load_for_submission(accounts, partition="a4", user="uma", now=now)
    assert {node.name: node.available for node in state.nodes.values()} == {fresh.name: True, stale.name: False}
    assert state.nodes == {pk: node for pk, node in snapshot.load_cluster(accounts, now=now).nodes.items()
                           if pk in state.nodes}

    Node.objects.filter(pk=fresh.pk).update(last_heartbeat=None)
    state, _ = snapshot.load_for_submission(accounts, partition="a4", user="uma", now=now)
    assert not state.nodes[fresh.pk].available
