"""Helpers for persistent-resource tests: bodies in the seed's shape and resources brought to RUNNING."""

from __future__ import annotations

import pytest

from tests.conftest import container_pool, job_body
from trainhub.jobs import services as job_services
from trainhub.resources import services
from trainhub.resources.models import PersistentResource

T4 = {"machineType": "n1-standard-4", "acceleratorType": "NVIDIA_TESLA_T4", "acceleratorCount": 1}
A100 = {"machineType": "a2-highgpu-1g", "acceleratorType": "NVIDIA_TESLA_A100", "acceleratorCount": 1}


def resource_body(*pools, name="pool of T4s"):
    return {"displayName": name, "resourcePools": list(pools) or [{"machineSpec": dict(T4), "replicaCount": 1}]}


def t4_pool(replicas=1, pool_id="t4", **extra):
    return {"id": pool_id, "machineSpec": dict(T4), "replicaCount": replicas, **extra}


def autoscaling_pool(minimum, maximum, replicas=None, pool_id="t4"):
    pool = {"id": pool_id, "machineSpec": dict(T4), "autoscalingSpec": {"minReplicaCount": minimum,
                                                                         "maxReplicaCount": maximum}}
    if replicas is not None:
        pool["replicaCount"] = replicas
    return pool


def create(cast, now, *pools, resource_id="pr", project="alpha"):
    return services.persistent_resource_create(project=cast[project], location="us-central1", resource_id=resource_id,
                                               body=resource_body(*pools), user=cast["alice"], now=now)


def running(cast, now, *pools, resource_id="pr") -> PersistentResource:
    """A resource created and advanced until RUNNING (the nodes fixture's agents are alive at ``now``)."""
    create(cast, now, *pools, resource_id=resource_id)
    services.persistent_resources_advance(now=now)
    resource = PersistentResource.objects.get(resource_id=resource_id, deleted_time__isnull=True)
    assert resource.state == "RUNNING", resource.error
    return resource


def t4_job(replicas=1, pools=1, resource_id="pr", command=None, **spec):
    """A job in the seed's shape on the resource: n1-standard-4 + 1 T4 per replica."""
    worker_pools = [container_pool(accelerator="NVIDIA_TESLA_T4", count=1, command=command)]
    worker_pools += [container_pool(replicas=replicas, accelerator="NVIDIA_TESLA_T4", count=1, command=command)
                     for _ in range(pools - 1)]
    return job_body(*worker_pools, persistentResourceId=resource_id, **spec)


def submit(cast, now, body, user="uma"):
    return job_services.job_submit(project=cast["alpha"], location="us-central1", user=cast[user], body=body, now=now)


@pytest.fixture
def pr(cast, nodes, now):
    """alpha's "pr": one pool "t4" of two n1-standard-4 + T4 machines, RUNNING."""
    return running(cast, now, t4_pool(2))
