"""The Slurm cluster of the demo (`make run`), shaped like the seed's example spec: partition a4
on an a4-highgpu-8g pool, a login pool, a Filestore home, the seed's config block, two prolog
scripts and one epilog script; plus a higher-tier partition on the same nodes (so partition_prio
preemption can be seen), accounts, users and QOS. Idempotent."""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.utils import timezone

from trainhub.iam.models import Project
from trainhub.slurm.models import Account, Association, Qos, SlurmCluster
from trainhub.slurm.services.accounting import account_add, qos_add, user_add
from trainhub.slurm.services.clusters import cluster_create

#: The seed's example config block, prolog and epilog scripts, word for word.
SEED_SLURM_SPEC = {
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
DEMO_CLUSTER = "demo-slurm"
DEMO_HOME = "projects/demo/locations/us-central1-a/instances/demo-home"
#: GPU-seconds dominate billing so fair-share follows GPU use (CPU=1 per core, 16 per GPU).
BILLING = "CPU=1.0,GRES/gpu=16.0"
DEMO_ACCOUNTS = (("ml", 60), ("research", 40))
DEMO_QOS = (("high", {"priority": 100, "preempt": ["normal"]}),)


@transaction.atomic
def demo_slurm_cluster(*, project: Project, user: AbstractBaseUser, compute_pool: str,
                       login_pool: str) -> SlurmCluster:
    cluster = SlurmCluster.objects.filter(project=project, location="us-central1", cluster_id=DEMO_CLUSTER).first()
    now = timezone.now()
    if cluster is None:
        body = {"displayName": "Demo Slurm cluster", "orchestratorSpec": {"slurmSpec": {
            **SEED_SLURM_SPEC,
            # The seed's home is a placeholder (PROJECT_ID, FILESTORE_INSTANCE_ID): name a real-looking one.
            "home_directory_storage": DEMO_HOME,
            "partitions": [
                {"id": "a4", "node_pool_ids": [compute_pool], "config": {"TRESBillingWeights": BILLING}},
                {"id": "a4-urgent", "node_pool_ids": [compute_pool],
                 "config": {"PriorityTier": "2", "TRESBillingWeights": BILLING}},
            ],
            "default_partition_id": "a4",
            "login_node_pool_id": login_pool,
        }}}
        cluster = cluster_create(project=project, location="us-central1", cluster_id=DEMO_CLUSTER, body=body,
                                 user=user, now=now)
    for name, shares in DEMO_ACCOUNTS:
        if not Account.objects.filter(cluster=cluster, name=name).exists():
            account_add(cluster=cluster, name=name, actor="demo loader", shares=shares, now=now)
    for name, settings in DEMO_QOS:
        if not Qos.objects.filter(cluster=cluster, name=name).exists():
            qos_add(cluster=cluster, name=name, actor="demo loader", settings=settings, now=now)
    if not Association.objects.filter(cluster=cluster, user=user.get_username()).exists():
        user_add(cluster=cluster, name=user.get_username(), accounts=[name for name, _ in DEMO_ACCOUNTS],
                 actor="demo loader", settings={"qos": ["normal", "high"]}, now=now)
    return cluster
