"""A cluster's layout as slurm.conf describes it (NodeName= and PartitionName= lines) and its
rendered slurm.conf: the database side of trainhub.slurm.conf."""

from __future__ import annotations

from trainhub.catalog.machines import QUOTA_GPU_NAME, machine_type_get
from trainhub.inventory.models import Node, NodePool
from trainhub.slurm.conf import (
    DEFAULT_NODE_WEIGHT,
    ClusterLayout,
    NodeSpec,
    PartitionSpec,
    parse_config,
    parse_partition_options,
    render_slurm_conf,
)
from trainhub.slurm.models import SlurmCluster
from trainhub.slurm.tres import GresRequest


def gpu_type(pool: NodePool) -> str:
    """The GRES type Slurm would name the pool's GPUs by (gpu:b200:8)."""
    return QUOTA_GPU_NAME.get(pool.accelerator_type, pool.accelerator_type.lower())


def machine_memory_mb(node: Node) -> int:
    """The memory of the node's machine type, in MB: its RealMemory unless the cluster's admin set one."""
    machine = machine_type_get(node.pool.machine_type)
    return int((machine.memory_gib if machine else 1) * 1024)


def real_memory_mb(node: Node, cluster: SlurmCluster) -> int:
    """The node's RealMemory: the one the cluster's admin set (services.clusters.node_real_memory_set),
    else its machine's memory."""
    return cluster.node_real_memory.get(node.name) or machine_memory_mb(node)


def node_weight(node: Node, cluster: SlurmCluster) -> int:
    """The node's Weight=: the one the cluster's admin set (services.clusters.node_weight_set), else 1."""
    return cluster.node_weight.get(node.name, DEFAULT_NODE_WEIGHT)


def node_spec(node: Node, cluster: SlurmCluster) -> NodeSpec:
    """The node's NodeName= line: its machine type's CPUs, its RealMemory (the admin's, else the
    machine's memory), its pool's GPUs, its available features and its Weight."""
    machine = machine_type_get(node.pool.machine_type)
    gres = (GresRequest("gpu", gpu_type(node.pool), node.pool.accelerator_count),) if node.pool.accelerator_count else ()
    return NodeSpec(name=node.name, cpus=machine.vcpus if machine else 1,
                    real_memory_mb=real_memory_mb(node, cluster), gres=gres,
                    features=tuple(cluster.node_features.get(node.name, {}).get("available", ())),
                    weight=node_weight(node, cluster))


def cluster_layout(cluster: SlurmCluster) -> ClusterLayout:
    partitions = list(cluster.partitions.prefetch_related("node_pools").order_by("position", "name"))
    pool_ids = {pool.pk for partition in partitions for pool in partition.node_pools.all()}
    nodes = list(Node.objects.filter(pool_id__in=pool_ids, dedicated_to=cluster.owner_key).select_related("pool")
                 .order_by("name"))
    names_by_pool: dict[int, list[str]] = {}
    for node in nodes:
        names_by_pool.setdefault(node.pool_id, []).append(node.name)
    return ClusterLayout(
        name=cluster.cluster_id,
        nodes=tuple(node_spec(node, cluster) for node in nodes),
        partitions=tuple(
            PartitionSpec(name=partition.name,
                          nodes=tuple(name for pool in partition.node_pools.all() for name in names_by_pool.get(pool.pk, [])),
                          default=partition.name == cluster.default_partition,
                          options=parse_partition_options(partition.config))
            for partition in partitions),
        controller_host=f"{cluster.cluster_id}-controller",
        prolog_count=len(cluster.prolog_scripts),
        epilog_count=len(cluster.epilog_scripts),
    )


def cluster_slurm_conf(cluster: SlurmCluster) -> str:
    return render_slurm_conf(cluster_layout(cluster), parse_config(cluster.config))
