"""Gang placement: all replicas of all worker pools of a job get nodes at once, or none do.

Rule: a replica occupies one whole node (a Vertex replica is one VM) whose machine type equals
``machineSpec.machineType``, whose accelerator type equals the requested one and which has at
least ``acceleratorCount`` GPUs. Among eligible nodes the smallest (fewest GPUs, then lowest id)
is taken first, so larger nodes stay free for requests that need them. A gang that does not fit
consumes nothing and records, per replica shape, how many nodes were missing.

Jobs are considered in the order given (the caller sorts them); a job that does not fit does not
block smaller jobs behind it. Pure Python, no Django: the pass takes a snapshot and returns
decisions, so it is tested and benchmarked without a database.
"""

from __future__ import annotations

import bisect
from collections import Counter
from dataclasses import dataclass, field
from typing import Hashable, Iterable, Sequence

from trainhub.catalog.machines import NO_ACCELERATOR
from trainhub.jobs.spec import ReplicaShape


@dataclass(frozen=True, order=True)
class FreeNode:
    gpu_count: int
    node_id: int
    machine_type: str = field(compare=False)
    accelerator_type: str = field(compare=False)


@dataclass(frozen=True)
class GangRequest:
    key: Hashable
    #: (pool index, replica index, shape) for every replica of every pool.
    replicas: tuple[tuple[int, int, ReplicaShape], ...]

    @classmethod
    def from_pools(cls, key: Hashable, pools: Iterable[tuple[int, int, ReplicaShape]]) -> "GangRequest":
        """Build from (pool index, replica count, shape) triples."""
        replicas = tuple(
            (pool_index, replica_index, shape)
            for pool_index, count, shape in pools
            for replica_index in range(count)
        )
        return cls(key, replicas)


@dataclass(frozen=True)
class Shortfall:
    shape: ReplicaShape
    needed: int
    free: int

    @property
    def missing(self) -> int:
        return self.needed - self.free

    def describe(self) -> str:
        gpus = (f" with {self.shape.accelerator_count} x {self.shape.accelerator_type}"
                if self.shape.accelerator_count else "")
        return (f"{self.missing} more {self.shape.machine_type} node(s){gpus}: "
                f"needs {self.needed}, {self.free} free")


@dataclass
class PassPlan:
    #: job key -> {(pool index, replica index): node id}
    placements: dict[Hashable, dict[tuple[int, int], int]] = field(default_factory=dict)
    #: job key -> what it lacked when its turn came
    shortfalls: dict[Hashable, list[Shortfall]] = field(default_factory=dict)


class CapacityIndex:
    """Free nodes grouped by (machine type, accelerator type), each group sorted by GPU count."""

    def __init__(self, nodes: Iterable[FreeNode]):
        self._groups: dict[tuple[str, str], list[FreeNode]] = {}
        for node in nodes:
            self._groups.setdefault((node.machine_type, node.accelerator_type), []).append(node)
        for group in self._groups.values():
            group.sort()

    def _candidate_groups(self, shape: ReplicaShape) -> list[list[FreeNode]]:
        if shape.accelerator_count:
            group = self._groups.get((shape.machine_type, shape.accelerator_type))
            return [group] if group else []
        # CPU-only replicas may use a node with attached GPUs, but nodes without GPUs come first.
        groups = [g for (machine, accel), g in self._groups.items() if machine == shape.machine_type]
        groups.sort(key=lambda g: (g[0].accelerator_type != NO_ACCELERATOR, g[0].gpu_count) if g else (True, 0))
        return groups

    def take(self, demand: Sequence[tuple[ReplicaShape, int]]) -> list[list[FreeNode]] | Shortfall:
        """Take ``count`` nodes for each (shape, count), all or nothing.

        On failure nothing is taken and the Shortfall names the first shape that ran out, counting
        the nodes left for it after the gang's earlier shapes were served.
        """
        taken: list[tuple[list[FreeNode], list[FreeNode]]] = []
        result: list[list[FreeNode]] = []
        shortfall = None
        for shape, count in demand:
            chosen: list[FreeNode] = []
            for group in self._candidate_groups(shape):
                if len(chosen) == count:
                    break
                start = bisect.bisect_left(group, (shape.accelerator_count,), key=lambda n: (n.gpu_count,))
                grab = group[start:start + count - len(chosen)]
                if grab:
                    del group[start:start + len(grab)]
                    taken.append((group, grab))
                    chosen.extend(grab)
            result.append(chosen)
            if len(chosen) < count:
                shortfall = Shortfall(shape, count, len(chosen))
                break
        if shortfall is not None:
            for group, grab in taken:
                for node in grab:
                    bisect.insort(group, node)
            return shortfall
        return result


def _demand(request: GangRequest) -> list[tuple[ReplicaShape, int]]:
    counts = Counter(shape for _, _, shape in request.replicas)
    # The most demanding shapes choose first so a small request cannot take the only big node.
    return sorted(counts.items(), key=lambda item: (-item[0].accelerator_count, item[0].machine_type))


def plan_pass(requests: Sequence[GangRequest], free_nodes: Iterable[FreeNode]) -> PassPlan:
    """Place each gang in order on the free nodes; see the module docstring for the rule."""
    index = CapacityIndex(free_nodes)
    plan = PassPlan()
    for request in requests:
        demand = _demand(request)
        chosen = index.take(demand)
        if isinstance(chosen, Shortfall):
            plan.shortfalls[request.key] = [chosen]
            continue
        by_shape = {shape: list(nodes) for (shape, _), nodes in zip(demand, chosen)}
        assignment: dict[tuple[int, int], int] = {}
        for pool_index, replica_index, shape in request.replicas:
            assignment[(pool_index, replica_index)] = by_shape[shape].pop(0).node_id
        plan.placements[request.key] = assignment
    return plan
