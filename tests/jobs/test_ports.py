"""Rendezvous ports per job: allocated at placement, unique among active jobs on nodes that share an
address, released when the job's replicas end, and sent to the node in the assignment document."""

import pytest

from tests.conftest import container_pool, job_body, later
from trainhub.inventory.assignments import node_assignments
from trainhub.inventory.models import Node
from trainhub.jobs import services, states
from trainhub.jobs.ports import free_master_port, parse_port_range
from trainhub.scheduling.services import scheduler_pass


def test_a_range_holds_pairs_of_master_and_cluster_ports():
    assert list(parse_port_range("29500-29505")) == [29500, 29502, 29504]
    assert list(parse_port_range("29500-29504")) == [29500, 29502]
    assert free_master_port(parse_port_range("29500-29505"), {29500, 29504}) == 29502
    assert free_master_port(parse_port_range("29500-29501"), {29500}) is None
    for wrong in ("29500", "0-10", "29999-29500", "many"):
        with pytest.raises(ValueError):
            parse_port_range(wrong)


@pytest.fixture(autouse=True)
def _the_default_range(settings):
    """The ports these tests name are the default range's. A parallel run gives each test process another
    range (tests/conftest.py's keep_workers_apart); nothing here listens on a port, so every process may use
    the default one."""
    settings.TRAINHUB_RENDEZVOUS_PORTS = "29500-29999"


@pytest.fixture
def submit(cast, nodes, now):
    def submit(replicas=1):
        body = job_body(*[container_pool() for _ in range(replicas)])
        return services.job_submit(project=cast["alpha"], location="us-central1", user=cast["uma"], body=body, now=now)
    return submit


def ports(job):
    return set(job.replicas.filter(active=True).values_list("master_port", "cluster_port"))


def test_jobs_on_nodes_sharing_an_address_get_different_ports(submit, nodes, now):
    Node.objects.filter(pool=nodes["t4"]).update(address="10.0.0.5")
    first, second = submit(), submit()
    scheduler_pass(now=now)
    assert ports(first) == {(29500, 29501)} and ports(second) == {(29502, 29503)}


def test_every_replica_of_a_job_has_its_ports_and_separate_machines_reuse_them(submit, nodes, now):
    Node.objects.filter(pool=nodes["t4"]).update(address="")  # each node its own hostname
    first, second = submit(replicas=2), submit()
    scheduler_pass(now=now)
    assert ports(first) == {(29500, 29501)} and ports(second) == {(29500, 29501)}


def test_a_finished_jobs_ports_are_free_again(submit, nodes, now, settings):
    settings.TRAINHUB_RENDEZVOUS_PORTS = "40000-40001"  # one pair
    Node.objects.filter(pool=nodes["t4"]).update(address="10.0.0.5")
    first, second = submit(), submit()
    scheduler_pass(now=now)
    assert ports(first) == {(40000, 40001)}
    second.refresh_from_db()
    assert second.state == states.QUEUED and not second.replicas.exists()  # no port left: it waits
    replica = first.replicas.get()
    services.replica_started(replica=replica, now=now)
    services.replica_exited(replica=replica, exit_code=0, now=later(now, 1))
    scheduler_pass(now=later(now, 2))
    assert ports(second) == {(40000, 40001)}


def test_the_assignment_document_carries_the_ports(submit, nodes, now):
    Node.objects.filter(pool=nodes["t4"]).update(address="10.0.0.5")
    submit(), submit()
    scheduler_pass(now=now)
    contexts = [doc["context"] for node in Node.objects.filter(pool=nodes["t4"])
                for doc in node_assignments(node=node)["replicas"]]
    assert sorted((c["masterPort"], c["clusterPort"]) for c in contexts) == [(29500, 29501), (29502, 29503)]
