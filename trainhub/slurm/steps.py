"""Where an ``srun`` inside an allocation puts its tasks (srun.1, "-N", "-n", "--ntasks-per-node",
"--gres"; slurm:src/common/slurm_step_layout.c). Pure Python.

- The step runs on the first ``-N`` nodes of the allocation in node-list order; without ``-N``
  on every node, or on ``-n`` nodes when fewer tasks than nodes are asked for. ``-N MIN-MAX`` runs on
  MAX nodes, or all of the allocation's where it has fewer (fixtures/22.05/srun-range: ``-N 2-4`` in a
  3-node job runs 3 tasks on 3 nodes).
- Tasks: ``-n``; else ``--ntasks-per-node`` x nodes; else one per node with ``-N``; else the
  job's own task count (srun inherits SLURM_NTASKS from the batch script).
- Block distribution (the default): the first ``tasks % nodes`` nodes get one task more, task
  ids numbered node by node (SLURM_PROCID), SLURM_LOCALID from 0 on each node.
- ``-m cyclic``: task ids dealt one at a time round the nodes, ``-m plane=N`` N at a time, a node
  with no room left (its CPUs / cpus-per-task) skipped, as slurm_step_layout.c's
  ``_task_layout_cyclic`` / ``_task_layout_plane`` deal them (fixtures/22.05/srun-dist/out-1.txt: ``-m
  cyclic`` over a ``-N 2 -n 5`` job's 4 + 1 CPUs runs tasks 0,2,3,4 on the first node and 1 on the
  second, ``-m plane=2`` 0,1,3,4 and 2). What follows a ``:`` (the distribution over sockets and
  cores) moves no task to another node.
- GPUs: ``--gres=gpu:K`` takes K of the job's GPUs on each node of the step; without ``--gres``
  the step gets all of them (a step is given the job's GRES by default).

Steps share the allocation (slurm:src/slurmctld/step_mgr.c, 22.05; fixtures/22.05/steps/): each
running step holds CPUs and GPUs on its nodes, and a step that does not fit in what the others
left waits (srun: ``step creation temporarily disabled, retrying (Requested nodes are busy)``).

- CPUs: a step takes every CPU of the job on each of its nodes (22.05's default, sacct
  ``1.1 cpu=2`` for ``srun -n1`` in a 2-CPU job); with ``--exact`` only tasks x cpus-per-task.
- GPUs: the lowest-numbered free ones of the job's GPUs on the node; a step without ``--gres``
  needs all of the job's GPUs free there (step 6.1 waited for 6.0's GPUs).
- ``--overlap``: the step neither waits for nor holds anything (4.1 ran beside 4.0); its GPUs are the
  lowest of the job's on the node whatever other steps hold (fixtures/22.05/release, job 3).
- A step's CPUs and GPUs are freed when the whole step ends, not node by node as its tasks end
  (release job 1: a step asking for the node whose tasks had ended waited for the other node's).
- The batch script holds nothing (``scontrol show step N.batch``: CPUs=0).
- More tasks x cpus-per-task on a node than the job has CPUs there can never fit: ``More
  processors requested than permitted``; more GPUs than the job has there: ``Invalid generic
  resource (gres) specification``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from trainhub.agent.srun import ARBITRARY_COUNT, MAX_HOSTFILE_ENTRIES
from trainhub.slurm.hostlist import HostlistError, compress, expand
from trainhub.slurm.jobenv import tasks_per_node

NOT_AVAILABLE = "Requested node configuration is not available"
BAD_GRES = "Invalid generic resource (gres) specification"
TOO_MANY_CPUS = "More processors requested than permitted"
#: Why a step that could fit waits (srun's "retrying (...)").
NODES_BUSY = "Requested nodes are busy"
#: A job stopped at its time limit: its state's description, and slurmstepd's words ending the
#: ``*** JOB N ON NODE CANCELLED AT T DUE TO TIME LIMIT ***`` and ``*** STEP N.M ...`` lines it prints
#: then (fixtures/22.05/srun-timeout).
TIME_LIMIT = "DUE TO TIME LIMIT"


class StepRefused(ValueError):
    """The step cannot be laid out in the allocation (srun's ``Unable to create step`` reason);
    ``detail`` is the line srun prints before it, where Slurm prints one."""

    def __init__(self, reason: str, detail: str | None = None):
        super().__init__(reason)
        self.detail = detail


@dataclass(frozen=True)
class StepRequest:
    """srun's options; None where the user gave none."""

    nodes: int | None = None
    #: ``-N MIN-MAX``'s MAX (``nodes`` is its MIN): the step takes as many of the allocation's nodes.
    max_nodes: int | None = None
    tasks: int | None = None
    tasks_per_node: int | None = None
    gpus_per_node: int | None = None
    #: ``--exact``: only the CPUs the tasks need, not every CPU of the job on the node.
    exact: bool = False
    #: ``--overlap``: share what other steps hold.
    overlap: bool = False
    #: ``-m``'s node level (trainhub.agent.srun.parse_distribution): block, cyclic or plane, dealing
    #: ``plane_size`` task ids at a time; None without -m (laid out as block).
    distribution: str | None = None
    plane_size: int = 1
    #: ``-m arbitrary``: each task's node, in task order (SLURM_HOSTFILE's lines).
    hosts: tuple[str, ...] = ()
    #: srun inside an allocation it did not make (a batch script's, salloc's): without -m its tasks
    #: see srun's default distribution in SLURM_DISTRIBUTION (srun outside one gives them none).
    in_allocation: bool = False


def default_distribution(tasks: int, nodes: int) -> str:
    """srun's distribution without -m: block with more tasks than nodes, else cyclic (its tasks'
    SLURM_DISTRIBUTION, fixtures/22.05/srun-dist/out-1.txt: ``srun`` of 5 tasks on 2 nodes block,
    ``srun -n 2`` cyclic; scontrol show step's Dist=, fixtures/22.05/release/scontrol-step-3.txt)."""
    return "block" if tasks > nodes else "cyclic"


@dataclass(frozen=True)
class NodeTasks:
    """One node's part of a step: its position in the allocation, its task ids and its GPUs."""

    allocation_index: int
    task_ids: tuple[int, ...]
    gpu_indices: tuple[int, ...]


def layout(request: StepRequest, *, allocation_gpus: list[tuple[int, ...]], job_tasks: int,
           task_room: list[int] | None = None, allocation_names: list[str] | None = None) -> list[NodeTasks]:
    """Lay a step out over an allocation whose nodes (in node-list order, named ``allocation_names``)
    hold ``allocation_gpus`` and ``task_room`` tasks (their CPUs / cpus-per-task: a ``-n 20`` job's
    16,4 nodes run a step's tasks 16,4, fixtures/22.05/ntasks/out-2.txt); ``-m arbitrary`` puts each
    task on the node request.hosts names (arbitrary_tasks).

    Raises StepRefused when more nodes or GPUs are asked for than the allocation has."""
    available = len(allocation_gpus)
    for value in (request.nodes, request.tasks, request.tasks_per_node):
        if value is not None and value < 1:
            raise StepRefused(NOT_AVAILABLE)
    if request.nodes is not None and request.nodes > available:
        raise StepRefused(NOT_AVAILABLE)
    nodes = request.nodes or available
    if request.max_nodes is not None:  # -N MIN-MAX: up to MAX of them (fixtures/22.05/srun-range)
        nodes = max(nodes, min(request.max_nodes, available))
    if request.tasks is not None:
        tasks = request.tasks
    elif request.tasks_per_node is not None:
        tasks = request.tasks_per_node * nodes
    elif request.nodes is not None:
        tasks = nodes
    else:
        tasks = job_tasks
    nodes = min(nodes, tasks)
    if request.distribution == "arbitrary":
        placed = arbitrary_tasks(request.hosts, allocation_names or [])
    elif request.distribution in (None, "block"):
        counts = tasks_per_node(tasks, nodes, task_room)
        starts = [sum(counts[:index]) for index in range(nodes)]
        placed = list(enumerate(tuple(range(start, start + count)) for start, count in zip(starts, counts, strict=True)))
    else:
        placed = list(enumerate(deal_tasks(tasks, (task_room or [tasks] * nodes)[:nodes],
                                           request.plane_size if request.distribution == "plane" else 1)))
    parts = []
    for index, ids in placed:
        gpus = allocation_gpus[index]
        if request.gpus_per_node is not None:
            if request.gpus_per_node > len(gpus):
                raise StepRefused(BAD_GRES, f"Step requested gres_per_node=gpu:{request.gpus_per_node} is more "
                                            f"than the job's gres_per_node=gpu:{len(gpus)}")
            gpus = gpus[:request.gpus_per_node]
        parts.append(NodeTasks(index, ids, tuple(gpus)))
    return parts


class ArbitraryCountDiffers(ValueError):
    """``-m arbitrary``'s names are not -n. srun refuses such a step itself in an allocation it did not
    make (job_step_create_allocation's ``You asked for 2 tasks but hostlist specified 3 nodes``,
    fixtures/22.05/small-diffs/out-1.txt), while in its own allocation slurmctld fails it (``Unable to
    create step for job N: Unspecified error``, fixtures/22.05/hostfile-edge/alone-over.err)."""


#: Why slurmctld refuses the step of srun's own allocation whose -m arbitrary names are not -n.
UNSPECIFIED_ERROR = "Unspecified error"


def arbitrary_hosts(entries: Sequence[tuple[str, int]], tasks: int | None,
                    nodes: int | None = None) -> tuple[tuple[str, ...], int]:
    """``-m arbitrary``'s node for each task and the step's task count, from SLURM_HOSTFILE's entries
    as srun read them (trainhub.agent.srun.read_hostfile's runs: entry, times in a row), for a step of
    at most ``nodes`` nodes (-N, else the job's: srun takes SLURM_NNODES) and ``tasks`` (-n; None: a
    task a name; hostfile_names). A list of more distinct nodes than the step may have (``nodes``
    lowered to ``tasks``) is cut to its first ones (first_nodes), the file's order lost (``gpu3,gpu1,
    gpu2`` with -n 2 in a 3-node job: tasks on gpu1, gpu2; ``gpu4*5000,gpu2`` with -n 1: gpu2,
    fixtures/22.05/srun-range/many-star-cut). Raises ArbitraryCountDiffers with srun's line where -n
    still differs from the names (``gpu3*3`` with -n 2: ``You asked for 2 tasks but hostlist specified
    3 nodes``; 5,000 names with -n 2 the same, counted, not listed: srun-range/many-star), and
    ValueError (hostfile_names) where more than MAX_HOSTFILE_ENTRIES names would be tasks."""
    every, distinct, count = hostfile_names(entries)
    if tasks is not None and nodes is not None and len(distinct) > min(nodes, tasks):
        every = first_nodes(distinct, min(nodes, tasks))
        count = len(every)
    if tasks is not None and tasks != count:
        raise ArbitraryCountDiffers(ARBITRARY_COUNT.format(tasks=tasks, hosts=count))
    if every is None:
        raise _too_many()
    return tuple(every), count


def _too_many() -> ValueError:
    return ValueError(f"-m arbitrary's hosts name more than {MAX_HOSTFILE_ENTRIES} nodes (a step places at most "
                      f"{MAX_HOSTFILE_ENTRIES} tasks by name)")


def hostfile_names(entries: Sequence[tuple[str, int]]) -> tuple[list[str] | None, list[str], int]:
    """SLURM_HOSTFILE's entries (runs: entry, times in a row) as names: every name in task order (None
    where there are more than MAX_HOSTFILE_ENTRIES: no step places them), the distinct ones in that
    order, and how many there are. srun joins the entries into one host list and reads it again
    (job_step_create_allocation; fixtures/22.05/small-diffs/out-1.txt), so an entry may name several
    nodes, in order (``gpu[2-3]`` and ``gpu1``: gpu2, gpu3, gpu1), and blanks part names as commas do;
    entries that are no host list are kept as names no node has. More entries than MAX_HOSTFILE_ENTRIES
    are counted, each run's names read once. Raises ValueError for runs of more than
    MAX_HOSTFILE_ENTRIES names in all (what is held; comma-separated ones counted before they are
    split apart, so a body of millions costs no list of them, and host lists once expanded)."""
    if sum(times for _, times in entries) <= MAX_HOSTFILE_ENTRIES:
        every = _names([entry for entry, times in entries for _ in range(times)])
        return every, list(dict.fromkeys(every)), len(every)
    once: list[list[str]] = []
    for entry, _ in entries:
        once.append(_names([entry]))
        if sum(map(len, once)) > MAX_HOSTFILE_ENTRIES:
            raise _too_many()
    count = sum(len(names) * times for names, (_, times) in zip(once, entries, strict=True))
    return None, list(dict.fromkeys(name for names in once for name in names)), count


def _names(entries: list[str]) -> list[str]:
    """The entries' names, host lists expanded; ValueError past MAX_HOSTFILE_ENTRIES of them."""
    words = [word for entry in entries for word in entry.split()]
    if sum(word.count(",") + 1 for word in words) > MAX_HOSTFILE_ENTRIES:  # counted before any is split apart
        raise _too_many()
    try:
        hosts = expand(",".join(words))
    except HostlistError:  # hostlist.py's bound on names included
        hosts = words
    if len(hosts) > MAX_HOSTFILE_ENTRIES:  # host lists (gpu[1-5000]) expanded
        raise _too_many()
    return hosts


def first_nodes(hosts: Sequence[str], count: int) -> list[str]:
    """The first ``count`` distinct nodes of ``hosts`` in node-list order: srun cuts a host list of more
    nodes than tasks so (hostlist_uniq sorts it, then hostlist_pop takes from its end; srun's
    _opt_verify, fixtures/22.05/hostfile-edge/alone-comma-over: ``gpu4,gpu2,gpu1`` with -n 2 runs on
    gpu[1-2]). Names that are no host list (``gpu[1-``) are all kept, uncut, in their order: slurmctld
    refuses them as names it does not know (22.05.8: ``gpu[1-,gpu2,gpu3`` with -n 2 outside a job,
    ``Unable to allocate resources: Invalid node name specified``)."""
    try:
        return expand(compress(hosts))[:count]
    except HostlistError:
        return list(dict.fromkeys(hosts))


def arbitrary_tasks(hosts: tuple[str, ...], names: list[str]) -> list[tuple[int, tuple[int, ...]]]:
    """``-m arbitrary``: task N on the node ``hosts[N]`` names, whatever its CPUs (fixtures/22.05/srun-plane:
    SLURM_HOSTFILE gpu2, gpu1, gpu2 in a job of 4 CPUs on gpu1 and 1 on gpu2 runs tasks 0 and 2 on gpu2);
    the step's nodes in allocation order, with their tasks: (allocation index, task ids). A node
    outside the allocation cannot be given."""
    where = {name: index for index, name in enumerate(names)}
    if not hosts or not set(hosts) <= where.keys():
        raise StepRefused(NOT_AVAILABLE)
    by_node: dict[int, list[int]] = {}
    for task, host in enumerate(hosts):
        by_node.setdefault(where[host], []).append(task)
    return [(index, tuple(ids)) for index, ids in sorted(by_node.items())]


def deal_tasks(tasks: int, room: list[int], size: int) -> list[tuple[int, ...]]:
    """Task ids dealt round the nodes ``size`` at a time (cyclic: 1; plane: its size), each node
    taking no more than its ``room`` while any node has some, then over it as Slurm oversubscribes
    (``_task_layout_cyclic`` / ``_task_layout_plane``). In the first round a node leaves one task
    for each node after it: every node gets one (fixtures/22.05/srun-dist: ``-n 3 -m plane=4`` on
    two nodes runs 0,1 and 2, on three nodes one task each)."""
    dealt: list[list[int]] = [[] for _ in room]
    oversubscribe = sum(room) < tasks
    task, first_round = 0, True
    while task < tasks:
        progressed = False
        for node, ids in enumerate(dealt):
            share = min(size, tasks - task - (len(room) - node - 1)) if first_round else size
            for _ in range(share):
                if task == tasks or not (oversubscribe or len(ids) < room[node]):
                    break
                ids.append(task)
                task += 1
                progressed = True
        oversubscribe = oversubscribe or not progressed
        first_round = False
    return [tuple(ids) for ids in dealt]


def node_step_status(exits: Sequence[Sequence[int]], task_ids: Sequence[int]) -> tuple[int, int]:
    """The step's (exit code, signal) as one node's slurmstepd reports it (22.05's mgr.c
    ``_get_exit_code``; ``exits``: task, exit code, signal; ``task_ids``: the node's tasks in
    SLURM_LOCALID order): the first task a signal killed, else the last task's exit, not the highest,
    since its MAX weighs each task against the step's status before it, still 0
    (fixtures/22.05/srun-range/sacct.txt: step 5.0, task 0 exiting 3 and task 1 then 0 on one node,
    COMPLETED 0:0, while 4.0, the same over two nodes, is FAILED 3:0: slurmctld keeps the worst node's)."""
    by_task = {task: (code, signal) for task, code, signal in exits}
    ordered = [by_task[task] for task in task_ids if task in by_task]
    killed = next(((0, signal) for _, signal in ordered if signal), None)
    return killed or (ordered[-1][0] if ordered else 0, 0)


@dataclass(frozen=True)
class NodeShare:
    """One allocated node as steps see it: the job's CPUs and GPUs there, and what running
    (non-overlapping) steps hold of them."""

    cpus: int
    gpus: tuple[int, ...]
    held_cpus: int = 0
    held_gpus: frozenset[int] = frozenset()


@dataclass(frozen=True)
class Placement:
    """What a step takes on one of its nodes."""

    cpus: int
    gpu_indices: tuple[int, ...]


def place(request: StepRequest, parts: list[NodeTasks], shares: list[NodeShare], *,
          cpus_per_task: int) -> list[Placement] | None:
    """What each node of a laid-out step (``parts``) takes, or None while it must wait for other
    steps to end. Raises StepRefused when it could never fit in the allocation: ``-m arbitrary``
    may put more tasks on a node than the job has CPUs there, but not more in all than the job has
    on the step's nodes (fixtures/22.05/small-diffs/out-1.txt: ``gpu2*2`` and ``gpu1`` over one CPU on
    each is refused, More processors requested than permitted; srun-plane: gpu2, gpu1, gpu2 over
    1 + 4 runs)."""
    if request.distribution == "arbitrary" and (sum(len(part.task_ids) for part in parts) * cpus_per_task
                                                > sum(shares[part.allocation_index].cpus for part in parts)):
        raise StepRefused(TOO_MANY_CPUS)
    placements = []
    for part in parts:
        share = shares[part.allocation_index]
        needed = len(part.task_ids) * cpus_per_task
        if request.distribution == "arbitrary":  # its tasks go where it says, over the node's CPUs if need be
            needed = min(needed, share.cpus)
        if needed > share.cpus:
            raise StepRefused(TOO_MANY_CPUS)
        cpus = needed if request.exact else share.cpus
        if request.overlap:
            placements.append(Placement(cpus, part.gpu_indices))
            continue
        free_gpus = tuple(gpu for gpu in share.gpus if gpu not in share.held_gpus)
        if request.gpus_per_node is None:
            gpus = share.gpus if len(free_gpus) == len(share.gpus) else None
        else:
            gpus = free_gpus[:request.gpus_per_node] if len(free_gpus) >= request.gpus_per_node else None
        if gpus is None or cpus > share.cpus - share.held_cpus:
            return None
        placements.append(Placement(cpus, gpus))
    return placements


def tres_per(request: StepRequest, *, tasks: int, cpus_per_task: int, job_gpus_per_node: int) -> tuple[str, str]:
    """``scontrol show step``'s TresPerStep and TresPerNode ("" where 22.05 prints no line;
    fixtures/22.05/release, scontrol-step-3.txt, out-15.txt, out-16.txt): TresPerNode is the step's
    ``--gres`` or, without it, the job's GPUs per node (srun inherits the job's GRES); TresPerStep
    ``cpu:N`` only for a step given both ``-n`` and ``--gres``."""
    gpus = request.gpus_per_node if request.gpus_per_node is not None else job_gpus_per_node or None
    per_step = f"cpu:{tasks * cpus_per_task}" if request.tasks is not None and request.gpus_per_node is not None else ""
    return per_step, f"gres:gpu:{gpus}" if gpus is not None else ""
