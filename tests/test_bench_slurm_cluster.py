"""The page benchmark and the Slurm page benchmark each build the bench Slurm cluster in one database."""

from django.utils import timezone

from bench.slurm_pages import slurm_cluster
from trainhub.slurm.models import SlurmCluster


def test_the_bench_slurm_cluster_can_be_built_again_on_the_nodes_of_the_previous_one(db):
    now = timezone.now().replace(microsecond=0)
    slurm_cluster(now)

    second, _, _ = slurm_cluster(now)

    assert list(SlurmCluster.objects.values_list("pk", flat=True)) == [second.pk]
