"""Which resource pool serves each worker pool of a CustomJob that names a persistent resource.
Pure Python, no Django.

Rules (Vertex persistent-resource-train; issue 4):
- Each non-empty worker pool must match one resource pool's machineSpec (machineType,
  acceleratorType, acceleratorCount) and diskSpec (bootDiskType, bootDiskSizeGb) exactly; the
  first pool that matches serves it. A mismatch names the worker pool and every field in which it
  differs from the closest resource pool (fewest differences, then first).
- The replicas a job asks of one resource pool (worker pools served by the same resource pool
  add up) must fit its size: replicaCount, or maxReplicaCount when the pool autoscales. A job that
  fits the size but not the replicas other jobs leave free is not refused here: it waits.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from trainhub.catalog.machines import NO_ACCELERATOR
from trainhub.common.errors import FieldViolation

_COMPARED = (
    ("machineSpec.machineType", lambda pool: pool["machineSpec"]["machineType"]),
    ("machineSpec.acceleratorType", lambda pool: pool["machineSpec"].get("acceleratorType", NO_ACCELERATOR)),
    ("machineSpec.acceleratorCount", lambda pool: pool["machineSpec"].get("acceleratorCount", 0)),
    ("diskSpec.bootDiskType", lambda pool: pool["diskSpec"]["bootDiskType"]),
    ("diskSpec.bootDiskSizeGb", lambda pool: pool["diskSpec"]["bootDiskSizeGb"]),
)


@dataclass(frozen=True)
class ResourcePoolView:
    """What matching needs of a resource pool; ``spec`` has canonical machineSpec and diskSpec."""

    pool_id: str
    spec: dict[str, Any]
    capacity: int
    autoscaling: bool


@dataclass(frozen=True)
class Difference:
    field: str
    wanted: Any
    offered: Any


def differences(worker_pool: dict[str, Any], resource_pool: ResourcePoolView) -> list[Difference]:
    return [Difference(field, value(worker_pool), value(resource_pool.spec)) for field, value in _COMPARED
            if value(worker_pool) != value(resource_pool.spec)]


def match_worker_pools(worker_pools: Sequence[dict[str, Any]], resource_pools: Sequence[ResourcePoolView],
                       resource_name: str) -> tuple[dict[int, str], list[FieldViolation]]:
    """Map worker pool index -> resource pool id for a canonical jobSpec.workerPoolSpecs.

    Returns the mapping and the violations (empty when the job fits the resource).
    """
    mapping: dict[int, str] = {}
    violations: list[FieldViolation] = []
    for index, pool in enumerate(worker_pools):
        if not pool:
            continue
        compared = [(differences(pool, candidate), position, candidate)
                    for position, candidate in enumerate(resource_pools)]
        exact = [candidate for diffs, _, candidate in compared if not diffs]
        if exact:
            mapping[index] = exact[0].pool_id
            continue
        diffs, _, closest = min(compared, key=lambda item: (len(item[0]), item[1]))
        for diff in diffs:
            violations.append(FieldViolation(
                f"jobSpec.workerPoolSpecs[{index}].{diff.field}",
                f"must match a resource pool of {resource_name} exactly: the closest, {closest.pool_id!r}, has "
                f"{diff.field.split('.')[-1]} {diff.offered}, this worker pool asks for {diff.wanted}"))
    by_id = {pool.pool_id: pool for pool in resource_pools}
    for pool_id in dict.fromkeys(mapping.values()):
        served = [index for index, served_by in mapping.items() if served_by == pool_id]
        asked = sum(worker_pools[index]["replicaCount"] for index in served)
        pool = by_id[pool_id]
        if asked > pool.capacity:
            size = f"maxReplicaCount {pool.capacity}" if pool.autoscaling else f"replicaCount {pool.capacity}"
            together = (f"worker pools {', '.join(str(i) for i in served)} together ask for" if len(served) > 1
                        else "asks for")
            violations.append(FieldViolation(
                f"jobSpec.workerPoolSpecs[{served[-1]}].replicaCount",
                f"{together} {asked} replica(s), more than resource pool {pool_id!r} of {resource_name} can ever "
                f"hold ({size})"))
    return mapping, violations
