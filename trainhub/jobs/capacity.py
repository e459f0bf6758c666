"""What a location's inventory can run, for the submit form: the kinds of node it has (machine
type and GPUs) with free / total counts, and which worker pools can never be placed there.

A replica occupies a whole node, and the scheduler places a gang only when every replica has a
node, so a pool asking for more replicas than the location has matching shared nodes (or for a
machine type it has none of) would wait, then fail. The form says so before the job is queued.
The REST API keeps Vertex's behaviour (queue, then fail with a stockout error).
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Count, Exists, OuterRef, Q

from trainhub.catalog.machines import NO_ACCELERATOR, accelerator_label
from trainhub.common.errors import FieldViolation
from trainhub.jobs.models import Replica
from trainhub.jobs.spec import PoolRequest, ReplicaShape


@dataclass(frozen=True)
class NodeKind:
    """Shared nodes of one shape in a location: how many there are, how many are free now."""

    machine_type: str
    accelerator_type: str
    accelerator_count: int
    total: int
    free: int

    def hint(self, *, gpus_named: bool = False) -> str:
        """"2 of 3 nodes free, 4 × T4" (without the GPUs when the label names them)."""
        named = gpus_named or not self.accelerator_count
        gpus = "" if named else f", {self.accelerator_count} × {accelerator_label(self.accelerator_type)}"
        return f"{self.free} of {self.total} node{'s' if self.total != 1 else ''} free{gpus}"


def node_kinds(*, location: str) -> list[NodeKind]:
    """The location's shared nodes (not held by a persistent resource or a Slurm cluster) by
    shape; free: up and running no replica. One query."""
    from trainhub.inventory.models import Node, NodeState  # inventory reads jobs' models; import late

    busy = Replica.objects.filter(node=OuterRef("pk"), active=True)
    rows = (Node.objects.filter(pool__location=location, dedicated_to="").annotate(busy=Exists(busy))
            .values("pool__machine_type", "pool__accelerator_type", "pool__accelerator_count").order_by()
            .annotate(total=Count("pk"), free=Count("pk", filter=Q(state=NodeState.UP, busy=False))))
    return sorted((NodeKind(row["pool__machine_type"], row["pool__accelerator_type"] or NO_ACCELERATOR,
                            row["pool__accelerator_count"], row["total"], row["free"]) for row in rows),
                  key=lambda kind: (kind.machine_type, kind.accelerator_type))


def kinds_for(shape: ReplicaShape, kinds: list[NodeKind]) -> list[NodeKind]:
    """The kinds of node a replica of ``shape`` may run on, by the placement rule: the same
    machine type, and with GPUs the same type and at least the count asked for."""
    if not shape.accelerator_count:
        return [kind for kind in kinds if kind.machine_type == shape.machine_type]
    return [kind for kind in kinds if kind.machine_type == shape.machine_type
            and kind.accelerator_type == shape.accelerator_type and kind.accelerator_count >= shape.accelerator_count]


def never_fitting(*, pools: tuple[PoolRequest, ...], kinds: list[NodeKind], location: str) -> list[FieldViolation]:
    """A violation per worker pool the location can never place, whatever else finishes.
    Pools of the same shape count together: a gang needs all of their nodes at once."""
    needed: dict[ReplicaShape, int] = {}
    for pool in pools:
        needed[pool.shape] = needed.get(pool.shape, 0) + pool.replica_count
    violations = []
    last_of_shape = {pool.shape: pool.index for pool in pools}  # a shortfall is said once, on the last pool
    for pool in pools:
        shape = pool.shape
        if last_of_shape[shape] != pool.index:
            continue
        total = sum(kind.total for kind in kinds_for(shape, kinds))
        gpus = f" with {shape.accelerator_count} × {accelerator_label(shape.accelerator_type)}" if shape.accelerator_count else ""
        path = f"jobSpec.workerPoolSpecs[{pool.index}]"
        if not total:
            here = sorted({kind.machine_type for kind in kinds})
            violations.append(FieldViolation(
                f"{path}.machineSpec.machineType",
                f"{location} has no {shape.machine_type} node{gpus}, so this job could never start "
                f"(it would wait, then fail). This location has: {', '.join(here) or 'no nodes at all'}."))
        elif needed[shape] > total:
            violations.append(FieldViolation(
                f"{path}.replicaCount",
                f"{location} has {total} {shape.machine_type} node{'s' if total != 1 else ''}{gpus}; the job asks "
                f"for {needed[shape]} at once (one replica per node), so it could never start."))
    return violations

