"""What sbatch and the Slurm pages say of a cluster with simulated nodes (selectors.simulated_notice,
a compiled query since issue 21): whole, partly, or nothing."""

from trainhub.inventory.models import Executor
from trainhub.slurm.selectors import simulated_notice


def test_a_cluster_with_one_simulated_pool_of_two_is_partly_simulated(cluster):
    assert simulated_notice(cluster=cluster) == ("Partly simulated cluster: the nodes of pool(s) a4 are simulated, "
                                                 "so jobs placed there do not really run.")


def test_a_cluster_whose_every_pool_is_simulated_says_so(cluster, slurm_pools):
    slurm_pools["login"].executor = Executor.SIMULATED
    slurm_pools["login"].save(update_fields=["executor"])
    assert simulated_notice(cluster=cluster).startswith("Simulated cluster: the nodes of pool(s) a4, login are")


def test_a_cluster_of_real_nodes_says_nothing(cluster, real_pools):
    assert simulated_notice(cluster=cluster) == ""
