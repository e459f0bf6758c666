"""Slurm fixtures: the seed's cluster document, pools for it, a staff admin, a cluster made from it."""

from __future__ import annotations

import copy

import pytest

from trainhub.inventory.models import Executor
from trainhub.inventory.services import node_heartbeat, node_pool_ensure

#: The seed's example cluster specification (orchestratorSpec.slurmSpec), word for word.
SEED_SPEC = {
    "orchestratorSpec": {
        "slurmSpec": {
            "partitions": [{"id": "a4", "node_pool_ids": ["a4"]}],
            "login_node_pool_id": "login",
            "home_directory_storage": "projects/PROJECT_ID/locations/REGION-ZONE/instances/FILESTORE_INSTANCE_ID",
            "config": {
                "AccountingStorageEnforce": "associations,limits,qos",
                "PriorityType": "priority/multifactor",
                "PriorityWeightAge": "1000",
                "PriorityWeightFairshare": "10000",
                "PreemptType": "preempt/partition_prio",
                "PreemptMode": "REQUEUE",
                "PreemptExemptTime": "00:10:00",
            },
            "prolog_bash_scripts": [
                "#!/bin/bash\necho 'First prolog script running'",
                "#!/bin/bash\necho 'Second prolog script running'",
            ],
            "epilog_bash_scripts": ["#!/bin/bash\necho 'Epilog script running'"],
        }
    }
}
CLUSTERS = "/v1/projects/alpha/locations/us-central1/slurmClusters"


def seed_spec() -> dict:
    return copy.deepcopy(SEED_SPEC)


def slurm_spec(body: dict) -> dict:
    return body["orchestratorSpec"]["slurmSpec"]


@pytest.fixture
def admin(cast):
    """alice, admin of alpha, is also a platform administrator (is_staff)."""
    cast["alice"].is_staff = True
    cast["alice"].save(update_fields=["is_staff"])
    return cast["alice"]


@pytest.fixture
def slurm_pools(db, now):
    """a4: two B200x8 nodes (simulated), login: one n1-standard-4; agents alive."""
    pools = {
        "a4": node_pool_ensure(name="a4", machine_type="a4-highgpu-8g", node_count=2, executor=Executor.SIMULATED,
                               simulated_runtime_seconds=30),
        "login": node_pool_ensure(name="login", machine_type="n1-standard-4", node_count=1),
    }
    node_heartbeat(node_ids=[n.pk for pool in pools.values() for n in pool.nodes.all()], now=now)
    return pools
