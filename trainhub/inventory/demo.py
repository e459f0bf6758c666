"""The demo cluster `make run` loads: idempotent, safe to run on every start."""

from django.db import transaction

from trainhub.iam.models import Project
from trainhub.iam.roles import ADMIN
from trainhub.iam.services import membership_set, project_create, user_ensure
from trainhub.inventory.models import Executor
from trainhub.inventory.services import node_pool_ensure
from trainhub.resources.selectors import resource_find
from trainhub.resources.services import persistent_resource_create
from trainhub.scheduling.services import quota_set
from trainhub.slurm.demo import demo_slurm_cluster

DEMO_POOLS = [
    # name, machine type, nodes, accelerator override, executor
    ("a100-pool", "a2-highgpu-1g", 4, None, Executor.SUBPROCESS),
    ("cpu-pool", "n1-standard-4", 4, ("NVIDIA_TESLA_T4", 4), Executor.SUBPROCESS),
    ("l4-pool", "g2-standard-12", 4, None, Executor.SUBPROCESS),
    ("h100-pool", "a3-highgpu-8g", 2, None, Executor.SIMULATED),
    ("b200-pool", "a4-highgpu-8g", 2, None, Executor.SIMULATED),
    # the Slurm cluster's: compute (the seed's a4 partition) and login nodes
    ("slurm-a4", "a4-highgpu-8g", 4, None, Executor.SIMULATED),
    ("slurm-login", "n1-standard-4", 1, None, Executor.SUBPROCESS),
]


DEMO_QUOTAS = [
    ("custom_model_training_nvidia_a100_gpus", 4),
    ("custom_model_training_preemptible_nvidia_a100_gpus", 4),
    ("custom_model_training_nvidia_h100_gpus", 16),
    ("custom_model_training_preemptible_nvidia_h100_gpus", 16),
]


#: The seed's shape: n1-standard-4 machines with a T4, one to start with, autoscaling to two; the
#: other cpu-pool nodes stay shared.
DEMO_RESOURCE_ID = "demo-pool"
DEMO_RESOURCE = {
    "displayName": "Demo persistent resource",
    "resourcePools": [{
        "id": "t4",
        "machineSpec": {"machineType": "n1-standard-4", "acceleratorType": "NVIDIA_TESLA_T4", "acceleratorCount": 1},
        "replicaCount": 1,
        "autoscalingSpec": {"minReplicaCount": 1, "maxReplicaCount": 2},
    }],
}


@transaction.atomic
def demo_load() -> dict:
    user = user_ensure(username="demo", password="demo", is_staff=True)
    if not user.is_superuser:
        user.is_superuser = True
        user.save(update_fields=["is_superuser"])
    project = Project.objects.filter(project_id="demo").first() or project_create(project_id="demo",
                                                                                  display_name="Demo project")
    membership_set(project=project, user=user, role=ADMIN)
    for name, machine_type, count, accelerator, executor in DEMO_POOLS:
        accel_type, accel_count = accelerator or (None, None)
        node_pool_ensure(name=name, machine_type=machine_type, node_count=count, accelerator_type=accel_type,
                         accelerator_count=accel_count, executor=executor, simulated_runtime_seconds=60)
    for metric, limit in DEMO_QUOTAS:
        quota_set(project=project, location="us-central1", metric=metric, limit=limit, actor="demo loader")
    if resource_find(project=project, location="us-central1", resource_id=DEMO_RESOURCE_ID) is None:
        # Its nodes are reserved by the operation once a worker runs; RUNNING when their agent answers.
        persistent_resource_create(project=project, location="us-central1", resource_id=DEMO_RESOURCE_ID,
                                   body=DEMO_RESOURCE, user=user)
    cluster = demo_slurm_cluster(project=project, user=user, compute_pool="slurm-a4", login_pool="slurm-login")
    return {"user": user.username, "project": project.project_id, "pools": len(DEMO_POOLS),
            "persistent_resource": DEMO_RESOURCE_ID, "slurm_cluster": cluster.cluster_id}
