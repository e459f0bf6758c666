"""Dedicated nodes: held by one owner (a persistent resource, a Slurm cluster), never shared."""

import pytest

from tests.conftest import container_pool, job_body
from trainhub.inventory.models import Node
from trainhub.inventory.services import NodesUnavailable, nodes_dedicate, nodes_release
from trainhub.jobs import services, states
from trainhub.scheduling.services import scheduler_pass


def submit_a100(cast, now):
    return services.job_submit(project=cast["alpha"], location="us-central1", user=cast["uma"],
                               body=job_body(container_pool("a2-highgpu-1g")), now=now)


def test_the_scheduler_never_places_a_custom_job_on_a_dedicated_node(cast, nodes, now):
    nodes_dedicate(nodes=list(nodes["a100"].nodes.all()), owner="persistentResources/1")
    job = submit_a100(cast, now)
    scheduler_pass(now=now)
    job.refresh_from_db()
    assert job.state == states.QUEUED
    assert not job.replicas.exists()


def test_released_nodes_serve_the_shared_pool_again(cast, nodes, now):
    nodes_dedicate(nodes=list(nodes["a100"].nodes.all()), owner="persistentResources/1")
    assert nodes_release(owner="persistentResources/1") == 2
    job = submit_a100(cast, now)
    scheduler_pass(now=now)
    job.refresh_from_db()
    assert job.state == states.PENDING


def test_a_node_held_by_another_owner_is_refused_and_nothing_is_taken(cast, nodes):
    first, second = nodes["a100"].nodes.all()
    nodes_dedicate(nodes=[first], owner="slurmClusters/1")
    with pytest.raises(NodesUnavailable, match=first.name):
        nodes_dedicate(nodes=[first, second], owner="persistentResources/1")
    assert Node.objects.get(pk=second.pk).dedicated_to == ""


def test_a_node_running_a_shared_replica_cannot_be_dedicated(cast, nodes, now):
    job = submit_a100(cast, now)
    scheduler_pass(now=now)
    busy = job.replicas.get().node
    with pytest.raises(NodesUnavailable, match="running jobs"):
        nodes_dedicate(nodes=[busy], owner="persistentResources/1")
