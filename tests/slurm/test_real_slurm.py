"""trainhub replays the scenario recorded on real Slurm 22.05.8 (fixtures/22.05/scenario.sh, run on
a fresh slurm-harness cluster: 4 nodes gpu[1-4] of 16 CPUs and 8 GPUs, partitions batch (PriorityTier=1)
and urgent (PriorityTier=10), accounts physics and bio) and prints what Slurm printed, byte for byte.

Times differ between the recording and the replay, so the replay steps its own clock through the
same events and a comparison leaves out only the cells that print a wall-clock time.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from trainhub.iam.services import membership_set, user_ensure
from trainhub.iam.roles import USER
from trainhub.inventory.models import Executor, Node
from trainhub.inventory.services import node_heartbeat, node_pool_ensure
from trainhub.slurm import reports
from trainhub.slurm.models import Association
from trainhub.slurm.services.clusters import cluster_create
from trainhub.slurm.services.sacctmgr import sacctmgr_run

from .conftest import SEED_SPEC, run_pass

REAL = Path(__file__).parent / "fixtures" / "22.05" / "scenario"

#: start.sh's accounting, in its order (sacctmgr-setup.txt is what these printed).
SETUP = (
    "sacctmgr -i add account physics Description=physics Organization=science Fairshare=30",
    "sacctmgr -i add account bio Description=bio Organization=science Fairshare=10",
    "sacctmgr -i add User Accounts=physics Partition=batch alice",
    "sacctmgr -i add User Accounts=physics Partition=urgent alice",
    "sacctmgr -i add User Accounts=physics Partition=batch bob",
    "sacctmgr -i add User Accounts=bio Partition=batch bob",
    "sacctmgr -i add User Accounts=bio Partition=batch carol",
    "sacctmgr -i add User Accounts=bio Partition=urgent carol",
)


def real(name: str) -> str:
    return (REAL / f"{name}.txt").read_text()


@pytest.fixture
def harness(cast, now):
    """The harness's cluster in trainhub, its accounting added with start.sh's commands; returns
    (cluster, what those commands printed)."""
    pool = node_pool_ensure(name="gpu", machine_type="n1-standard-16", accelerator_type="NVIDIA_TESLA_V100",
                            accelerator_count=8, node_count=4, executor=Executor.SIMULATED)
    for index, node in enumerate(pool.nodes.order_by("pk"), start=1):
        Node.objects.filter(pk=node.pk).update(name=f"gpu{index}", hostname=f"gpu{index}")
    node_heartbeat(node_ids=list(pool.nodes.values_list("pk", flat=True)), now=now)
    spec = SEED_SPEC["orchestratorSpec"]["slurmSpec"]
    body = {"orchestratorSpec": {"slurmSpec": {
        "config": {**spec["config"], "PriorityCalcPeriod": "1"},
        "partitions": [{"id": "batch", "node_pool_ids": ["gpu"], "config": {"PriorityTier": "1"}},
                       {"id": "urgent", "node_pool_ids": ["gpu"], "config": {"PriorityTier": "10"}}],
        "default_partition_id": "batch"}}}
    cluster = cluster_create(project=cast["alpha"], location="us-central1", cluster_id="harness", body=body,
                             user=cast["alice"], now=now)
    for name in ("bob", "carol"):
        membership_set(project=cast["alpha"], user=user_ensure(username=name, password=f"{name}-password"),
                       role=USER)
    printed = "".join(sacctmgr_run(cluster=cluster, line=line, actor="root", is_admin=True, now=now).output
                      for line in SETUP)
    return cluster, printed


def test_sacctmgr_prints_what_it_printed_on_the_harness(harness):
    cluster, printed = harness
    # its first two lines are `sacctmgr add cluster`'s (clusters are made with the slurmClusters API)
    assert printed == real("sacctmgr-setup").split("\n", 2)[2]


def test_a_fresh_clusters_sshare_is_slurms(harness, now):
    cluster, _ = harness
    text = reports.sshare(cluster, now=now, viewer="root", long=True, all_users=True).text
    assert text == real("sshare-fresh")


def test_more_add_user_forms_print_what_they_printed_on_the_harness(harness, now):
    cluster, _ = harness
    recorded = real("sacctmgr-add-users")
    replayed = ""
    for line in recorded.splitlines():
        if line.startswith("$ "):
            result = sacctmgr_run(cluster=cluster, line=line[2:], actor="root", is_admin=True, now=now)
            replayed += f"{line}\n{result.output}rc={result.exit_code}\n"
    assert replayed == recorded

