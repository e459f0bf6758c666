"""One Slurm scheduling pass: the main scheduler in priority order, preemption, then backfill with
reservations. Pure: it takes ``now`` and a snapshot and returns decisions; the caller applies them.

Public API (pure Python, no Django)::

    Resources(cpus=0, memory_mb=0, gres={})                  # per node: {"gpu": 4}
    NodeState(name, cpus, memory_mb, gres={}, usable=True, features=frozenset(), gpu_type="", weight=1)  # usable=False: DOWN/DRAIN/...
    RunningJob(job_id, partition, allocation={node: Resources}, start_time, end_time=None, user="",
               account="", qos=None, priority=0, requeue=True, restart_count=0, limit_request=None,
               preempt_time=None)                            # preempt_time: a victim in its GraceTime
    PendingJob(job_id, partition, priority, submit_time, nodes=1, per_node=Resources(), time_limit_minutes=None,
               user="", account="", qos=None, begin_time=None, hold_reason=None, blocked_reason=None,
               no_reserve=False, requeue=True, restart_count=0, limit_request=None, required_nodes=frozenset(),
               excluded_nodes=frozenset(), exclusive=False, constraint=None,   # constraint: features.Constraint
               gpu_type=None, gpus_per_job=0, gpus_per_task=0, max_nodes=0, mem_per_gpu=0, cpus_per_gpu=0,
               spread=None, allocating=False, min_nodes=0)   # spread: TaskSpread (-n without -N); allocating: a new salloc
               # max_nodes: --gpus's node range (from nodes up to it, as many as its GPUs need)
               # min_nodes: -N MIN-MAX's MIN, nodes its MAX (as many as can hold it now, MIN at least)
    cpus_for_gpus(cpus, gpus, cpus_per_gpu) -> int           # a node's CPUs with --cpus-per-gpu
    TaskSpread(tasks, cpus_per_task=1, gpus_per_task=0); TaskSpread.min_nodes(...); .room(free, per_node);
        .take(rooms, min_nodes); .place(rooms by node, min_nodes)
    Snapshot(nodes, partitions={name: (node names)}, partition_options={name: PartitionOptions}, running, pending)
    schedule(snapshot, config, now, *, limits=None, preempt_policy=None, backfill=True, main=True) -> SchedulePlan
        limits: (LimitContext, LimitUsage) -- the usage is updated as jobs start
        backfill: False for a pass between two backfill iterations (backfill_due)
        main: False for a pass within batch_sched_delay of the main scheduler's last run (main_due)
    backfill_due(config, last_backfill, now) -> bool         # every bf_interval seconds
    main_due(config, last_main, now, job_ended=...) -> bool  # batch_sched_delay after the last, or a job's end
    main_due_in(config, last_main, now) -> float             # seconds until batch_sched_delay has passed
    SchedulePlan.starts: list[Start(job_id, nodes, allocation, start_time, end_time, backfilled, time_limit_minutes)]
    SchedulePlan.waiting: {job_id: Waiting(reason, estimated_start, planned_nodes, preempting)}
    SchedulePlan.preemptions: list[PreemptAction]
    node_config_available(per_node, nodes, node_states) -> bool   # else "Requested node configuration is not available"
    queue_order(pending, partition_options, preempt_policy=None) -> list[PendingJob]

Order (slurm:src/slurmctld/job_scheduler.c ``sort_job_queue2``; reference 1.5, 7.1): a job that can
preempt the other first, then partition PriorityTier (higher first), priority (higher first), submit
time (earlier first), job id (fixtures/22.05/order: equal-priority jobs released together start in job
id order, those of the urgent partition first).

Main scheduler (reference 7.1): jobs in that order start where they fit (multi-node jobs get all
their nodes or none). Held jobs, jobs before their BeginTime, jobs with a dependency, jobs of a down
or inactive partition, jobs over partition limits and jobs over association/QOS limits wait with
their reason and do not block others. The first job of a partition that does not fit waits with
``Resources``; its partition's nodes are then withheld from every later job of the pass and later
jobs of that partition wait with ``Priority`` ("once any job ... in a partition is left pending, no
other jobs in that partition will be scheduled"; job_scheduler.c removes the partition's nodes from
the available set). A job whose ``-w`` nodes are as many as it needs withholds only those
nodes and blocks no other job of its partition (job_scheduler.c clears ``fail_by_part`` for it). With preemption on, a job that does not fit first tries to preempt (see
:mod:`trainhub.slurm.preemption`): the victims are signalled, the job keeps waiting with
``Resources`` and the nodes it will use are kept for it; a backfill iteration then expects it to
start now on them (``_preemptor_block``). Victims still in their GraceTime are running jobs like any
other, their end time their GraceTime's end if that comes first (snapshot.running_job): chosen again,
their GraceTime keeps its end (``preempt_time``).

Features (``sbatch -C``; :mod:`trainhub.slurm.features`): a job only gets nodes whose active features
satisfy its constraint (``Constraint.choose``: a matching OR's first alternative that fits, counts).
When too few of those are usable (DOWN, DRAINED) the job waits with
``ReqNodeNotAvail, UnavailableNodes:<those nodes>`` and, like a held job, blocks no other job of its
partition (fixtures/22.05/constraint/squeue-run.txt, squeue-backfill.txt: job 23).

GPU types (``--gres=gpu:v100:2``, ``--gpus=v100:4``): a typed request gets only nodes whose GPUs are of
that type (NodeState.gpu_type), an untyped one any; a partition without such nodes makes the job wait
with BadConstraints, as a constraint no node satisfies (fixtures/22.05/gputype/squeue-released).

Backfill (SchedulerType=sched/backfill; slurm:src/plugins/sched/backfill/backfill.c; reference 7.2):
the pending jobs are walked again in order (at most bf_max_job_test of them, bf_max_job_part per
partition and bf_max_job_user per user). For each, the earliest time its whole time limit fits is
found from the running jobs' end times (start + time limit) and the reservations already made: if
that is now, it starts (``backfilled``); otherwise it reserves whole nodes from
``floor(start)`` to ``floor(start + limit + bf_resolution - 1)`` (times floored to bf_resolution,
``_set_slot_time``), so a lower-priority job starts only where it ends before every reservation on
its nodes: it delays no higher-priority job's reservation. Reservations give ``squeue --start``
estimates; a job found to start beyond bf_window keeps that start without a reservation; none is made
for QOS Flags=NoReserve jobs or jobs below bf_min_prio_reserve. Backfill's plan ends with bf_window: a
reservation reaching the window's end holds its nodes for ever, so a later job that needs them gets no
start at all (``squeue --start`` N/A), where without the reservation it would get one beyond the window
(fixtures/22.05/backfill-window). A pending job without a time limit runs a year and only fits where
nothing is reserved later; a running one ends a year after its start.
"""

from __future__ import annotations

import bisect
import datetime as dt
import functools
import heapq
import math
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from trainhub.slurm.conf import PartitionOptions, SlurmConfig
from trainhub.slurm.features import Constraint
from trainhub.slurm.hostlist import compress
from trainhub.slurm.limits import JobRequest, LimitContext, LimitUsage, limit_reason, max_nodes, partition_limit
from trainhub.slurm.preemption import PreemptAction, PreemptJob, PreemptPolicy, choose_victims, preempt
from trainhub.slurm.tres import billable_tres, memory_tres

#: squeue's reason for the top job of a lower tier while a higher-tier job waits for the same nodes.
NODES_RESERVED = "Nodes required for job are DOWN, DRAINED or reserved for jobs in higher priority partitions"

__all__ = [
    "NODES_RESERVED",
    "NodeState",
    "PendingJob",
    "Resources",
    "RunningJob",
    "SchedulePlan",
    "Snapshot",
    "Start",
    "Waiting",
    "backfill_due",
    "main_due",
    "main_due_in",
    "node_config_available",
    "queue_order",
    "reason_prev_db",
    "schedule",
]

_FOREVER = math.inf
#: The latest start backfill looks for: any time short of never.
_ANY_TIME = sys.float_info.max
#: How long backfill plans a job without a time limit to run (MaxTime=INFINITE): a year, as slurmctld.
_NO_LIMIT = 365 * 24 * 3600.0
#: backfill.c's YEAR_MINUTES: the partition time limit of MaxTime=INFINITE.
YEAR_MINUTES = 365 * 24 * 60


@dataclass(frozen=True)
class Resources:
    cpus: int = 0
    memory_mb: int = 0
    gres: Mapping[str, int] = field(default_factory=dict)

    def fits_in(self, free: Resources) -> bool:
        if self.cpus > free.cpus or self.memory_mb > free.memory_mb:
            return False
        for name, count in self.gres.items():
            if count > free.gres.get(name, 0):
                return False
        return True

    @property
    def key(self) -> tuple[int, int, tuple[tuple[str, int], ...]]:
        return self.cpus, self.memory_mb, tuple(sorted(self.gres.items()))

    def plus(self, other: Resources) -> Resources:
        gres = dict(self.gres)
        for name, count in other.gres.items():
            gres[name] = gres.get(name, 0) + count
        return Resources(self.cpus + other.cpus, self.memory_mb + other.memory_mb, gres)

    def minus(self, other: Resources) -> Resources:
        gres = dict(self.gres)
        for name, count in other.gres.items():
            gres[name] = gres.get(name, 0) - count
        return Resources(self.cpus - other.cpus, self.memory_mb - other.memory_mb, gres)


@dataclass(frozen=True)
class NodeState:
    name: str
    cpus: int
    memory_mb: int
    gres: Mapping[str, int] = field(default_factory=dict)
    usable: bool = True
    #: Its active features (what -C/--constraint matches).
    features: frozenset[str] = frozenset()
    #: The type of its GPUs (Gres=gpu:v100:8; "" untyped): what a typed GPU request matches.
    gpu_type: str = ""
    #: slurm.conf's Weight= (default 1): jobs get the usable nodes of the lowest weight first.
    weight: int = 1

    @property
    def capacity(self) -> Resources:
        return Resources(self.cpus, self.memory_mb, dict(self.gres))


@dataclass(frozen=True)
class RunningJob:
    job_id: int
    partition: str
    allocation: Mapping[str, Resources]
    start_time: dt.datetime
    end_time: dt.datetime | None = None
    user: str = ""
    account: str = ""
    qos: str | None = None
    priority: int = 0
    requeue: bool = True
    restart_count: int = 0
    limit_request: JobRequest | None = None
    #: When a preemption chose it (it runs out its GraceTime); None: never in this run.
    preempt_time: dt.datetime | None = None


@dataclass(frozen=True)
class TaskSpread:
    """``-n`` without ``-N`` (fixtures/22.05/ntasks): slurmctld asks for at least the fewest nodes the
    tasks fit on (``min_nodes``: the CPUs, and GPUs with --gpus-per-task, of the partition's largest
    node) and takes as many more as fragmented free CPUs need (``place``). Its tasks fill the nodes it
    gets, each as many as its free CPUs (and GPUs) hold, leaving one for each node still needed for
    ``min_nodes`` (``take``): ``-n 20`` on idle 16-CPU nodes runs 16,4; ``-n 16 --gpus-per-task=1`` on
    8-GPU nodes 8,8. More nodes than the partition has pend with PartitionConfig (``-n 65``).

    The same rule decides where it fits at all, now, in a backfill plan and once preemption victims
    are gone: a node counts when it holds one task (``room`` >= 1), not when it holds an even share
    (fixtures/22.05/sched: ``-n 24`` planned on gpu1's 8 free CPUs and gpu2's 16, an urgent ``-n 20``
    preempting only what its tasks need)."""

    tasks: int
    cpus_per_task: int = 1
    gpus_per_task: int = 0
    #: --ntasks-per-node (0: not given): the most tasks a node gets, and a node holds none unless it
    #: holds that many (cons_common.c ``_allocate_sc``: ``num_tasks = MIN(num_tasks, ntasks_per_node)``,
    #: a node with fewer is "insufficient resources"; slurmctld's pn_min_cpus = cpus_per_task x it).
    per_node: int = 0
    #: -N with -n: the tasks go on exactly ``min_nodes`` nodes (fixtures/22.05/nsplit: ``-N 2 -n 4`` on
    #: idle nodes runs 3,1, with 2 CPUs free on the first node 2,2), not on as many as they need.
    exact_nodes: bool = False

    @staticmethod
    def min_nodes(tasks: int, *, cpus_per_task: int, gpus_per_task: int, largest_cpus: int, largest_gpus: int,
                  per_node: int = 0) -> int:
        """The fewest nodes: by CPUs, by --gpus-per-task's GPUs, and with --ntasks-per-node its tasks'
        count over it (job_test.c ``_select_nodes``: ``min_nodes = MAX(min_nodes, (num_tasks +
        ntasks_per_node - 1) / ntasks_per_node)``)."""
        by_cpus = -(-tasks * cpus_per_task // max(largest_cpus, 1))
        by_gpus = -(-tasks * gpus_per_task // max(largest_gpus, 1)) if gpus_per_task else 1
        by_tasks = -(-tasks // per_node) if per_node else 1
        return max(by_cpus, by_gpus, by_tasks, 1)

    def one_task(self, per_node: Resources) -> Resources:
        """What a node needs free for one task: its CPUs (and GPUs with --gpus-per-task), --ntasks-per-node's
        tasks' CPUs; a per-node --gres and the memory as the job asks them per node."""
        gres = {"gpu": self.gpus_per_task} if self.gpus_per_task else per_node.gres
        return Resources(self.cpus_per_task * max(self.per_node, 1), per_node.memory_mb, gres)

    def room(self, free: Resources, per_node: Resources) -> int:
        """How many of the tasks a node with ``free`` resources holds (0 when not even one, or fewer
        than --ntasks-per-node), at most --ntasks-per-node."""
        if not self.one_task(per_node).fits_in(free):
            return 0
        room = free.cpus // self.cpus_per_task
        if self.gpus_per_task:
            room = min(room, free.gres.get("gpu", 0) // self.gpus_per_task)
        if self.per_node:
            room = min(room, self.per_node) if room >= self.per_node else 0
        return room

    def take(self, rooms: Sequence[int], min_nodes: int) -> list[int] | None:
        """Tasks per node for nodes taken in order holding ``rooms`` tasks each: every node as many as
        it holds, leaving one for each node still needed for ``min_nodes`` (cons_tres ``_cpus_to_use``:
        ``avail_cpus = MIN(avail_cpus, rem_max_cpus - (rem_nodes - 1))``); None when they do not hold
        every task or a node would get none."""
        return _fill_in_order(self.tasks, rooms, min_nodes)

    def place(self, rooms: Sequence[tuple[str, int]], min_nodes: int,
              weights: Mapping[str, int] | None = None) -> list[str] | None:
        """The nodes cons_tres gives the tasks (job_test.c ``_eval_nodes``), in the order it takes them;
        ``rooms``: every node in node order with the tasks it holds (0: not available to the job).
        Available nodes in a row form a set; until the tasks and ``min_nodes`` are met, the best set is
        taken: one that holds what is left with the fewest tasks, else the largest. In it the smallest
        single node that holds every task left is taken when at most one node is still needed, else
        its nodes from the first, each what it holds (``take``), until enough. fixtures/22.05/spread:
        ``-n 20`` with 2, 12, 5 and 9 CPUs free runs on all four nodes (2, 12, 5, 1); ``-n 5`` with
        10, 0, 3 and 3 free on gpu[3-4] (3, 2), not on gpu1. With node ``weights`` (slurm.conf
        Weight=) the nodes of the lowest weight are evaluated so first, alone, and each next weight's
        only for what they leave (``_eval_nodes`` walks its node_weight_list): fixtures/22.05/weight,
        ``-n 24`` with 7 and 15 CPUs free on the weight-10 gpu2 and gpu4 takes those, then 2 of gpu3's."""
        taken: list[str] = []
        tasks_left, nodes_left = self.tasks, min_nodes
        for weight in sorted(set(weights.values())) if weights else (None,):
            if tasks_left <= 0 and nodes_left <= 0:
                break
            in_group = [(name, room if weights is None or weights.get(name) == weight else 0)
                        for name, room in rooms]
            tasks_left, nodes_left = self._place_in(in_group, tasks_left, nodes_left, taken)
        if self.exact_nodes and len(taken) > min_nodes:
            return None
        return taken if tasks_left <= 0 and nodes_left <= 0 else None

    @staticmethod
    def _place_in(rooms: Sequence[tuple[str, int]], tasks_left: int, nodes_left: int,
                  taken: list[str]) -> tuple[int, int]:
        """place's sets of ``rooms``: adds the nodes taken to ``taken``; returns the tasks and nodes
        still to place."""
        sets: list[list[tuple[str, int]]] = [[]]
        for name, room in rooms:
            if room > 0:
                sets[-1].append((name, room))
            elif sets[-1]:
                sets.append([])
        sets = [one for one in sets if one]
        while sets and (tasks_left > 0 or nodes_left > 0):
            best, best_total, best_sufficient = sets[0], -1, False
            for one in sets:
                total = sum(room for _, room in one)
                sufficient = total >= tasks_left and len(one) >= nodes_left
                if best_total < 0 or (sufficient and (not best_sufficient or total < best_total)) or (
                        not sufficient and total > best_total):
                    best, best_total, best_sufficient = one, total, sufficient
            sets.remove(best)
            if nodes_left <= 1:
                single = [(room, index) for index, (_, room) in enumerate(best) if room >= tasks_left]
                if single:
                    best = [best[min(single)[1]]]
            for name, room in best:
                if tasks_left <= 0 and nodes_left <= 0:
                    break
                taken.append(name)
                tasks_left -= min(room, tasks_left - max(nodes_left - 1, 0))
                nodes_left -= 1
        return tasks_left, nodes_left


def cpus_for_gpus(cpus: int, gpus: int, cpus_per_gpu: int) -> int:
    """A node's CPUs for a job: its tasks' ``cpus``, or --cpus-per-gpu's for each of its ``gpus`` on the
    node where that is more (cons_tres: gres_select_util_job_min_cpus raises the node's CPUs as it
    gives it GPUs; fixtures/22.05/cpus-per-gpu: ``--gpus=2 --cpus-per-gpu=3`` runs on 6 CPUs, ``-N 2
    --gres=gpu:2 --cpus-per-gpu=4`` on 8 each, ``-n 2 --gres=gpu:2 --cpus-per-gpu=3`` on 6, and
    ``--cpus-per-gpu=3`` without a GPU on 1)."""
    return max(cpus, cpus_per_gpu * gpus)


def _gpu_room(job: PendingJob, free: Resources) -> int:
    """The GPUs of --gpus's count a node can take for ``job``: its free ones, at most as many as its
    free CPUs hold --cpus-per-gpu's CPUs for."""
    gpus = free.gres.get("gpu", 0)
    return min(gpus, free.cpus // job.cpus_per_gpu) if job.cpus_per_gpu else gpus


def share_gpus_per_job(count: int, free_gpus: Sequence[int]) -> list[int] | None:
    """--gpus's ``count`` over a job's nodes taken in node order with ``free_gpus`` each: every node as
    many as it has, leaving one for each node after it (gres_select_filter.c ``_get_job_cnt``: ``MIN(avail,
    gres_per_job - total_gres - (rem_node_cnt - 1))``), so the total is the count, not a per-node share
    rounded up (fixtures/22.05/gputype/scontrol-19: ``-N 2 --gpus=3`` is gres/gpu=3, 2 on gpu3 and 1 on
    gpu4); None when the nodes lack the count or a node would get none."""
    return _fill_in_order(count, free_gpus, len(free_gpus))


def _fill_in_order(count: int, rooms: Sequence[int], min_nodes: int) -> list[int] | None:
    """``count`` over nodes taken in order holding ``rooms`` each: every node as many as it holds,
    leaving one for each node still needed for ``min_nodes``; None when they do not hold the count
    or a node would get none (TaskSpread.take's tasks, share_gpus_per_job's GPUs)."""
    counts, left = [], count
    for index, room in enumerate(rooms):
        taken = min(room, left - max(min_nodes - index - 1, 0))
        if taken < 1:
            return None
        counts.append(taken)
        left -= taken
    return counts if left == 0 else None


@dataclass(frozen=True)
class PendingJob:
    """A pending job. ``per_node`` is what each of its ``nodes`` needs (``--gres`` is per node);
    ``hold_reason`` (JobHeldUser/JobHeldAdmin) and ``blocked_reason`` (Dependency, ...) keep it out."""

    job_id: int
    partition: str
    priority: int
    submit_time: dt.datetime
    nodes: int = 1
    per_node: Resources = field(default_factory=Resources)
    time_limit_minutes: int | None = None
    user: str = ""
    account: str = ""
    qos: str | None = None
    begin_time: dt.datetime | None = None
    hold_reason: str | None = None
    blocked_reason: str | None = None
    no_reserve: bool = False
    requeue: bool = True
    restart_count: int = 0
    limit_request: JobRequest | None = None
    #: -w: nodes the job must have among its own; -x: nodes it may not have; --exclusive: whole nodes.
    required_nodes: frozenset[str] = frozenset()
    excluded_nodes: frozenset[str] = frozenset()
    exclusive: bool = False
    #: -C/--constraint: only nodes whose features satisfy it.
    constraint: Constraint | None = None
    #: A typed GPU request (--gres=gpu:v100:2, --gpus=v100:4): only nodes whose GPUs are of that type.
    gpu_type: str | None = None
    #: --gpus's count over all its nodes (share_gpus_per_job; ``per_node`` asks one GPU of each) and
    #: --gpus-per-task's GPUs: with either, nodes with more free GPUs are taken first (_near_gpus).
    gpus_per_job: int = 0
    gpus_per_task: int = 0
    #: With --gpus, the most nodes it may take (-N MIN-MAX's MAX; without -N the partition's): from
    #: ``nodes`` on, as many as its GPUs need (_Pass._add_for_gpus). 0: exactly ``nodes``.
    max_nodes: int = 0
    #: -N MIN-MAX without --gpus: ``nodes`` is MAX (snapshot.node_range_count); where fewer nodes can hold
    #: it now it starts on those, this many at least (_fewer_nodes). 0: exactly ``nodes``.
    min_nodes: int = 0
    #: --mem-per-gpu where memory is a consumable resource: each node's memory is its share of --gpus's
    #: count times it (``per_node`` asks it for one GPU, the fewest a node gets).
    mem_per_gpu: int = 0
    #: --mem-per-cpu where memory is a consumable resource: a node range's memory counted again on the CPUs
    #: it got (_selected_request).
    mem_per_cpu: int = 0
    #: --cpus-per-gpu: each node's CPUs are at least this many for each GPU it gives the job (cpus_for_gpus).
    cpus_per_gpu: int = 0
    #: -n without -N: ``nodes`` is the fewest the tasks fit on and the tasks fill them in order; -N
    #: with -n (TaskSpread.exact_nodes): the tasks fill its ``nodes`` in order.
    spread: TaskSpread | None = None
    #: An allocation request (salloc) this pass sees for the first time: tried at once (see schedule).
    allocating: bool = False


@dataclass(frozen=True)
class Snapshot:
    nodes: Sequence[NodeState]
    partitions: Mapping[str, Sequence[str]]
    partition_options: Mapping[str, PartitionOptions]
    running: Sequence[RunningJob]
    pending: Sequence[PendingJob]


@dataclass(frozen=True)
class Start:
    job_id: int
    nodes: tuple[str, ...]
    allocation: dict[str, Resources]
    start_time: dt.datetime
    end_time: dt.datetime | None
    backfilled: bool = False
    #: The time limit a job without one gets from backfill (YEAR_MINUTES); None: it keeps its own.
    time_limit_minutes: int | None = None


@dataclass(frozen=True)
class Waiting:
    reason: str
    estimated_start: dt.datetime | None = None
    planned_nodes: tuple[str, ...] = ()
    preempting: tuple[int, ...] = ()


@dataclass
class SchedulePlan:
    starts: list[Start] = field(default_factory=list)
    waiting: dict[int, Waiting] = field(default_factory=dict)
    preemptions: list[PreemptAction] = field(default_factory=list)


# --- ordering -----------------------------------------------------------------------------------

def _as_preemptor(job: PendingJob) -> PreemptJob:
    return PreemptJob(job.job_id, job.partition, qos=job.qos, priority=job.priority, requeue=job.requeue,
                      restart_count=job.restart_count)


def queue_order(pending: Iterable[PendingJob], partition_options: Mapping[str, PartitionOptions],
                preempt_policy: PreemptPolicy | None = None) -> list[PendingJob]:
    """Slurm's evaluation order (``sort_job_queue2``)."""
    def tier(job: PendingJob) -> int:
        options = partition_options.get(job.partition)
        return options.priority_tier if options else 1

    def qos_preempts(first: PendingJob, second: PendingJob) -> bool:
        if not (preempt_policy and preempt_policy.config.preempt_type == "preempt/qos" and first.qos and second.qos):
            return False
        qos = preempt_policy.qos.get(first.qos)
        return bool(qos and second.qos in qos.preempt and second.qos != first.qos)

    def compare(first: PendingJob, second: PendingJob) -> int:
        if qos_preempts(first, second):
            return -1
        if qos_preempts(second, first):
            return 1
        first_key = (-tier(first), -first.priority, first.submit_time, first.job_id)
        second_key = (-tier(second), -second.priority, second.submit_time, second.job_id)
        return (first_key > second_key) - (first_key < second_key)

    jobs = list(pending)
    if preempt_policy and preempt_policy.config.preempt_type == "preempt/qos":
        return sorted(jobs, key=functools.cmp_to_key(compare))
    return sorted(jobs, key=lambda job: (-tier(job), -job.priority, job.submit_time, job.job_id))


def node_config_available(per_node: Resources, nodes: int, node_states: Iterable[NodeState]) -> bool:
    """Whether ``nodes`` nodes of the partition could ever hold the job (idle, even if down now)."""
    return sum(1 for node in node_states if per_node.fits_in(node.capacity)) >= nodes


# --- the pass -----------------------------------------------------------------------------------

def _seconds(moment: dt.datetime) -> float:
    return moment.timestamp()


@dataclass
class _Node:
    state: NodeState
    free: Resources
    #: job id -> (end time in seconds, resources it releases then), for the jobs running on the node.
    releases: dict[int, tuple[float, Resources]] = field(default_factory=dict)
    #: whole-node reservations [start, end) in seconds, kept sorted.
    blocks: list[tuple[float, float]] = field(default_factory=list)
    #: request key -> earliest availability; cleared whenever the node's jobs change.
    available: dict[object, float] = field(default_factory=dict)
    #: (earliest, duration) -> start windows; cleared whenever its jobs or reservations change.
    windows: dict[tuple[float, float], list[tuple[float, float]]] = field(default_factory=dict)

    def changed(self) -> None:
        self.available.clear()
        self.windows.clear()

    def reserve(self, start: float, end: float) -> None:
        bisect.insort(self.blocks, (start, end))
        self.windows.clear()

    def free_at(self, moment: float) -> Resources:
        """What is free once the jobs ending by ``moment`` have ended."""
        free = self.free
        for end, released in self.releases.values():
            if end <= moment:
                free = free.plus(released)
        return free

    def available_from(self, need: Resources, key: object, exclusive: bool, now: float) -> float:
        """Earliest time the running jobs leave enough free (the free amount only grows)."""
        cached = self.available.get(key)
        if cached is not None:
            return cached
        if exclusive:
            result = max((end for end, _ in self.releases.values()), default=now)
        elif need.fits_in(self.free):
            result = now
        else:
            result, free = _FOREVER, self.free
            for end, released in sorted(self.releases.values(), key=lambda item: item[0]):
                free = free.plus(released)
                if need.fits_in(free):
                    result = end
                    break
        self.available[key] = result
        return result

    def start_windows(self, earliest: float, duration: float) -> list[tuple[float, float]]:
        """Closed intervals of start times >= earliest whose [start, start+duration) misses every block."""
        if not self.blocks:
            return [(earliest, _FOREVER)]
        cached = self.windows.get((earliest, duration))
        if cached is None:
            cached = self.windows[(earliest, duration)] = self._start_windows(earliest, duration)
        return cached

    def _start_windows(self, earliest: float, duration: float) -> list[tuple[float, float]]:
        windows = []
        cursor = earliest
        # reservations never overlap on a node, so their ends are sorted too: skip the past ones
        first = bisect.bisect_right(self.blocks, (earliest, _FOREVER)) - 1
        for block_start, block_end in self.blocks[max(first, 0):]:
            if block_end <= cursor:
                continue
            if cursor + duration <= block_start:
                windows.append((cursor, block_start - duration))
            cursor = max(cursor, block_end)
        if cursor != _FOREVER:
            windows.append((cursor, _FOREVER))
        return windows


def _has_gpu_type(node: NodeState, job: PendingJob) -> bool:
    """Whether the node's GPUs are of the job's GPU type (any node for an untyped request)."""
    return job.gpu_type is None or node.gpu_type == job.gpu_type


def _near_gpus(job: PendingJob, free: Resources) -> int:
    """How much cons_tres favours a node for a job of --gpus or --gpus-per-task: its free GPUs, at most
    --gpus's count (job_test.c ``can_job_run_on_node`` lowers the node's scheduling weight by
    gres_select_filter_remove_unusable's ``near_gpus``, the free GPUs capped at ``max_node_gres``,
    --gpus-per-node's or else --gpus's count; ``_eval_nodes`` takes the nodes of the lowest weight
    first). 0 for the others: --gres and --gpus-per-node weigh every node that fits alike, a job
    without GPUs has none. fixtures/22.05/gputype/scontrol-19: ``-N 2 --gpus=3`` runs on gpu[3-4] (3
    each), not on gpu2, where 2 are free beside jobs 17 and 18."""
    if not (job.gpus_per_job or job.gpus_per_task):
        return 0
    free_gpus = free.gres.get("gpu", 0)
    return min(free_gpus, job.gpus_per_job) if job.gpus_per_job else free_gpus


def _fewer_nodes(job: PendingJob, holding: int) -> PendingJob:
    """A node range's job (``job.min_nodes``) where at most ``holding`` nodes can hold it: as many nodes,
    MIN at least, instead of MAX. Slurm gives it what is free rather than wait for MAX: job_test.c
    ``_eval_nodes`` starts with ``rem_nodes = MAX(min_nodes, req_nodes)`` and succeeds once it has taken every
    node it can while ``_enough_nodes`` (``rem_nodes + min_nodes - req_nodes``: at least MIN taken) holds
    (fixtures/22.05/node-range: beside gpu1 and gpu2's held CPUs ``-N 1-3`` and ``-N 2-4`` run at once on
    gpu[3-4]; a waiting ``-N 3-4`` starts on gpu[2-4] when gpu2 frees)."""
    if not job.min_nodes or holding >= job.nodes:
        return job
    return replace(job, nodes=max(holding, job.min_nodes))


def _selected_request(job: PendingJob, allocation: Mapping[str, Resources], partition: PartitionOptions | None,
                      max_tres: bool) -> JobRequest | None:
    """The job as limits see it once select chose ``allocation``: a node range's CPUs and nodes are those it
    got, not its request's (MIN nodes, one task's CPUs without -n), and so is its billing, the ``partition``'s
    TRESBillingWeights (PriorityFlags=MAX_TRES: ``max_tres``) over them. slurmctld checks them after the
    node selection (node_scheduler.c select_nodes: acct_policy_job_runnable_post_select with ``tres_req_cnt``'s
    cpu ``total_cpus``, node the selected count and billing weighted anew), and a job over a limit there
    waits with its reason, trying MAX again at every pass (fixtures/22.05/range-limits grp-N1-4: GrpTRES=cpu=3,
    ``-N 1-4`` beside 4 idle nodes waits AssocGrpCpuLimit for ever; max-N1-4: MaxTRESPerJob=cpu=2,
    AssocMaxCpuPerJobLimit; job-records bill-N1-4: GrpTRES=billing=3, AssocGrpBilling, where ``-N 1-3`` runs
    on 3), and so is its memory where the request counts one (CR_*_Memory: --mem-per-gpu x its GPUs,
    --mem-per-cpu x its CPUs, --mem x its nodes; job-records-mem mem-N1-4: GrpTRES=mem=20000, ``-N 1-4
    --mem=8000`` waits AssocGrpMemLimit, ``-N 1-2`` runs on 2, ``--mem=4000`` on 4, ``-N 1-4 -n 2
    --mem-per-cpu=6000`` on 2). The request itself for the other jobs, whose request counts what they get."""
    if not job.min_nodes or job.limit_request is None:
        return job.limit_request
    request = job.limit_request
    got = {"cpu": sum(held.cpus for held in allocation.values()), "node": len(allocation),
           "gres/gpu": sum(held.gres.get("gpu", 0) for held in allocation.values())}
    tres = {**request.tres, "cpu": got["cpu"], "node": got["node"]}
    if "mem" in request.tres:  # job_get_tres_mem on them (snapshot.job_memory_tres: memory is consumable)
        tres["mem"] = memory_tres(mem_per_gpu=job.mem_per_gpu, mem_per_cpu=job.mem_per_cpu,
                                  mem_per_node=job.per_node.memory_mb, gpus=got["gres/gpu"], cpus=got["cpu"],
                                  nodes=got["node"])
    if "billing" in request.tres:
        weights = partition.billing_weights if partition else {}
        tres["billing"] = int(billable_tres(got, weights, max_tres=max_tres))
    return replace(request, nodes=len(allocation), tres=tres)


def _within_node_limits(job: PendingJob, context: LimitContext) -> PendingJob:
    """A node range's MAX (``job.nodes``, or a --gpus job's ``max_nodes``) lowered to what its association
    and QOS node limits allow, MIN at least (node_scheduler.c select_nodes: ``max_nodes = MIN(max_nodes,
    acct_max_nodes)`` from acct_policy_get_max_nodes; a MIN above it waits on the limit's reason). A --gpus
    job whose GPUs need more nodes than that waits with Resources (fixtures/22.05/range-limits mn-gpus6,
    gn-gpus6, qn-gpus6: ``--gpus=6`` beside 2 free GPUs a node under MaxTRESPerJob=node=2, GrpTRES=node=2
    or the QOS's MaxTRESPerJob=node=2)."""
    if not (job.min_nodes or job.max_nodes) or job.limit_request is None:
        return job
    most = max_nodes(context, job.limit_request)
    if most is None:
        return job
    if job.max_nodes:
        return replace(job, max_nodes=max(min(job.max_nodes, most), job.nodes))
    return _fewer_nodes(job, most)


class _Pass:
    def __init__(self, snapshot: Snapshot, config: SlurmConfig, now: dt.datetime,
                 limits: tuple[LimitContext, LimitUsage] | None, preempt_policy: PreemptPolicy | None):
        self.snapshot, self.config, self.now = snapshot, config, now
        self.now_s = _seconds(now)
        self.limits = limits
        self.preempt_policy = preempt_policy if preempt_policy and config.preemption_enabled else None
        self.exclusive = config.select_type == "select/linear"
        self.plan = SchedulePlan()
        self.nodes = {node.name: _Node(node, node.capacity) for node in snapshot.nodes}
        self.node_order = {name: index for index, name in enumerate(self.nodes)}
        self.weights = {node.name: node.weight for node in snapshot.nodes}
        #: (partition, request key) -> [(availability, node name)] ascending; cleared when any node changes
        self.by_availability: dict[tuple[str, object, frozenset[str], Constraint | None, str | None],
                                   list[tuple[float, str]]] = {}
        self.running = {job.job_id: job for job in snapshot.running}
        for job in snapshot.running:
            # a running job without a time limit ends a year after its start (job_mgr.c
            # ``job_end_time_reset``: INFINITE gives ``start_time + YEAR_SECONDS``)
            end = _seconds(job.end_time) if job.end_time else _seconds(job.start_time) + _NO_LIMIT
            self._occupy(job.job_id, job.allocation, self._still_running(end))
        self.partition_nodes = {name: [n for n in names if n in self.nodes and self.nodes[n].state.usable]
                                for name, names in snapshot.partitions.items()}

    def _occupy(self, job_id: int, allocation: Mapping[str, Resources], end: float) -> None:
        for name, resources in allocation.items():
            node = self.nodes.get(name)
            if node is None:
                continue
            node.free = node.free.minus(resources)
            node.releases[job_id] = (end, resources)
            node.changed()
        self.by_availability.clear()

    def _still_running(self, end: float) -> float:
        """When a running job frees its resources: at its ``end``, but after this pass's moment when
        that is over -- a job past its time limit (OverTimeLimit, KillWait) or a preemption victim past
        its GraceTime still holds them until it has ended; nothing may start on them now."""
        return max(end, self.now_s + 1)

    def _whole_nodes(self, job: PendingJob) -> bool:
        return self.exclusive or job.exclusive

    def _fits_by_free(self, job: PendingJob) -> bool:
        """Whether the nodes a job fits on depend on what they have free together, beyond one node's
        need: -n without -N (TaskSpread) and --gpus (share_gpus_per_job), unless it takes whole nodes."""
        return not self._whole_nodes(job) and (job.spread is not None or bool(job.gpus_per_job))

    def _need(self, job: PendingJob, node: _Node) -> Resources:
        """What a node must have free to count for the job: all of it (whole nodes), one task (-n
        without -N: TaskSpread), else the job's per-node request."""
        if self._whole_nodes(job):
            return node.state.capacity
        return job.spread.one_task(job.per_node) if job.spread is not None else job.per_node

    def _candidates(self, job: PendingJob) -> list[str]:
        """The job's partition nodes it may use (not those of its -x; only those its -C matches and
        with GPUs of its GPU type: cons_tres matches a typed GRES request only to GRES of that type)."""
        names = [name for name in self.partition_nodes.get(job.partition, [])
                 if _has_gpu_type(self.nodes[name].state, job)]
        if job.excluded_nodes:
            names = [name for name in names if name not in job.excluded_nodes]
        if job.constraint is not None:
            names = [name for name in names if job.constraint.may_use(self.nodes[name].state.features)]
        return names

    def _choose(self, job: PendingJob, ordered: list[str], free: Mapping[str, Resources] | None = None,
                ) -> list[str] | None:
        """``job.nodes`` of the ``ordered`` candidates (best first): every -w node, then the best others;
        with a constraint, the ones it picks (a matching OR's first alternative that fits, counts).
        A job of -n without -N or of --gpus (``free``: what each candidate has free then, _fits_by_free)
        needs nodes that hold all its tasks and GPUs together: for the tasks those TaskSpread.place takes,
        as many as they are; else the best others if they do, else the others that hold the most tasks or
        free GPUs (in node order)."""
        spread = job.spread if free is not None and not self._whole_nodes(job) else None
        per_job = job.gpus_per_job if free is not None and not self._whole_nodes(job) else 0
        gpus = {name: _gpu_room(job, free[name]) for name in free} if per_job else {}
        most = {name: spread.room(free[name], job.per_node) for name in free} if spread is not None else gpus

        def holds_gpus(picked: list[str]) -> bool:
            in_order = sorted(picked, key=self.node_order.__getitem__)  # --gpus's shares go in node order
            return not per_job or share_gpus_per_job(per_job, [gpus[name] for name in in_order]) is not None

        def holds(picked: list[str]) -> bool:
            tasks_fit = spread is None or spread.take([most[name] for name in picked], job.nodes) is not None
            return tasks_fit and holds_gpus(picked)

        if job.constraint is not None:
            picked = job.constraint.choose([(name, self.nodes[name].state.features) for name in ordered], job.nodes,
                                           job.required_nodes)
            return picked if picked is None or holds(sorted(picked, key=self.node_order.__getitem__)) else None
        if per_job and job.max_nodes > job.nodes:
            return self._add_for_gpus(job, ordered, gpus, (spread, most) if spread is not None else None)
        if spread is not None and not job.required_nodes:
            placed = spread.place([(name, most.get(name, 0)) for name in self.nodes], job.nodes, self.weights)
            if placed is not None and holds_gpus(placed):  # -n with --gpus: they must hold its count too
                return placed
            if not spread.exact_nodes:
                return None
            # -N's nodes where place's sets would need more of them: the best that hold the tasks
        if not job.required_nodes <= set(ordered):
            return None
        chosen = sorted(job.required_nodes, key=self.node_order.__getitem__)
        others = self._around_required(chosen, ordered) if chosen else ordered
        wanted = job.nodes - len(chosen)
        if len(chosen) + len(others) < job.nodes:
            return None
        if spread is None and not per_job:
            return chosen + others[:wanted]
        # the -w nodes take their tasks first, then the others in the order chosen (cons_tres
        # _eval_nodes gives the required nodes their CPUs before any other)
        for picked in (chosen + others[:wanted], chosen + sorted(others, key=lambda name: -most[name])[:wanted]):
            if holds(picked):
                return picked
        return None

    def _add_for_gpus(self, job: PendingJob, ordered: list[str], gpus: Mapping[str, int],
                      tasks: tuple[TaskSpread, Mapping[str, int]] | None) -> list[str] | None:
        """A --gpus job of a node range (``job.max_nodes``; no -N is 1 to the partition's): its -w nodes,
        then the ``ordered`` candidates (more free GPUs first: _near_gpus), one at a time until it has
        ``job.nodes`` and they hold the GPUs (share_gpus_per_job) and the tasks (``tasks``: its spread and
        the tasks each node holds, filled in node order, one at least on each: TaskSpread.take) --
        job_test.c ``_eval_nodes`` takes ``rem_nodes = MIN(min_nodes, req_nodes)`` for a job with GRES per
        job and adds nodes until ``gres_sched_sufficient``. fixtures/22.05/gpus-spread: ``--gpus=12`` runs on gpu[1-2] (8, 4),
        ``--gpus=6`` where each node has 5 free on gpu[1-2] (5, 1), ``-N 1-3 -n 5 --gpus=3`` on gpu1 alone;
        None when ``job.max_nodes`` nodes do not."""
        required = sorted(job.required_nodes, key=self.node_order.__getitem__)
        if not set(required) <= set(ordered):
            return None
        picked: list[str] = []
        for name in required + [name for name in ordered if name not in job.required_nodes]:
            picked.append(name)
            if len(picked) < max(job.nodes, len(required)):
                continue
            in_order = sorted(picked, key=self.node_order.__getitem__)
            if share_gpus_per_job(job.gpus_per_job, [gpus[name] for name in in_order]) is not None and (
                    tasks is None or tasks[0].take([tasks[1][name] for name in in_order], len(in_order)) is not None):
                return picked
            if len(picked) >= job.max_nodes:
                return None
        return None

    def _around_required(self, required: list[str], ordered: list[str]) -> list[str]:
        """The candidates other than the -w nodes, in the order cons_tres adds them (job_test.c
        ``_eval_nodes``): for each node weight in turn, lowest first (slurm.conf Weight=), the run of
        that weight's candidates and the -w nodes, in node order, holding the first -w node, "working
        up then down from the required nodes" -- the nodes after it, then those before it, nearest
        first -- then the other candidates in ``ordered``'s order (fixtures/22.05/ntasks-nodes: ``-n 20
        -w gpu3`` on idle nodes runs on gpu[3-4], ``-N 2 -w gpu4`` on gpu[3-4], not on gpu1;
        fixtures/22.05/weight-required, gpu1 of weight 10 and the others 30: ``-N 2 -w gpu2`` runs on
        gpu[1-2], ``-N 2 -w gpu3`` on gpu[3-4], gpu1 being no neighbour of gpu3 among the weight-10 nodes)."""
        around: list[str] = []
        for weight in sorted({self.weights[name] for name in ordered}):
            members = sorted({name for name in ordered if self.weights[name] == weight} | set(required),
                             key=self.node_order.__getitem__)
            at = members.index(required[0])
            start = end = at
            while start > 0 and self.node_order[members[start - 1]] == self.node_order[members[start]] - 1:
                start -= 1
            while end + 1 < len(members) and self.node_order[members[end + 1]] == self.node_order[members[end]] + 1:
                end += 1
            around += [name for name in members[at + 1:end + 1] + members[start:at][::-1]
                       if name not in required and name not in around]
        return around + [name for name in ordered if name not in around and name not in required]

    def _duration(self, job: PendingJob) -> float:
        return job.time_limit_minutes * 60.0 if job.time_limit_minutes is not None else _NO_LIMIT

    # -- reasons that need no resources --

    def _static_reason(self, job: PendingJob) -> str | None:
        """The reason a job waits for whatever the nodes are doing: a hold, --begin, a dependency, then its
        partition's state before its limits (the main scheduler's run gives a job of a DOWN partition
        PartitionDown whatever its limits), and the node limits before the time limit (limits.partition_limit;
        job_limits_check's order; fixtures/22.05/part-order: on batch of MaxNodes=2 MaxTime=5 and 4 nodes,
        ``-N 3 -t 10`` and ``-N 5 -t 10`` pend with
        PartitionNodeLimit after the first build, ``-t 10`` with PartitionTimeLimit; the batch DOWN, ``-N 3``,
        ``-N 5`` and ``-t 10`` with PartitionDown; fixtures/22.05/part-edge: a count from -n alone is no node
        limit, ``-n 40 -t 10`` pends with PartitionTimeLimit, ``-n 65 -t 10`` with PartitionConfig)."""
        if job.hold_reason:
            return job.hold_reason
        if job.begin_time is not None and job.begin_time > self.now:
            return "BeginTime"
        if job.blocked_reason:
            return job.blocked_reason
        options = self.snapshot.partition_options.get(job.partition)
        if options is None or job.partition not in self.snapshot.partitions:
            return "PartitionConfig"
        if options.state == "DOWN":
            return "PartitionDown"
        if options.state == "INACTIVE":
            return "PartitionInactive"
        members = len(self.snapshot.partitions[job.partition])
        from_tasks = job.spread is not None and not job.spread.exact_nodes
        if from_tasks and job.nodes > members:
            # a count from -n alone is no partition limit (fixtures/22.05/ntasks: -n 65), and its CPUs over the
            # partition's come before the time limit (fixtures/22.05/part-edge: -n 65 -t 10 under MaxTime=5)
            return "PartitionConfig"
        limit = partition_limit(options, nodes=job.nodes, time_limit_minutes=job.time_limit_minutes,
                                partition_nodes=members, from_tasks=from_tasks)
        return limit or self._constraint_reason(job)

    def _constraint_reason(self, job: PendingJob) -> str | None:
        """ReqNodeNotAvail when the partition's usable nodes cannot satisfy the job's constraint or GPU
        type, naming the unusable ones it may use (slurmctld's ESLURM_NODE_NOT_AVAIL); BadConstraints when
        there are none (a held job, accepted without the node test, released: fixtures/22.05/constraint,
        gputype/squeue-released: ``--gres=gpu:tesla:2`` where no node has tesla GPUs)."""
        if job.constraint is None and job.gpu_type is None:
            return None
        members = [self.nodes[name].state for name in self.snapshot.partitions[job.partition]
                   if name in self.nodes and _has_gpu_type(self.nodes[name].state, job)]
        usable = [node for node in members if node.usable]
        if job.constraint is None:
            satisfied = len(usable) >= job.nodes
        else:
            satisfied = bool(job.constraint.choose([(node.name, node.features) for node in usable], job.nodes))
        if satisfied:
            return None
        unusable = [node.name for node in members
                    if not node.usable and (job.constraint is None or job.constraint.may_use(node.features))]
        return f"ReqNodeNotAvail, UnavailableNodes:{compress(unusable)}" if unusable else "BadConstraints"

    def _limit_reason(self, job: PendingJob) -> str | None:
        if self.limits is None or job.limit_request is None:
            return None
        context, usage = self.limits
        return limit_reason(context, usage, job.limit_request)

    # -- allocation now --

    def _allocate_now(self, job: PendingJob, withheld: set[str], freed: Mapping[str, Resources] | None = None,
                      ) -> list[str] | None:
        """The fitting nodes of the lowest weight (slurm.conf Weight=), then best fit: the fewest free
        GPUs, then CPUs, then name (fixtures/22.05/weight: ``-N1 -n 4`` on gpu2 of weight 10, not the
        idle gpu1 of 30; ``-N2`` on gpu[2,4], the two of weight 10); for --gpus and --gpus-per-task
        those with more GPUs it may use first (_near_gpus) within a weight."""
        fitting: list[tuple[int, int, int, int, str]] = []
        #: what each fitting node has free, for a job of -n without -N or of --gpus (_choose); None for the others
        free_now: dict[str, Resources] | None = {} if self._fits_by_free(job) else None
        for name in self._candidates(job):
            if name in withheld:
                continue
            node = self.nodes[name]
            if any(start <= self.now_s < end for start, end in node.blocks):
                continue
            free = node.free.plus(freed[name]) if freed and name in freed else node.free
            if self._whole_nodes(job):
                if free.cpus < node.state.cpus:  # whole nodes only (select/linear, --exclusive)
                    continue
            elif not self._need(job, node).fits_in(free):
                continue
            if node.blocks and self._duration(job) + self.now_s > min(
                    (start for start, _ in node.blocks if start >= self.now_s), default=_FOREVER):
                continue
            fitting.append((node.state.weight, -_near_gpus(job, free), sum(free.gres.values()), free.cpus, name))
            if free_now is not None:
                free_now[name] = free
        return self._choose(_fewer_nodes(job, len(fitting)), [name for *_, name in sorted(fitting)], free_now)

    def _start(self, job: PendingJob, names: list[str], *, backfilled: bool) -> bool:
        """Start the job on ``names``; False where a node range's limits, counted on those nodes, keep it
        waiting instead (_selected_request: its reason is set)."""
        duration = self._duration(job)
        end = self.now_s + duration
        spread = job.spread is not None and not self._whole_nodes(job)
        allocation = self._spread(job, job.spread, names) if spread else {}
        # in node order, whatever order they were chosen in: the first is the batch host (scontrol's
        # BatchHost; fixtures/22.05/ntasks-nodes: -N 2 -w gpu4 on gpu[3-4], BatchHost=gpu3)
        names = sorted(names, key=self.node_order.__getitem__)
        if not spread:
            allocation = {name: self._need(job, self.nodes[name]) for name in names}
        if job.gpus_per_job and self._fits_by_free(job):  # --gpus's count, with or without -n's tasks
            shares = share_gpus_per_job(job.gpus_per_job, [_gpu_room(job, self.nodes[name].free) for name in names])
            assert shares is not None, "_choose picked nodes that hold --gpus's count"
            # --mem-per-gpu gives each node its GPUs' memory (gres_select_util.c ``gres_select_util_job_mem_set``:
            # ``mem_per_gres * gres_cnt`` of the node; fixtures/22.05/gpus-mem scontrol-d-N2-g3: ``-N 2 --gpus=3
            # --mem-per-gpu=1000`` Mem=2000 on gpu1, 1000 on gpu2)
            allocation = {name: Resources(allocation[name].cpus,
                                          share * job.mem_per_gpu if job.mem_per_gpu else allocation[name].memory_mb,
                                          {"gpu": share})
                          for name, share in zip(names, shares)}
        if job.cpus_per_gpu:
            allocation = {name: Resources(cpus_for_gpus(held.cpus, held.gres.get("gpu", 0), job.cpus_per_gpu),
                                          held.memory_mb, held.gres) for name, held in allocation.items()}
        request = _selected_request(job, allocation, self.snapshot.partition_options.get(job.partition),
                                    "MAX_TRES" in self.config.priority_flags)
        if self.limits is not None and request is not None:
            reason = limit_reason(self.limits[0], self.limits[1], request)
            if reason:
                self.plan.waiting[job.job_id] = Waiting(reason)
                return False
        self._occupy(job.job_id, allocation, end)
        # backfill gives a job without a time limit its partition's, a year for MaxTime=INFINITE, and
        # the job keeps it (backfill.c: ``part_time_limit = YEAR_MINUTES``, ``time_limit =
        # part_time_limit``; fixtures/22.05/backfill-nolimit: TimeLimit=365-00:00:00); the main
        # scheduler leaves it UNLIMITED (no end)
        given = YEAR_MINUTES if backfilled and job.time_limit_minutes is None else None
        end_time = None if job.time_limit_minutes is None and given is None else self.now + dt.timedelta(seconds=duration)
        self.plan.starts.append(Start(job.job_id, tuple(names), allocation, self.now, end_time, backfilled, given))
        if self.limits is not None and request is not None:
            self.limits[1].start(request)
        return True

    def _spread(self, job: PendingJob, spread: TaskSpread, names: list[str]) -> dict[str, Resources]:
        """The tasks on ``names`` (in the order _choose took them), one at least on each: their CPUs,
        --ntasks-per-node's on every node however few tasks it runs (fixtures/22.05/ntasks-per-node: ``-n 20
        --ntasks-per-node=8`` gets 8 CPUs on each of 3 nodes, ``-n 4 --ntasks-per-node=16`` 16)."""
        counts = spread.take([spread.room(self.nodes[name].free, job.per_node) for name in names], len(names))
        assert counts is not None, "_choose picked nodes that hold every task"
        return {name: Resources((spread.per_node or count) * spread.cpus_per_task, job.per_node.memory_mb,
                                {"gpu": count * spread.gpus_per_task} if spread.gpus_per_task else job.per_node.gres)
                for name, count in zip(names, counts)}

    # -- preemption --

    def _try_preempt(self, job: PendingJob, withheld: set[str]) -> bool:
        policy = self.preempt_policy
        if policy is None:
            return False
        partition_nodes = set(self.partition_nodes.get(job.partition, [])) - withheld
        running = [r for r in self.running.values() if partition_nodes & set(r.allocation)]
        preemptor = _as_preemptor(job)
        candidates = policy.candidates(preemptor, [
            PreemptJob(r.job_id, r.partition, qos=r.qos, priority=r.priority, start_time=r.start_time,
                       node_count=len(r.allocation), requeue=r.requeue, restart_count=r.restart_count,
                       preempt_time=r.preempt_time)
            for r in running], self.now)
        if not candidates:
            return False

        def freed_by(removed: frozenset[int]) -> dict[str, Resources]:
            freed: dict[str, Resources] = {}
            for job_id in removed:
                for name, resources in self.running[job_id].allocation.items():
                    freed[name] = freed[name].plus(resources) if name in freed else resources
            return freed

        def fits(removed: frozenset[int]) -> bool:
            return self._allocate_now(job, withheld, freed_by(removed)) is not None

        victims = choose_victims(candidates, fits)
        if not victims:
            return False
        names = self._allocate_now(job, withheld, freed_by(frozenset(v.job_id for v in victims)))
        actions = [preempt(policy, victim, self.now) for victim in victims]
        self.plan.preemptions.extend(actions)
        ready = max(action.kill_at for action in actions)
        for victim in victims:  # the victims now free their nodes when they are killed
            for name in self.running.pop(victim.job_id).allocation:
                end, resources = self.nodes[name].releases[victim.job_id]
                self.nodes[name].releases[victim.job_id] = (self._still_running(min(end, _seconds(ready))), resources)
                self.nodes[name].changed()
        self.by_availability.clear()
        for name in names or []:
            self.nodes[name].reserve(*self._preemptor_block(job))
        # no expected start (slurmctld sets none for a preemptor: fixtures/22.05/mail, *-squeue.txt, the
        # urgent job's END_TIME N/A in its victims' GraceTime) until backfill tries it; its nodes are
        # kept for it
        self.plan.waiting[job.job_id] = Waiting("Resources", planned_nodes=tuple(names or ()),
                                                preempting=tuple(v.job_id for v in victims))
        return True

    def _preemptor_block(self, job: PendingJob) -> tuple[float, float]:
        """The time a preemptor keeps its nodes: backfill tries to start it now, as the resources of
        preemptable jobs count free to it, which fails while its victims run out their GraceTime, and
        then reserves them from now for its time limit (backfill.c: "Drop through and reserve these
        resources", ``end_reserve`` floored to bf_resolution; fixtures/22.05/preempt-grace bf-*: u1
        expected at 21:10:45, the backfill iteration's time, p after it at 21:15:00, not 21:16:12
        when u1 would end once v1's GraceTime is over)."""
        return self._slot(self.now_s), self._slot(self.now_s + self._duration(job))

    # -- allocation requests at submission --

    def _top_priority(self, job: PendingJob) -> bool:
        """No other eligible pending job of its partition has a higher priority, nor one of a partition
        of a higher PriorityTier sharing its nodes (job_mgr.c ``_top_priority``: an equal priority
        does not count)."""
        tier, nodes = self._tier(job.partition), set(self.snapshot.partitions.get(job.partition, ()))
        for other in self.snapshot.pending:
            if other.job_id == job.job_id or self._static_reason(other):
                continue
            if other.partition == job.partition:
                if other.priority > job.priority:
                    return False
            elif self._tier(other.partition) > tier and nodes & set(self.snapshot.partitions.get(other.partition, ())):
                return False
        return True

    def allocate_at_submit(self, order: list[PendingJob]) -> list[PendingJob]:
        """salloc's request is tried when slurmctld receives it, not at the next scheduler run:
        ``job_allocate`` selects nodes at once for an allocation (``test_only = will_run || (allocate ==
        0)``; sbatch's jobs wait for the scheduler) when it is independent and ``_top_priority`` -- so
        beside pending jobs of the same priority that cannot start, a salloc that fits starts
        (fixtures/22.05/sched: salloc-14, while sbatch-15 of the same shape pends). It sees the free
        resources only, not backfill's plans. Returns the order without the jobs started."""
        started = set()
        for job in order:
            if not job.allocating or self._static_reason(job) or self._limit_reason(job) or not self._top_priority(job):
                continue
            names = self._allocate_now(job, set())
            if names is not None and self._start(job, names, backfilled=False):
                started.add(job.job_id)
        return [job for job in order if job.job_id not in started] if started else order

    # -- main scheduler --

    def _tier(self, partition: str) -> int:
        options = self.snapshot.partition_options.get(partition)
        return options.priority_tier if options else 1

    def _waiting_reason(self, job: PendingJob, withheld_tier: Mapping[str, int]) -> str:
        """Resources, or, when nodes held back for a waiting job of a higher PriorityTier leave too
        few of the partition's nodes, the text slurmctld gives (ESLURM_NODE_NOT_AVAIL's state_desc;
        fixtures/22.05/scenario/squeue-o-running.txt, job 2); for a job whose -w nodes are held back so,
        ``ReqNodeNotAvail, UnavailableNodes:`` those nodes (fixtures/22.05/preempt-grace: p, -w gpu1,
        while the urgent u1 waits for gpu1)."""
        tier = self._tier(job.partition)
        required = sorted((name for name in job.required_nodes if withheld_tier.get(name, 0) > tier),
                          key=self.node_order.__getitem__)
        if required:
            return f"ReqNodeNotAvail, UnavailableNodes:{compress(required)}"
        free = [name for name in self.snapshot.partitions.get(job.partition, ()) if withheld_tier.get(name, 0) <= tier]
        return NODES_RESERVED if len(free) < (job.min_nodes or job.nodes) else "Resources"

    def _kept_out(self, job: PendingJob) -> bool:
        """Whether the job waits for no resources (held, its --begin, a dependency, partition or
        association/QOS limits): it gets its reason and is left out of the scheduler's queue."""
        reason = self._static_reason(job) or self._limit_reason(job)
        if reason:
            # a job waiting for its --begin (or a requeued job's eligible time) expects to start then
            self.plan.waiting[job.job_id] = Waiting(reason, job.begin_time if reason == "BeginTime" else None)
        return reason is not None

    def queue(self, order: list[PendingJob]) -> list[PendingJob]:
        """The jobs backfill looks at when the main scheduler did not run (build_job_queue's tests)."""
        return [job for job in order if not self._kept_out(job)]

    def main(self, order: list[PendingJob]) -> list[PendingJob]:
        failed_partitions: set[str] = set()
        withheld: set[str] = set()
        #: node -> the highest PriorityTier of a failed partition holding it back
        withheld_tier: dict[str, int] = {}
        remaining: list[PendingJob] = []
        for job in order:
            if self._kept_out(job):
                continue
            if job.partition in failed_partitions:
                self.plan.waiting[job.job_id] = Waiting("Priority")
                remaining.append(job)
                continue
            names = self._allocate_now(job, withheld)
            if names is not None:
                if not self._start(job, names, backfilled=False):  # over its limits there: it blocks nothing
                    remaining.append(job)
                continue
            if not self._try_preempt(job, withheld):
                self.plan.waiting[job.job_id] = Waiting(self._waiting_reason(job, withheld_tier))
            remaining.append(job)
            # a job whose -w nodes are all it needs holds back those nodes only (job_scheduler.c: "Do
            # not schedule more jobs on nodes required by this job, but don't block the entire
            # queue/partition"; fixtures/22.05/sched d-squeue-l: x18, x19 start beside y17)
            held = job.required_nodes if len(job.required_nodes) >= job.nodes else None
            if held is None:
                failed_partitions.add(job.partition)
                held = self.snapshot.partitions.get(job.partition, ())
            withheld.update(held)
            for name in held:
                withheld_tier[name] = max(withheld_tier.get(name, 0), self._tier(job.partition))
        return remaining

    # -- backfill --

    def _slot(self, seconds: float) -> float:
        resolution = self.config.scheduler_parameters.bf_resolution
        return seconds if seconds == _FOREVER else math.floor(seconds / resolution) * resolution

    def _availability(self, job: PendingJob) -> list[tuple[float, str]]:
        """The job's partition nodes by when they could hold one of its node requests."""
        key = "exclusive" if self._whole_nodes(job) else (
            ("task", job.spread.one_task(job.per_node).key) if job.spread is not None else job.per_node.key)
        cache_key = (job.partition, key, job.excluded_nodes, job.constraint, job.gpu_type)
        cached = self.by_availability.get(cache_key)
        if cached is None:
            cached = sorted((self.nodes[name].available_from(self._need(job, self.nodes[name]), key,
                                                             self._whole_nodes(job), self.now_s), name)
                            for name in self._candidates(job))
            self.by_availability[cache_key] = cached
        return cached

    def _earliest(self, job: PendingJob, horizon: float) -> tuple[float, list[str]] | None:
        """The earliest start (not after ``horizon``) at which ``job.nodes`` nodes are free for the
        whole time limit, and those nodes. Nodes are visited in order of availability and their
        start windows (gaps between reservations) swept as events, so a small job looks at few nodes.
        A job of -n without -N (or of --gpus) counts a node from when it holds one task (one GPU) and
        looks again whenever a job ends on an open node, until the open nodes hold all its tasks
        (TaskSpread; its GPUs: share_gpus_per_job). Such a job is tried once every node open at a moment
        is, and for --gpus and --gpus-per-task those with more free GPUs then are taken first, as the
        main scheduler does (_near_gpus; select's will-run test weighs nodes as its run test:
        fixtures/22.05/gpus-backfill, -N 2 --gpus=4 planned on gpu[2,4] with 8 free GPUs each, not on
        gpu[1-2] with 1 and 8). A node range is planned once MIN nodes are open, on every node open then
        (_fewer_nodes: select's will-run test is its run test with the running jobs' ends)."""
        duration = self._duration(job)
        by_free = self._fits_by_free(job)
        ordered = self._availability(job)
        events: list[tuple[float, int, str]] = []
        open_nodes: dict[str, float] = {}
        index = 0
        while True:
            next_available = ordered[index][0] if index < len(ordered) else _FOREVER
            if next_available <= horizon and (not events or next_available <= events[0][0]):
                name = ordered[index][1]
                index += 1
                for first, last in self.nodes[name].start_windows(next_available, duration):
                    heapq.heappush(events, (first, 0, name))
                    heapq.heappush(events, (last, 1, name))
                    if by_free:  # its room grows as its jobs end
                        for end, _ in self.nodes[name].releases.values():
                            if first < end <= last:
                                heapq.heappush(events, (end, 0, name))
                continue
            if not events or events[0][0] > horizon:
                return None
            moment, kind, name = heapq.heappop(events)
            if kind == 1:
                open_nodes.pop(name, None)
                continue
            open_nodes.setdefault(name, moment)
            opening = (events and events[0][:2] == (moment, 0)) or (index < len(ordered) and ordered[index][0] <= moment)
            if opening and (by_free or job.min_nodes):
                # every node open at this moment counts before the best are chosen (_near_gpus), or
                # before a node range takes as many as are open (_fewer_nodes)
                continue
            if len(open_nodes) >= (job.min_nodes or job.nodes):
                free = {n: self.nodes[n].free_at(moment) for n in open_nodes} if by_free else None
                # as the main scheduler, nodes with more free GPUs first for --gpus and --gpus-per-task
                # (_near_gpus: select's will-run test weighs the nodes as its run test does)
                chosen = self._choose(_fewer_nodes(job, len(open_nodes)), sorted(open_nodes, key=lambda n: (
                    open_nodes[n], self.weights[n], -_near_gpus(job, free[n]) if free else 0, n)), free)
                if chosen is not None:
                    return moment, chosen

    def backfill(self, remaining: list[PendingJob]) -> None:
        params = self.config.scheduler_parameters
        window_end = self.now_s + params.bf_window_minutes * 60
        tested = started = 0
        per_partition: dict[str, int] = {}
        per_user: dict[str, int] = {}
        for job in remaining:
            preempting = self.plan.waiting.get(job.job_id)
            if preempting and preempting.preempting:  # tried now, its nodes reserved (_preemptor_block)
                self.plan.waiting[job.job_id] = Waiting(preempting.reason, self.now, preempting.planned_nodes,
                                                        preempting.preempting)
                continue
            if tested >= params.bf_max_job_test:
                break
            if params.bf_max_job_part and per_partition.get(job.partition, 0) >= params.bf_max_job_part:
                continue
            if params.bf_max_job_user and per_user.get(job.user, 0) >= params.bf_max_job_user:
                continue
            tested += 1
            per_partition[job.partition] = per_partition.get(job.partition, 0) + 1
            per_user[job.user] = per_user.get(job.user, 0) + 1
            reason = self._limit_reason(job)
            if reason:
                self.plan.waiting[job.job_id] = Waiting(reason)
                continue
            reserves = not job.no_reserve and job.priority >= params.bf_min_prio_reserve
            found = self._earliest(job, _ANY_TIME if reserves else self.now_s)
            if found is None:
                continue
            moment, names = found
            if moment <= self.now_s:
                if params.bf_max_job_start and started >= params.bf_max_job_start:
                    continue
                names = self._allocate_now(job, set()) or names
                if self._start(job, names, backfilled=True):
                    self.plan.waiting.pop(job.job_id, None)
                    started += 1
                continue
            current = self.plan.waiting.get(job.job_id, Waiting("Priority"))
            if moment > window_end:
                # "Starts too far in the future to worry about": the start is kept, nothing reserved
                # (backfill.c; fixtures/22.05/order a-squeue-start: job 9 a year on, SCHEDNODES (null))
                estimate = dt.datetime.fromtimestamp(self._will_run_start(job, moment), self.now.tzinfo)
                self.plan.waiting[job.job_id] = Waiting(current.reason, estimate)
                continue
            start = self._slot(moment)
            end = self._slot(moment + self._duration(job))
            if end >= self._slot(window_end):
                # backfill's node-space map ends at bf_window's end (node_space[0].end_time = window_end;
                # _add_reservation adds no record after it): these nodes stay reserved for every later
                # job of the iteration, which finds no start on them within the window and keeps none
                # (fixtures/22.05/node-range planned-N3-4: N/A behind plan-N2-4 without a time limit)
                end = _FOREVER
            for name in names:
                self.nodes[name].reserve(start, end)
            # in node order (SchedNodeList is a node bitmap), whatever order they were chosen in
            self.plan.waiting[job.job_id] = Waiting(current.reason, dt.datetime.fromtimestamp(moment, self.now.tzinfo),
                                                    tuple(sorted(names, key=self.node_order.__getitem__)))

    def _will_run_start(self, job: PendingJob, moment: float) -> float:
        """The start select's will-run test gives a job that first fits at ``moment`` (cons_common
        job_test.c ``_will_run_test``): it ends the running jobs on the job's nodes in batches, the
        first up to 30 s past the first end rounded up to 30 s, each later one with the window doubled,
        and answers the end of the last job of the batch after which the job fits (fixtures/22.05/order
        a-squeue-start: job 9 at 11:50:24 a year on, when jobs 5-8 end, not at 11:50:21 with 1-4)."""
        ends = sorted(end for name in self._candidates(job) for end, _ in self.nodes[name].releases.values())
        if not ends:
            return moment
        barrier, window = ends[0] + 30 - ends[0] % 30, 30
        while barrier + window < moment:
            window *= 2
        return max(end for end in ends if end <= max(barrier + window, moment))


def backfill_due(config: SlurmConfig, last_backfill: dt.datetime | None, now: dt.datetime) -> bool:
    """Whether this pass runs the backfill scheduler: with SchedulerType=sched/backfill, once every
    ``bf_interval`` seconds (slurm.conf.5: "The number of seconds between backfill iterations",
    default 30; -1 disables backfill), not at every main-scheduler pass. Between iterations a
    pending job keeps the ``--start`` estimate of the last one."""
    interval = config.scheduler_parameters.bf_interval
    if config.scheduler_type != "sched/backfill" or interval == -1:
        return False
    return last_backfill is None or (now - last_backfill).total_seconds() >= interval


def main_due(config: SlurmConfig, last_main: dt.datetime | None, now: dt.datetime, *, job_ended: bool) -> bool:
    """Whether this pass runs the main scheduler. slurmctld runs it for a submission (or any other
    ``queue_job_scheduler`` request) from its background loop only once ``batch_sched_delay`` seconds
    (default 3) have passed since that loop last ran it, but at once when a job's epilog completes
    (``_slurm_rpc_epilog_complete`` calls ``schedule()``; slurm-22.05 controller.c, proc_req.c). So
    jobs submitted just after a main run wait for it, or for a backfill iteration that comes first
    (fixtures/22.05/ntasks: job 1, submitted a second before, started by the main scheduler at
    05:10:48, jobs 2 and 3 by backfill in that second, the others looked at by the main scheduler
    at 05:10:51: scontrol's Scheduler= and LastSchedEval=). ``job_ended``: a job ended since ``last_main``."""
    return job_ended or main_due_in(config, last_main, now) <= 0


#: Reasons build_job_queue does not keep in state_reason_prev_db (WAIT_NO_REASON, WAIT_PRIORITY, WAIT_RESOURCES).
_NOT_KEPT_FOR_ACCOUNTING = frozenset({"None", "Priority", "Resources"})


def reason_prev_db(*, reason: str, prev_db: str) -> str:
    """A pending job's state_reason_prev_db after a queue build (a main-scheduler run or a backfill
    iteration) finds it pending with ``reason``, the reason the previous build or its submission left
    it: slurm:src/slurmctld/job_scheduler.c build_job_queue, at the start of the build, keeps a reason
    other than None, Priority and Resources; the job's records carry it to slurmdbd, whose sacct shows
    it as Reason (fixtures/22.05/acct-reason: Dependency, JobHeldUser, BeginTime, AssocGrpCpuLimit for
    jobs that waited on them and ran; None for Resources and Priority)."""
    return prev_db if reason in _NOT_KEPT_FOR_ACCOUNTING else reason


def main_due_in(config: SlurmConfig, last_main: dt.datetime | None, now: dt.datetime) -> float:
    """Seconds until ``batch_sched_delay`` has passed since the main scheduler's last run (0 or less:
    it has; never run: 0)."""
    if last_main is None:
        return 0.0
    return config.scheduler_parameters.batch_sched_delay - (now - last_main).total_seconds()


def schedule(snapshot: Snapshot, config: SlurmConfig, now: dt.datetime, *,
             limits: tuple[LimitContext, LimitUsage] | None = None,
             preempt_policy: PreemptPolicy | None = None, backfill: bool = True, main: bool = True) -> SchedulePlan:
    """One scheduling pass at ``now`` (see the module doc): new allocation requests first
    (``_Pass.allocate_at_submit``), then the main scheduler where ``main`` (see :func:`main_due`);
    ``backfill`` (see :func:`backfill_due`) runs the backfill scheduler after it, where the
    configuration has it. Without either, the pending jobs keep their reasons."""
    run = _Pass(snapshot, config, now, limits, preempt_policy)
    pending = [_within_node_limits(job, limits[0]) for job in snapshot.pending] if limits else snapshot.pending
    order = run.allocate_at_submit(queue_order(pending, snapshot.partition_options, run.preempt_policy))
    remaining = run.main(order) if main else run.queue(order)
    if backfill and backfill_due(config, None, now):
        run.backfill(remaining)
    return run.plan
