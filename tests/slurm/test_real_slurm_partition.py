"""trainhub replays fixtures/22.05/partition.sh: ``scontrol show partition`` of the harness's two
partitions as start.sh makes them, then with every PartitionName= option trainhub supports set
(batch: limits, GraceTime, AllowAccounts/AllowQos, QOS, State=DRAIN, PreemptMode=CANCEL,
TRESBillingWeights; urgent State=DOWN; a third partition tiny INACTIVE with PreemptMode=OFF), byte
for byte, with -o and without, and a name no partition has."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainhub.slurm import reports
from trainhub.slurm.models import Partition
from trainhub.slurm.services.clusters import partition_update

from .test_real_slurm import harness_cluster

REAL = Path(__file__).parent / "fixtures" / "22.05" / "partition"


def real(name: str) -> str:
    return (REAL / f"{name}.txt").read_text()


def partition_lines() -> dict[str, dict[str, str]]:
    """partitionnames.txt: each PartitionName line's options (Nodes, and Default, which trainhub keeps on
    the cluster, left out)."""
    lines = {}
    for line in real("partitionnames").splitlines():
        words = dict(word.split("=", 1) for word in line.replace('"', "").split())
        name = words.pop("PartitionName")
        lines[name] = {key: value for key, value in words.items() if key not in ("Nodes", "Default")}
    return lines


@pytest.fixture
def cluster(cast, now):
    cluster, _ = harness_cluster(cast, now)
    return cluster


def test_the_harness_partitions_print_as_slurm_printed_them(cluster, now):
    assert reports.scontrol_partitions(cluster, now=now).text == real("show-all")
    assert reports.scontrol_partitions(cluster, now=now, partition="batch").text == real("show-batch")
    assert reports.scontrol_partitions(cluster, now=now, one_liner=True).text == real("show-one-liner")


def test_a_partition_no_one_has_is_not_found(cluster, now):
    report = reports.scontrol_partitions(cluster, now=now, partition="nosuch")
    assert (report.text, report.items, report.missing) == (real("show-unknown"), [], ["Partition nosuch not found"])


def test_every_option_prints_as_slurm_printed_it(cluster, now):
    options = partition_lines()
    batch = cluster.partitions.get(name="batch")
    tiny = Partition.objects.create(cluster=cluster, name="tiny", position=2, config={})
    tiny.node_pools.set(batch.node_pools.all())
    for partition in cluster.partitions.all():
        partition_update(partition=partition, config=options[partition.name], actor="root", now=now)
    assert reports.scontrol_partitions(cluster, now=now).text == real("set-all")
    assert reports.scontrol_partitions(cluster, now=now, one_liner=True).text == real("set-one-liner")
    # the weighted billing of the whole partition: 64 CPUs + 62.5 GB x 0.25 + 32 GPUs x 4, truncated
    row = reports.scontrol_partitions(cluster, now=now, partition="batch").rows(0, 1)[0]
    assert (row["TRES"], row["State"], row["AllowAccounts"]) == (
        "cpu=64,mem=62.50G,node=4,billing=207,gres/gpu=32", "DRAIN", "physics,bio")
