"""Gang placement with quotas, SPOT preemption and a reservation for a starving FLEX_START gang.

Rules, applied to the waiting jobs in the order given (the caller sorts them oldest first):
- Gang: all replicas of all worker pools of a job get nodes at once, or none do. A replica
  occupies one whole node (a Vertex replica is one VM) whose machine type equals
  ``machineSpec.machineType``, with the requested accelerator type and at least
  ``acceleratorCount`` GPUs; among eligible nodes the smallest (fewest GPUs, then lowest id) is
  taken first. A gang that does not fit consumes nothing; a job that does not fit does not
  block smaller jobs behind it (except for a reservation, below).
- Location: a gang only gets nodes of its own location (and preempts only SPOT jobs there), when
  the nodes carry one (``FreeNode.location``; callers that leave every location empty plan one
  location).
- Quota: a job is admitted only if the project's usage plus its request stays within every quota
  limit it touches (see scheduling.quota); admitted jobs are charged immediately.
- Quota hold: a job short of quota that has waited past the threshold (``holds_quota``; never one
  asking for more than a limit outright) holds each metric it needs that no older job holds, and
  younger jobs of its project and location that need a held metric wait. Without it a job asking
  for most of a quota starves while a stream of small jobs keeps taking each GPU that frees up
  (measured: bench ``admission``, Kueue's load, where no 20-GPU job of a 20-GPU quota started in 15
  minutes). Kueue's StrictFIFO queues behave so from the start; Slurm's backfill likewise never
  lets a lower-priority job delay the top one's expected start.
- SPOT: SPOT jobs only use idle nodes. A STANDARD or FLEX_START job that does not fit on idle
  nodes may preempt running SPOT jobs, taken in the order given (the caller passes the newest
  first, so the least work is lost), stopping as soon as the gang fits; if even every SPOT job
  would not make room, nobody is preempted.
- Reservation: requests flagged ``reserve`` (FLEX_START gangs that have waited past the
  threshold) are candidates; per location, the first candidate the location's usable
  ``inventory`` (every node the pass may use, idle or busy: up, alive, not dedicated) could hold
  at once is the reserving gang. If it does not fit now it holds the eligible idle nodes it can
  get, so a stream of smaller jobs cannot starve it (Slurm's backfill likewise reserves nodes for
  the top pending job), and it starts once the rest frees up. Every later job short of a node kind
  the gang holds records that it waits behind the reservation (``held_against``).
  A candidate the usable inventory cannot hold (nodes removed, drained or DOWN since it was
  accepted) holds nothing (``unreservable``): holding idle nodes for a gang that cannot start
  would only starve jobs that can. It keeps waiting, as a Dynamic Workload Scheduler request
  waits for capacity until its maxWaitDuration, since drained or DOWN nodes may return; the
  reason says what it lacks.

Pure Python, no Django: a pass takes a snapshot and returns decisions, so it is tested and
benchmarked without a database.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import Hashable, Iterable, Sequence

from trainhub.catalog.machines import NO_ACCELERATOR
from trainhub.jobs.spec import PoolRequest, ReplicaShape
from trainhub.scheduling.quota import QuotaBook, QuotaShortfall


@dataclass(frozen=True, order=True)
class FreeNode:
    gpu_count: int
    node_id: int
    machine_type: str = field(compare=False)
    accelerator_type: str = field(compare=False)
    location: str = field(default="", compare=False)


@dataclass(frozen=True, slots=True)
class GangRequest:
    key: Hashable
    #: The job's worker pools; every replica of every pool needs a node. Requests of jobs asking
    #: for the same pools may share one tuple (the pass then works out their demand once).
    pools: tuple[PoolRequest, ...]
    can_preempt: bool = False
    reserve: bool = False
    project: Hashable = None
    location: str = ""
    quota_demand: tuple[tuple[str, int], ...] = ()
    #: Waited past the quota-hold threshold: short of quota, it holds what it needs (see above).
    holds_quota: bool = False

    @classmethod
    def from_pools(cls, key: Hashable, pools: Iterable[tuple[int, int, ReplicaShape]], **options) -> "GangRequest":
        """Build from (pool index, replica count, shape) triples."""
        return cls(key, tuple(PoolRequest(index, count, shape) for index, count, shape in pools), **options)

    @property
    def replicas(self) -> tuple[tuple[int, int, ReplicaShape], ...]:
        """(pool index, replica index, shape) for every replica of every pool."""
        return tuple((pool.index, replica_index, pool.shape)
                     for pool in self.pools for replica_index in range(pool.replica_count))


@dataclass(frozen=True)
class Victim:
    """A running SPOT job and the nodes it holds."""

    key: Hashable
    nodes: tuple[FreeNode, ...]


@dataclass(frozen=True)
class Shortfall:
    shape: ReplicaShape
    needed: int
    free: int

    @property
    def missing(self) -> int:
        return self.needed - self.free

    def describe(self, counted: str = "free") -> str:
        """``counted``: what the available nodes are ("free" now; "usable" of the inventory)."""
        gpus = (f" with {self.shape.accelerator_count} x {self.shape.accelerator_type}"
                if self.shape.accelerator_count else "")
        return (f"{self.missing} more {self.shape.machine_type} node(s){gpus}: "
                f"needs {self.needed}, {self.free} {counted}")


@dataclass
class PassPlan:
    #: job key -> {(pool index, replica index): node id}
    placements: dict[Hashable, dict[tuple[int, int], int]] = field(default_factory=dict)
    #: job key -> the capacity it lacked when its turn came
    shortfalls: dict[Hashable, list[Shortfall]] = field(default_factory=dict)
    #: job key -> the quotas it would exceed
    quota_shortfalls: dict[Hashable, list[QuotaShortfall]] = field(default_factory=dict)
    #: preempting job key -> SPOT job keys to stop for it
    preemptions: dict[Hashable, list[Hashable]] = field(default_factory=dict)
    #: job key -> the idle nodes held for it (at most one reserving gang per location)
    reservations: dict[Hashable, list[FreeNode]] = field(default_factory=dict)
    #: job key -> the reserving gang whose held nodes are of a kind the job lacks
    held_against: dict[Hashable, Hashable] = field(default_factory=dict)
    #: reserve candidate key -> what the location's usable inventory lacks to ever hold it
    unreservable: dict[Hashable, Shortfall] = field(default_factory=dict)
    #: job key -> the quota metrics it holds (short of quota after the threshold)
    quota_holds: dict[Hashable, list[str]] = field(default_factory=dict)
    #: job key -> the older job holding a quota metric it needs
    quota_held_against: dict[Hashable, Hashable] = field(default_factory=dict)


def _at_least(group: list[FreeNode], gpus: int) -> int:
    return bisect.bisect_left(group, (gpus,), key=lambda n: (n.gpu_count,))


class CapacityIndex:
    """Free nodes grouped by (machine type, accelerator type), each group sorted by GPU count."""

    def __init__(self, nodes: Iterable[FreeNode] = ()):
        self._groups: dict[tuple[str, str], list[FreeNode]] = {}
        self.add(nodes)

    def add(self, nodes: Iterable[FreeNode]) -> None:
        for node in nodes:
            bisect.insort(self._groups.setdefault((node.machine_type, node.accelerator_type), []), node)

    def remove(self, nodes: Iterable[FreeNode]) -> None:
        for node in nodes:
            group = self._groups[(node.machine_type, node.accelerator_type)]
            del group[bisect.bisect_left(group, node)]

    def _candidate_groups(self, shape: ReplicaShape) -> list[list[FreeNode]]:
        if shape.accelerator_count:
            group = self._groups.get((shape.machine_type, shape.accelerator_type))
            return [group] if group else []
        # CPU-only replicas may use a node with attached GPUs, but nodes without GPUs come first.
        groups = [g for (machine, _), g in self._groups.items() if machine == shape.machine_type and g]
        groups.sort(key=lambda g: (g[0].accelerator_type != NO_ACCELERATOR, g[0].gpu_count))
        return groups

    def _grab(self, shape: ReplicaShape, count: int) -> list[FreeNode]:
        chosen: list[FreeNode] = []
        for group in self._candidate_groups(shape):
            if len(chosen) == count:
                break
            start = _at_least(group, shape.accelerator_count)
            grab = group[start:start + count - len(chosen)]
            del group[start:start + len(grab)]
            chosen.extend(grab)
        return chosen

    def shortfall(self, demand: Sequence[tuple[ReplicaShape, int]]) -> Shortfall | None:
        """What ``take`` would report as missing, without taking anything: the first shape that
        runs out, counting the nodes left for it after the gang's earlier shapes were served.

        Counting is enough because earlier shapes ask for at least as many GPUs (see _demand):
        every node they take is also eligible for the later ones.
        """
        taken: dict[int, int] = {}  # by id() of a group
        for shape, count in demand:
            found = 0
            for group in self._candidate_groups(shape):
                left = len(group) - _at_least(group, shape.accelerator_count) - taken.get(id(group), 0)
                grab = min(left, count - found)
                taken[id(group)] = taken.get(id(group), 0) + grab
                found += grab
                if found == count:
                    break
            if found < count:
                return Shortfall(shape, count, found)
        return None

    def take(self, demand: Sequence[tuple[ReplicaShape, int]]) -> list[list[FreeNode]] | Shortfall:
        """Take ``count`` nodes for each (shape, count), all or nothing (the Shortfall if not)."""
        missing = self.shortfall(demand)
        if missing is not None:
            return missing
        return [self._grab(shape, count) for shape, count in demand]

    def hold(self, demand: Sequence[tuple[ReplicaShape, int]]) -> list[FreeNode]:
        """Take as many eligible nodes as there are, up to the demand (a reservation)."""
        return [node for shape, count in demand for node in self._grab(shape, count)]


def serves(node: FreeNode, shape: ReplicaShape) -> bool:
    """Whether a replica of ``shape`` may take ``node`` (see CapacityIndex._candidate_groups)."""
    return (node.machine_type == shape.machine_type and node.gpu_count >= shape.accelerator_count
            and (not shape.accelerator_count or node.accelerator_type == shape.accelerator_type))


def gang_demand(pools: tuple[PoolRequest, ...]) -> list[tuple[ReplicaShape, int]]:
    """A gang's nodes by shape, the most demanding shape first (what CapacityIndex.take expects)."""
    counts: dict[ReplicaShape, int] = {}
    for pool in pools:
        counts[pool.shape] = counts.get(pool.shape, 0) + pool.replica_count
    # The most demanding shapes choose first so a small request cannot take the only big node.
    return sorted(counts.items(), key=lambda item: (-item[0].accelerator_count, item[0].machine_type))


_demand = gang_demand


def _relevant(victim: Victim, demand: Sequence[tuple[ReplicaShape, int]], location: str | None) -> bool:
    machines = {shape.machine_type for shape, _ in demand}
    return any(node.machine_type in machines and (location is None or node.location == location)
               for node in victim.nodes)


def _take_with_preemption(index: CapacityIndex, demand, victims: list[Victim], location: str | None):
    """Add SPOT victims' nodes (in ``location``, None: anywhere) one by one until the gang fits;
    undo everything if it never does."""
    added: list[Victim] = []
    for victim in victims:
        if not _relevant(victim, demand, location):
            continue
        index.add(victim.nodes)
        added.append(victim)
        chosen = index.take(demand)
        if not isinstance(chosen, Shortfall):
            return chosen, added
    for victim in added:
        index.remove(victim.nodes)
    return None, []


def _assign(request: GangRequest, demand, chosen: list[list[FreeNode]]) -> dict[tuple[int, int], int]:
    by_shape = {shape: iter(nodes) for (shape, _), nodes in zip(demand, chosen)}
    return {(pool_index, replica_index): next(by_shape[shape]).node_id
            for pool_index, replica_index, shape in request.replicas}


class _Reservations:
    """The reservation step of a pass: which candidate reserves in each location, and who waits
    behind the nodes it holds. The usable inventory is indexed only when a candidate appears."""

    def __init__(self, inventory: Iterable[FreeNode] | None, located: bool):
        self._inventory = inventory
        self._located = located
        self._indexes: dict[str | None, CapacityIndex] | None = None
        #: location -> (reserving key, held nodes); a location is claimed once its gang is chosen
        self.claimed: dict[str | None, tuple[Hashable, list[FreeNode]]] = {}

    def _inventory_shortfall(self, location: str | None, demand) -> Shortfall | None:
        if self._inventory is None:
            return None
        if self._indexes is None:
            self._indexes = {}
            for node in self._inventory:
                self._indexes.setdefault(node.location if self._located else None, CapacityIndex()).add((node,))
        return self._indexes.get(location, CapacityIndex()).shortfall(demand)

    def choose(self, plan: PassPlan, request: GangRequest, location: str | None, demand) -> bool:
        """Whether ``request`` is its location's reserving gang (recording why not, if it cannot be)."""
        if not request.reserve or location in self.claimed:
            return False
        beyond = self._inventory_shortfall(location, demand)
        if beyond is not None:
            plan.unreservable[request.key] = beyond
            return False
        self.claimed[location] = (request.key, [])
        return True

    def note_short(self, plan: PassPlan, key: Hashable, location: str | None, shortfall: Shortfall) -> None:
        claim = self.claimed.get(location)
        if claim is not None and claim[0] != key and any(serves(node, shortfall.shape) for node in claim[1]):
            plan.held_against[key] = claim[0]


def plan_pass(requests: Sequence[GangRequest], free_nodes: Iterable[FreeNode], *,
              victims: Sequence[Victim] = (), quotas: QuotaBook | None = None,
              inventory: Iterable[FreeNode] | None = None) -> PassPlan:
    """Decide one pass; see the module docstring for the rules. ``inventory``: every usable node,
    idle or busy (None: reservations are not checked against it)."""
    free_nodes = list(free_nodes)
    located = any(node.location for node in free_nodes) or any(n.location for v in victims for n in v.nodes)
    indexes: dict[str | None, CapacityIndex] = {}
    for node in free_nodes:
        indexes.setdefault(node.location if located else None, CapacityIndex()).add((node,))
    remaining_victims = list(victims)
    plan = PassPlan()
    reservations = _Reservations(inventory, located)
    demands: dict[int, list[tuple[ReplicaShape, int]]] = {}  # by id() of a pools tuple requests share
    for request in requests:
        demand = demands.get(id(request.pools))
        if demand is None:
            demand = demands[id(request.pools)] = _demand(request.pools)
        quota_demand = dict(request.quota_demand)
        location = request.location if located else None
        index = indexes.setdefault(location, CapacityIndex())
        reserving = reservations.choose(plan, request, location, demand)
        if quotas is not None:
            holder = quotas.holder_against(request.project, request.location, quota_demand)
            if holder is not None:
                plan.quota_held_against[request.key] = holder
                continue
            blocked = quotas.shortfalls(request.project, request.location, quota_demand)
            if blocked:
                plan.quota_shortfalls[request.key] = blocked
                if request.holds_quota and not any(short.exceeds_limit_outright for short in blocked):
                    plan.quota_holds[request.key] = quotas.hold(request.key, request.project, request.location,
                                                                quota_demand)
                probe = index.shortfall(demand)  # report capacity too: every blocking reason, not one
                if probe is not None:
                    plan.shortfalls[request.key] = [probe]
                    reservations.note_short(plan, request.key, location, probe)
                continue
        chosen = index.take(demand)
        if isinstance(chosen, Shortfall) and request.can_preempt and remaining_victims:
            shortfall = chosen
            chosen, preempted = _take_with_preemption(index, demand, remaining_victims, location)
            if chosen is None:
                chosen = shortfall
            else:
                plan.preemptions[request.key] = [victim.key for victim in preempted]
                remaining_victims = [v for v in remaining_victims if v not in preempted]
        if isinstance(chosen, Shortfall):
            plan.shortfalls[request.key] = [chosen]
            if reserving:
                held = index.hold(demand)
                plan.reservations[request.key] = held
                reservations.claimed[location] = (request.key, held)
            else:
                reservations.note_short(plan, request.key, location, chosen)
            continue
        if quotas is not None:
            quotas.charge(request.project, request.location, quota_demand)
        plan.placements[request.key] = _assign(request, demand, chosen)
    return plan
