"""Where an ``srun`` inside an allocation puts its tasks (srun.1, "-N", "-n", "--ntasks-per-node",
"--gres"; slurm:src/common/slurm_step_layout.c). Pure Python.

- The step runs on the first ``-N`` nodes of the allocation in node-list order; without ``-N``
  on every node, or on ``-n`` nodes when fewer tasks than nodes are asked for.
- Tasks: ``-n``; else ``--ntasks-per-node`` x nodes; else one per node with ``-N``; else the
  job's own task count (srun inherits SLURM_NTASKS from the batch script).
- Block distribution (the default): the first ``tasks % nodes`` nodes get one task more, task
  ids numbered node by node (SLURM_PROCID), SLURM_LOCALID from 0 on each node.
- GPUs: ``--gres=gpu:K`` takes the first K of the job's GPUs on each node of the step; without
  ``--gres`` the step gets all of them (a step is given the job's GRES by default).
"""

from __future__ import annotations

from dataclasses import dataclass

from trainhub.slurm.jobenv import tasks_per_node

NOT_AVAILABLE = "Requested node configuration is not available"
BAD_GRES = "Invalid generic resource (gres) specification"


class StepRefused(ValueError):
    """The step cannot be laid out in the allocation (srun's ``Unable to create step`` reason)."""


@dataclass(frozen=True)
class StepRequest:
    """srun's options; None where the user gave none."""

    nodes: int | None = None
    tasks: int | None = None
    tasks_per_node: int | None = None
    gpus_per_node: int | None = None


@dataclass(frozen=True)
class NodeTasks:
    """One node's part of a step: its position in the allocation, its task ids and its GPUs."""

    allocation_index: int
    task_ids: tuple[int, ...]
    gpu_indices: tuple[int, ...]


def layout(request: StepRequest, *, allocation_gpus: list[tuple[int, ...]], job_tasks: int) -> list[NodeTasks]:
    """Lay a step out over an allocation whose nodes (in node-list order) hold ``allocation_gpus``.

    Raises StepRefused when more nodes or GPUs are asked for than the allocation has."""
    available = len(allocation_gpus)
    for value in (request.nodes, request.tasks, request.tasks_per_node):
        if value is not None and value < 1:
            raise StepRefused(NOT_AVAILABLE)
    if request.nodes is not None and request.nodes > available:
        raise StepRefused(NOT_AVAILABLE)
    nodes = request.nodes or available
    if request.tasks is not None:
        tasks = request.tasks
    elif request.tasks_per_node is not None:
        tasks = request.tasks_per_node * nodes
    elif request.nodes is not None:
        tasks = nodes
    else:
        tasks = job_tasks
    nodes = min(nodes, tasks)
    counts = tasks_per_node(tasks, nodes)
    parts, first = [], 0
    for index, count in enumerate(counts):
        gpus = allocation_gpus[index]
        if request.gpus_per_node is not None:
            if request.gpus_per_node > len(gpus):
                raise StepRefused(BAD_GRES)
            gpus = gpus[:request.gpus_per_node]
        parts.append(NodeTasks(index, tuple(range(first, first + count)), tuple(gpus)))
        first += count
    return parts
