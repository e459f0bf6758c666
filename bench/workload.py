"""The seeded workload shared by every benchmark: a cluster of 8-GPU nodes and a queue of gang jobs.

The same generator feeds the pure placement benchmark (as ``GangRequest``/``FreeNode``) and the
database benchmarks (as Vertex CustomJob bodies and node pools), so their figures describe the
same queue. Everything is drawn from ``random.Random(seed)``: a given (count, seed) always yields
the same jobs, on any machine.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from trainhub.jobs.spec import ReplicaShape
from trainhub.scheduling.placement import FreeNode, GangRequest

SEED = 42
GPUS_PER_NODE = 8

#: The four 8-GPU machine types the cluster is made of (machine type, accelerator type). Their GPU
#: count is fixed by the machine type, so every replica asks for the whole machine.
MACHINES: tuple[tuple[str, str], ...] = (
    ("a2-highgpu-8g", "NVIDIA_TESLA_A100"),
    ("a3-highgpu-8g", "NVIDIA_H100_80GB"),
    ("a3-ultragpu-8g", "NVIDIA_H200_141GB"),
    ("a4-highgpu-8g", "NVIDIA_B200"),
)
#: Share of jobs asking for each machine type, in MACHINES order: the older, cheaper A100 and
#: H100 are asked for more than H200 and B200, while nodes are split evenly.
MACHINE_WEIGHTS: tuple[float, ...] = (0.35, 0.35, 0.15, 0.15)
#: (share of jobs, smallest, largest replica count): mostly small jobs, a tail of large gangs.
REPLICA_MIX: tuple[tuple[float, int, int], ...] = ((0.60, 1, 2), (0.30, 3, 8), (0.10, 9, 16))
#: Share of jobs using the FLEX_START (Dynamic Workload Scheduler) strategy; the rest are STANDARD.
FLEX_START_SHARE = 0.30


@dataclass(frozen=True)
class WorkloadJob:
    """One queued training job: ``replica_count`` whole nodes of one machine type."""

    index: int
    machine_type: str
    accelerator_type: str
    replica_count: int
    strategy: str

    @property
    def shape(self) -> ReplicaShape:
        return ReplicaShape(self.machine_type, self.accelerator_type, GPUS_PER_NODE)

    def pools(self) -> list[tuple[int, int, ReplicaShape]]:
        """(pool index, replica count, shape): a chief in pool 0 (Vertex requires replicaCount 1
        there) and the other workers in pool 1."""
        pools = [(0, 1, self.shape)]
        if self.replica_count > 1:
            pools.append((1, self.replica_count - 1, self.shape))
        return pools

    def gang_request(self) -> GangRequest:
        """The job as the pure placement module sees it, keyed by its index."""
        return GangRequest.from_pools(self.index, self.pools())

    def body(self) -> dict[str, Any]:
        """The job as a Vertex AI v1 CustomJob request body."""
        machine_spec = {"machineType": self.machine_type, "acceleratorType": self.accelerator_type,
                        "acceleratorCount": GPUS_PER_NODE}
        pools = [
            {
                "machineSpec": machine_spec,
                "replicaCount": count,
                "containerSpec": {"imageUri": "python:3.11", "command": ["python", "train.py"],
                                  "args": [f"--job={self.index}"]},
            }
            for _, count, _ in self.pools()
        ]
        scheduling: dict[str, Any] = {"strategy": self.strategy}
        if self.strategy == "FLEX_START":
            scheduling["maxWaitDuration"] = "3600s"
        return {"displayName": f"bench-{self.index}", "labels": {"team": f"team-{self.index % 7}"},
                "jobSpec": {"workerPoolSpecs": pools, "scheduling": scheduling}}


def generate_jobs(count: int, seed: int = SEED) -> list[WorkloadJob]:
    """``count`` jobs drawn from ``random.Random(seed)`` with the mixes defined above."""
    rng = random.Random(seed)
    size_weights = [share for share, _, _ in REPLICA_MIX]
    jobs = []
    for index in range(count):
        machine_type, accelerator_type = rng.choices(MACHINES, weights=MACHINE_WEIGHTS)[0]
        _, smallest, largest = rng.choices(REPLICA_MIX, weights=size_weights)[0]
        strategy = "FLEX_START" if rng.random() < FLEX_START_SHARE else "STANDARD"
        jobs.append(WorkloadJob(index, machine_type, accelerator_type, rng.randint(smallest, largest), strategy))
    return jobs


def node_split(count: int) -> list[tuple[str, str, int]]:
    """(machine type, accelerator type, node count) for ``count`` nodes split evenly over MACHINES."""
    base, extra = divmod(count, len(MACHINES))
    return [(machine, accel, base + (1 if position < extra else 0))
            for position, (machine, accel) in enumerate(MACHINES)]


def free_nodes(count: int) -> list[FreeNode]:
    """``count`` idle 8-GPU nodes for the pure placement pass, ids 1..count."""
    nodes = []
    for machine, accel, pool_size in node_split(count):
        for _ in range(pool_size):
            nodes.append(FreeNode(GPUS_PER_NODE, len(nodes) + 1, machine, accel))
    return nodes
