"""The page benchmark and the Slurm page benchmark each build the bench Slurm cluster in one database."""

from django.utils import timezone

from bench.slurm_pages import slurm_cluster
from trainhub.slurm.models import SlurmCluster


def test_the_bench_slurm_cluster_can_be_built_again_on_the_nodes_of_the_previous_one(db):
    now = timezone.now().replace(microsecond=0)
    slurm_cluster(now)

    second, _, _ = slurm_cluster(now)

    assert list(SlurmCluster.objects.values_list("pk", flat=True)) == [second.pk]


def test_the_bench_slurm_cluster_can_have_a_wider_partition_beside_the_usual_one(db):
    from bench.slurm_pages import NODES
    from trainhub.slurm.snapshot import load_cluster

    now = timezone.now().replace(microsecond=0)
    wide, _, _ = slurm_cluster(now, NODES + 4)
    assert len(load_cluster(wide, now=now).partitions["a4"].node_pks) == NODES + 4

    usual, _, _ = slurm_cluster(now)  # the wider pool is another pool: the usual one keeps its size
    assert len(load_cluster(usual, now=now).partitions["a4"].node_pks) == NODES
