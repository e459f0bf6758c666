"""priority/multifactor: a job's priority and the per-factor breakdown that sprio prints.

Public API (pure Python, no Django)::

    PriorityJob                 # what the formula reads of one job (see fields)
    PriorityContext.build(config=SlurmConfig, cluster_nodes=, cluster_cpus=, partitions={name: PartitionFacts},
                          qos_priorities={name: int}, max_assoc_priority=int, max_partition_factor=None)
    PartitionFacts(priority_job_factor=1, tres_totals={...}, max_time_minutes=None)
    compute_priority(job, context, now) -> PriorityBreakdown
    compute_priorities(jobs, context, now) -> list[PriorityBreakdown]
    PriorityBreakdown           # .priority (int), .factors {"age","assoc","fairshare","jobsize","partition","qos"}
                                #   -> Factor(factor, weight, weighted) (also .values/.weights tuples in that
                                #   order), .tres {name: Factor}, .site, .nice, .admin_set, .tres_weighted (sum);
                                #   .sprio_priority (what sprio's PRIORITY shows)
    FACTOR_NAMES                # the six weighted factors in sprio's column order
    PRIORITY_MAX = 4294967295

The formula (priority_multifactor.shtml; slurm:src/plugins/priority/multifactor/priority_multifactor.c
``_get_priority_internal``/``set_priority_factors``; reference section 1)::

    priority = site
             + PriorityWeightAge * age + PriorityWeightAssoc * assoc + PriorityWeightFairshare * fairshare
             + PriorityWeightJobSize * jobsize + PriorityWeightPartition * partition + PriorityWeightQOS * qos
             + sum(PriorityWeightTRES[t] * tres_factor[t]) - nice

every product a double; the sum is raised to 1 if below 1 ("0 is reserved for held jobs"), capped
at 4294967295 and **truncated** to an integer (``(uint32_t)priority``), never rounded.

Factors:
- Age = min(1, (now - accrue) / PriorityMaxAge), whole seconds. ``accrue`` is the job's eligible
  time (``PriorityJob.eligible_time``: when it was last released/its begin time passed; None while
  held, dependent or not yet begun) or, with PriorityFlags=ACCRUE_ALWAYS, its submit time. Accrue
  limits (MaxJobsAccrue...) are not modelled.
- Assoc = association Priority / the highest association Priority (raw with NO_NORMAL_ASSOC).
- Fairshare = the association's factor from :mod:`trainhub.slurm.fairshare`.
- JobSize: favour-large ``(min_nodes/nodes + cpus/cluster_cpus) / 2``; PriorityFavorSmall
  ``((nodes-min_nodes)/nodes + (cluster_cpus-cpus)/cluster_cpus) / 2``; SMALL_RELATIVE_TO_TIME
  ``max(min_nodes*cluster_cpus/nodes, cpus) / time_limit_minutes / cluster_cpus`` (1 - that when
  favouring small); clamped to [0, 1]. Node and CPU counts are the whole cluster's, not the partition's.
- Partition = PriorityJobFactor / the highest PriorityJobFactor of all partitions (raw with NO_NORMAL_PART).
  PriorityTier is not in the formula (it orders scheduling and drives preemption).
- QOS = QOS Priority / the highest QOS Priority (raw with NO_NORMAL_QOS).
- TRES[t] = the job's count of t / its partition's total of t (raw with NO_NORMAL_TRES), weighted by
  PriorityWeightTRES[t] (weights may be negative).
- site and nice are added/subtracted unweighted; an admin-set priority (``scontrol update priority=``)
  replaces everything and zeroes the factors; a held job's priority is 0.
- PriorityFlags=INCR_ONLY keeps the previous priority when the new one is lower.
- PriorityType=priority/basic: FIFO; the priority is the job's ``basic_priority`` less its nice and no
  factors apply (fixtures/22.05/prio-basic: ``--nice=100`` shows 100 less), at least 1
  (slurm:src/plugins/priority/basic/priority_basic.c ``priority_p_set``: ``if (new_prio < 1) new_prio
  = 1``): a job that took no FIFO value (``basic_priority`` 0: queued under another PriorityType) or
  whose nice is larger than its value is last, not below 0.

sprio's PRIORITY column is recomputed by sprio from the factors without the 2**32 cap; every
factor column is printed rounded (``%.0f``), so the columns need not add up (reference section 9).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from operator import mul
from typing import NamedTuple

from trainhub.slurm.conf import SlurmConfig
from trainhub.slurm.tres import tres_sort_key

__all__ = [
    "FACTOR_NAMES",
    "PRIORITY_MAX",
    "Factor",
    "PartitionFacts",
    "PriorityBreakdown",
    "PriorityContext",
    "PriorityJob",
    "basic_priority",
    "compute_priorities",
    "compute_priority",
]

PRIORITY_MAX = 4_294_967_295
#: Slurm's INFINITE time limit (0xfffffffe minutes), used by SMALL_RELATIVE_TO_TIME for no limit.
_INFINITE_MINUTES = 0xFFFFFFFE
FACTOR_NAMES = ("age", "assoc", "fairshare", "jobsize", "partition", "qos")


@dataclass(slots=True)
class PriorityJob:
    """What the multifactor formula reads of a job (an input record; built once per job per pass). ``cpus`` is the job's total CPU count
    (allocated if running); ``tres`` its TRES counts (cpu, mem, node, billing, gres/gpu...)."""

    job_id: int
    partition: str
    submit_time: dt.datetime
    eligible_time: dt.datetime | None = None
    user: str = ""
    account: str = ""
    qos: str | None = None
    min_nodes: int = 1
    cpus: int = 1
    time_limit_minutes: int | None = None
    tres: Mapping[str, int] = field(default_factory=dict)
    fairshare_factor: float = 0.0
    assoc_priority: int = 0
    nice: int = 0
    site_factor: int = 0
    held: bool = False
    admin_priority: int | None = None
    previous_priority: int | None = None
    #: priority/basic's FIFO value (Slurm gives each new job one less than the last).
    basic_priority: int = 1


@dataclass(frozen=True)
class PartitionFacts:
    priority_job_factor: int = 1
    tres_totals: Mapping[str, int] = field(default_factory=dict)
    max_time_minutes: int | None = None


@dataclass(frozen=True)
class PriorityContext:
    """Cluster-wide inputs: weights/flags and the maxima the factors are normalised against.
    Build it once per pass with :meth:`build` (which also precomputes the per-partition and per-QOS
    factors, so each job costs a few dictionary lookups)."""

    config: SlurmConfig
    cluster_nodes: int
    cluster_cpus: int
    partitions: Mapping[str, PartitionFacts]
    qos_priorities: Mapping[str, int]
    max_assoc_priority: int
    max_partition_factor: int
    max_qos_priority: int
    partition_factors: Mapping[str, float] = field(default_factory=dict)
    qos_factors: Mapping[str, float] = field(default_factory=dict)
    #: partition -> [(TRES name, weight, partition total or None when not normalised)]
    tres_terms: Mapping[str, list[tuple[str, float, float | None]]] = field(default_factory=dict)
    #: the six weights in FACTOR_NAMES order, and flags read per job
    weights: tuple[float, ...] = (0.0,) * 6
    accrue_always: bool = False
    normal_assoc: bool = True
    incr_only: bool = False

    @classmethod
    def build(cls, *, config: SlurmConfig, cluster_nodes: int, cluster_cpus: int,
              partitions: Mapping[str, PartitionFacts], qos_priorities: Mapping[str, int] | None = None,
              max_assoc_priority: int = 0, max_partition_factor: int | None = None) -> PriorityContext:
        """``max_partition_factor``: the highest PriorityJobFactor of all partitions when
        ``partitions`` holds only some (a submission's: its own), else theirs."""
        qos_priorities = dict(qos_priorities or {})
        max_partition = (max((p.priority_job_factor for p in partitions.values()), default=0)
                         if max_partition_factor is None else max_partition_factor)
        max_qos = max(qos_priorities.values(), default=0)
        normal_part, normal_qos, normal_tres = (config.normalises(f) for f in ("PART", "QOS", "TRES"))
        return cls(config=config, cluster_nodes=cluster_nodes, cluster_cpus=cluster_cpus,
                   partitions=dict(partitions), qos_priorities=qos_priorities,
                   max_assoc_priority=max_assoc_priority, max_partition_factor=max_partition,
                   max_qos_priority=max_qos,
                   partition_factors={name: _ratio(p.priority_job_factor, max_partition) if normal_part
                                      else float(p.priority_job_factor) for name, p in partitions.items()},
                   qos_factors={name: _ratio(value, max_qos) if normal_qos else float(value)
                                for name, value in qos_priorities.items()},
                   tres_terms={name: [(tres, config.priority_weight_tres[tres],
                                       float(p.tres_totals.get(tres, 0)) if normal_tres else None)
                                      for tres in sorted(config.priority_weight_tres, key=tres_sort_key)]
                               for name, p in partitions.items()} if config.priority_weight_tres else {},
                   weights=tuple(float(w) for w in (
                       config.priority_weight_age, config.priority_weight_assoc, config.priority_weight_fairshare,
                       config.priority_weight_job_size, config.priority_weight_partition, config.priority_weight_qos)),
                   accrue_always="ACCRUE_ALWAYS" in config.priority_flags, normal_assoc=config.normalises("ASSOC"),
                   incr_only="INCR_ONLY" in config.priority_flags)


class Factor(NamedTuple):
    """One factor of one job: the normalised ``factor``, its ``weight`` and ``weighted`` = factor * weight."""

    factor: float
    weight: float
    weighted: float


_ZERO = Factor(0.0, 0.0, 0.0)
_NO_FACTORS = (0.0,) * len(FACTOR_NAMES)


class PriorityBreakdown:
    """A job's priority and its factors (a value: treat it as read-only).

    ``values`` holds the six normalised factors in FACTOR_NAMES order and ``weights`` their weights
    (a factor whose weight is 0 is not computed and stays 0, as in slurmctld); ``factors`` presents
    them by name. It can also be built from ``factors={name: Factor}`` (e.g. when read back from
    storage). ``total`` is the unclamped sum of the weighted factors, TRES, site and nice -- what sprio
    adds up again for its PRIORITY column.
    """

    __slots__ = ("job_id", "partition", "user", "account", "qos", "priority", "values", "weights", "tres", "site",
                 "nice", "admin_set", "total")

    def __init__(self, job_id: int, partition: str, user: str, account: str, qos: str | None, priority: int,
                 values: tuple[float, ...] | None = None, weights: tuple[float, ...] | None = None,
                 tres: dict[str, Factor] | None = None, site: int = 0, nice: int = 0, admin_set: bool = False,
                 total: float | None = None, *, factors: Mapping[str, Factor] | None = None):
        if factors is not None:
            values = tuple(factors[name].factor if name in factors else 0.0 for name in FACTOR_NAMES)
            weights = tuple(factors[name].weight if name in factors else 0.0 for name in FACTOR_NAMES)
        self.job_id, self.partition, self.user, self.account, self.qos = job_id, partition, user, account, qos
        self.priority = priority
        self.values = values or _NO_FACTORS
        self.weights = weights or _NO_FACTORS
        self.tres = tres or {}
        self.site, self.nice, self.admin_set = site, nice, admin_set
        if total is None:
            # map(mul) adds the same products in the same order as a generator, at half the cost
            # (sprio builds 10,000 of these per request).
            total = sum(map(mul, self.values, self.weights))
            if self.tres:
                total += sum(item.weighted for item in self.tres.values())
            total = total + site - nice
        self.total = total

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PriorityBreakdown) and all(
            getattr(self, name) == getattr(other, name) for name in self.__slots__)

    def __repr__(self) -> str:
        return f"PriorityBreakdown(job_id={self.job_id}, partition={self.partition!r}, priority={self.priority})"

    @property
    def factors(self) -> dict[str, Factor]:
        return {name: Factor(value, weight, value * weight)
                for name, value, weight in zip(FACTOR_NAMES, self.values, self.weights, strict=True)}

    def weighted(self, index: int) -> float:
        return self.values[index] * self.weights[index]

    @property
    def tres_weighted(self) -> float:
        return sum(item.weighted for item in self.tres.values())

    @property
    def sprio_priority(self) -> int:
        """sprio's PRIORITY: the factors summed again client-side (min 1, truncated, no 2**32 cap)."""
        if self.admin_set or self.priority == 0:
            return self.priority
        return int(max(self.total, 1.0))


def _ratio(value: float, maximum: float) -> float:
    return value / maximum if maximum else 0.0


def _job_size(job: PriorityJob, context: PriorityContext) -> float:
    config = context.config
    nodes, cpus_total = context.cluster_nodes, context.cluster_cpus
    if nodes <= 0 or cpus_total <= 0:
        return 0.0
    cpus = job.cpus
    if "SMALL_RELATIVE_TO_TIME" in config.priority_flags:
        limit = job.time_limit_minutes
        if limit is None:
            facts = context.partitions.get(job.partition)
            limit = facts.max_time_minutes if facts else None
        size = max(job.min_nodes * cpus_total / nodes, cpus) / (limit or _INFINITE_MINUTES) / cpus_total
        if config.priority_favor_small:
            size = 1.0 - size
    elif config.priority_favor_small:
        size = (nodes - job.min_nodes) / nodes if nodes > job.min_nodes else 0.0
        if cpus:
            size = (size + (cpus_total - cpus) / cpus_total) / 2
    else:
        size = job.min_nodes / nodes
        if cpus:
            size = (size + cpus / cpus_total) / 2
    return min(max(size, 0.0), 1.0)


def _tres(job: PriorityJob, context: PriorityContext) -> dict[str, Factor]:
    result = {}
    for name, weight, total in context.tres_terms.get(job.partition, ()):
        value = float(job.tres.get(name, 0))
        factor = value if total is None else (value / total if total else 0.0)
        result[name] = Factor(factor, weight, factor * weight)
    return result


def _unweighted(job: PriorityJob, priority: int, *, admin_set: bool) -> PriorityBreakdown:
    return PriorityBreakdown(job.job_id, job.partition, job.user, job.account, job.qos, priority, _NO_FACTORS,
                             _NO_FACTORS, {}, job.site_factor if admin_set else 0, job.nice, admin_set, priority)


def basic_priority(fifo_value: int, nice: int) -> int:
    """priority/basic's priority of a job that is not held: its FIFO value less its nice, at least 1
    (see the module doc)."""
    return max(1, fifo_value - nice)


def compute_priority(job: PriorityJob, context: PriorityContext, now: dt.datetime) -> PriorityBreakdown:
    """The job's priority as slurmctld computes it at ``now`` (see the module doc)."""
    config = context.config
    if job.admin_priority is not None and job.admin_priority > 0:
        return _unweighted(job, job.admin_priority, admin_set=True)
    if config.priority_type == "priority/basic":
        return _unweighted(job, 0 if job.held else basic_priority(job.basic_priority, job.nice), admin_set=False)
    w_age, w_assoc, w_fs, w_js, w_part, w_qos = weights = context.weights
    age = 0.0
    if w_age:
        accrue = job.submit_time if context.accrue_always else job.eligible_time
        if accrue is not None:
            waited = max(0, int((now - accrue).total_seconds()))
            age = waited / config.priority_max_age if waited < config.priority_max_age else 1.0
    assoc = 0.0
    if w_assoc:
        assoc = _ratio(job.assoc_priority, context.max_assoc_priority) if context.normal_assoc else (
            float(job.assoc_priority))
    fairshare = job.fairshare_factor if w_fs else 0.0
    job_size = _job_size(job, context) if w_js else 0.0
    partition = context.partition_factors.get(job.partition, 0.0) if w_part else 0.0
    qos = context.qos_factors.get(job.qos, 0.0) if w_qos and job.qos else 0.0
    tres = _tres(job, context) if context.tres_terms else {}
    total = (age * w_age + assoc * w_assoc + fairshare * w_fs + job_size * w_js + partition * w_part
             + qos * w_qos + job.site_factor - job.nice)
    if tres:
        total += sum(item.weighted for item in tres.values())
    priority = int(min(max(total, 1.0), float(PRIORITY_MAX)))
    if job.previous_priority is not None and context.incr_only:
        priority = max(priority, job.previous_priority)
    if job.held:
        priority = 0
    return PriorityBreakdown(job.job_id, job.partition, job.user, job.account, job.qos, priority,
                             (age, assoc, fairshare, job_size, partition, qos), weights, tres, job.site_factor,
                             job.nice, False, total)


def compute_priorities(jobs: Iterable[PriorityJob], context: PriorityContext,
                       now: dt.datetime) -> list[PriorityBreakdown]:
    """:func:`compute_priority` for every job (one decay-thread pass)."""
    return [compute_priority(job, context, now) for job in jobs]
