"""A cluster's layout as slurm.conf describes it (NodeName= and PartitionName= lines) and its
rendered slurm.conf: the database side of trainhub.slurm.conf."""

from __future__ import annotations

from functools import lru_cache
from typing import NamedTuple

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


class PoolShape(NamedTuple):
    """What every node of a pool has, from its machine type and accelerators: its CPUs, its machine's
    memory in MB (its RealMemory unless the cluster's admin set one), its GPUs and the GRES type Slurm
    would name them by (gpu:b200:8)."""

    cpus: int
    machine_memory_mb: int
    gpus: int
    gpu_type: str
    gres: tuple[GresRequest, ...]


@lru_cache(maxsize=1024)
def pool_shape(machine_type: str, accelerator_type: str, accelerator_count: int) -> PoolShape:
    """The PoolShape of a pool of these; computed once per process for each (the machine catalog is
    fixed), not once per node: an sbatch reads every node of its partition."""
    machine = machine_type_get(machine_type)
    kind = QUOTA_GPU_NAME.get(accelerator_type, accelerator_type.lower())
    return PoolShape(cpus=machine.vcpus if machine else 1,
                     machine_memory_mb=int((machine.memory_gib if machine else 1) * 1024),
                     gpus=accelerator_count, gpu_type=kind,
                     gres=(GresRequest("gpu", kind, accelerator_count),) if accelerator_count else ())


def shape_of(pool: NodePool) -> PoolShape:
    return pool_shape(pool.machine_type, pool.accelerator_type, pool.accelerator_count)


def gpu_type(pool: NodePool) -> str:
    """The GRES type Slurm would name the pool's GPUs by (gpu:b200:8)."""
    return shape_of(pool).gpu_type


def machine_memory_mb(node: Node) -> int:
    """The memory of the node's machine type, in MB: its RealMemory unless the cluster's admin set one."""
    return shape_of(node.pool).machine_memory_mb


def named_real_memory_mb(name: str, shape: PoolShape, cluster: SlurmCluster) -> int:
    """RealMemory of the node ``name`` of a pool of ``shape``: the one the cluster's admin set
    (services.clusters.node_real_memory_set), else its machine's memory."""
    return cluster.node_real_memory.get(name) or shape.machine_memory_mb


def named_features(name: str, cluster: SlurmCluster) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """AvailableFeatures= and ActiveFeatures= of the node ``name``: those the cluster's admin set
    (services.clusters.node_features_set), else none."""
    features = cluster.node_features.get(name)
    if not features:
        return (), ()
    return tuple(features.get("available", ())), tuple(features.get("active", ()))


def named_weight(name: str, cluster: SlurmCluster) -> int:
    """Weight= of the node ``name``: the one the cluster's admin set (services.clusters.node_weight_set), else 1."""
    return cluster.node_weight.get(name, DEFAULT_NODE_WEIGHT)


def real_memory_mb(node: Node, cluster: SlurmCluster) -> int:
    return named_real_memory_mb(node.name, shape_of(node.pool), cluster)


def node_weight(node: Node, cluster: SlurmCluster) -> int:
    return named_weight(node.name, cluster)


def node_spec(node: Node, cluster: SlurmCluster) -> NodeSpec:
    """The node's NodeName= line: its machine type's CPUs, its RealMemory (the admin's, else the
    machine's memory), its pool's GPUs, its available features and its Weight."""
    shape = shape_of(node.pool)
    return NodeSpec(name=node.name, cpus=shape.cpus, real_memory_mb=real_memory_mb(node, cluster), gres=shape.gres,
                    features=named_features(node.name, cluster)[0],
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
