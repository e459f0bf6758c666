"""What the dashboards read from other domains, and the hooks through which those domains add to them.

Three registries, filled from each app's ``AppConfig.ready()``:

- capacity sources: a function of ``now`` returning ``CapacityReading`` rows. Node pools are the
  first source (registered by this app); the Slurm app registers one reporting each cluster's
  GPUs with ``source="cluster"``, and its clusters then appear on the GPU allocation chart::

      from trainhub.dashboards.sources import CapacityReading, register_capacity_source
      register_capacity_source(slurm_cluster_capacity, visible_scopes=slurm_scopes_for_user)

  Readings of a source other than "pool" describe GPUs a node pool reading already counts (as
  dedicated): the chart stacks their allocations but takes capacity from the pools. With
  ``visible_scopes`` (a function of the user returning the scopes they may see) a user sees only
  those scopes of that source: a cluster of another project is not shown.

- fair-share providers: a function of the user returning ``FairShareRow`` rows (Slurm's
  ``sshare``: normalized shares against effective usage per account). Without any, or when they
  return nothing, the fair-share chart says there are no Slurm clusters::

      from trainhub.dashboards.sources import FairShareRow, register_fairshare_provider
      register_fairshare_provider(fairshare_rows_for_user)

- job sources: jobs other than CustomJobs (Slurm's) counted with them on the queue charts, the
  KPIs and "Why jobs wait": their active groups now, the starts and ends of a window (the sampler
  records them), and the waiting jobs of a user's projects with their reasons::

      register_job_source(JobSource(active=..., started=..., ended=..., waiting=...))
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any, Callable

from django.contrib.auth.models import AbstractBaseUser
from trainhub.catalog.machines import NO_ACCELERATOR
from trainhub.inventory.selectors import node_pools_with_usage
from trainhub.jobs.states import PENDING as JOB_STATE_PENDING
from trainhub.jobs.states import QUEUED as JOB_STATE_QUEUED
from trainhub.jobs.states import RUNNING as JOB_STATE_RUNNING


@dataclass(frozen=True)
class CapacityReading:
    source: str
    scope: str
    accelerator_type: str
    gpus_total: int
    gpus_allocated: int
    gpus_dedicated: int = 0


@dataclass(frozen=True)
class FairShareRow:
    cluster: str
    account: str
    #: The account's normalized shares (0-1 of its parent's), as sshare's NormShares.
    norm_shares: float
    #: Its decayed usage relative to its siblings' (0-1), as sshare's EffectvUsage.
    effective_usage: float
    #: Its Fair Tree fair-share factor (0-1), as sshare's FairShare (None where sshare prints none).
    fairshare: float | None
    #: The user of a user association ("" for the account itself), as sshare's User.
    user: str = ""
    #: Its Fairshare= shares (None: "parent"), as sshare's RawShares.
    raw_shares: int | None = None


@dataclass(frozen=True)
class ActiveGroup:
    """Active jobs of one state (JOB_STATE_*) and GPU type, split by whether they hold an
    allocation: a PENDING job that does is starting on its nodes, one that does not still waits."""

    state: str
    accelerator_type: str
    allocated: bool
    jobs: int
    gpus: int
    oldest: dt.datetime

    @property
    def waiting(self) -> bool:
        return self.state in (JOB_STATE_QUEUED, JOB_STATE_PENDING) and not self.allocated

    @property
    def running(self) -> bool:
        return self.state == JOB_STATE_RUNNING or (self.state == JOB_STATE_PENDING and self.allocated)


@dataclass(frozen=True)
class WaitingRow:
    """A waiting job of another kind, as the "Why jobs wait" table shows it."""

    job_id: str
    name: str
    project: str
    location: str
    kind: str  # what the table says under the name: "Slurm · partition a4"
    gpu_type: str
    gpus: int
    submitted: dt.datetime
    position: int | None
    estimated_start: dt.datetime | None
    reasons: str
    url: str


@dataclass(frozen=True)
class JobSpan:
    gpu_type: str
    gpus: int
    submitted: dt.datetime
    started: dt.datetime | None
    ended: dt.datetime | None


@dataclass(frozen=True)
class JobSource:
    #: Its active jobs now, grouped.
    active: Callable[[], list[ActiveGroup]]
    #: (GPU type, seconds waited) of each job that started in [since, until).
    started: Callable[[dt.datetime, dt.datetime], list[tuple[str, float]]]
    #: (GPU type, final JOB_STATE_SUCCEEDED/FAILED/CANCELLED, jobs) that ended in [since, until).
    ended: Callable[[dt.datetime, dt.datetime], list[tuple[str, str, int]]]
    #: The ``limit`` longest-waiting jobs of the projects the user may see (of ``project`` only
    #: when given).
    waiting: Callable[..., list[WaitingRow]]
    #: A project's jobs alive in [since, until): (GPU type, GPUs, submitted, started or None,
    #: ended or None), for the team page's GPUs over time.
    spans: Callable[[Any, dt.datetime, dt.datetime], list[JobSpan]]


_job_sources: list[JobSource] = []


def register_job_source(source: JobSource) -> None:
    if source not in _job_sources:
        _job_sources.append(source)


def job_sources() -> list[JobSource]:
    return list(_job_sources)


CapacitySource = Callable[[dt.datetime], list[CapacityReading]]
FairShareProvider = Callable[[AbstractBaseUser], list[FairShareRow]]
ScopeFilter = Callable[[AbstractBaseUser], set[str]]

_capacity_sources: list[CapacitySource] = []
_fairshare_providers: list[FairShareProvider] = []
#: CapacityReading.source -> the scopes of that source a user may see (sources without one: all).
_scope_filters: dict[str, ScopeFilter] = {}


def register_capacity_source(source: CapacitySource, *, name: str | None = None,
                             visible_scopes: ScopeFilter | None = None) -> None:
    """``name`` is the ``source`` word of the readings ``visible_scopes`` filters."""
    if source not in _capacity_sources:
        _capacity_sources.append(source)
    if name is not None and visible_scopes is not None:
        _scope_filters[name] = visible_scopes


def capacity_visibility(user: AbstractBaseUser) -> Callable[[str, str], bool]:
    """Whether the user may see a (source, scope) of the capacity samples."""
    visible = {name: scopes(user) for name, scopes in _scope_filters.items()}
    return lambda source, scope: source not in visible or scope in visible[source]


def register_fairshare_provider(provider: FairShareProvider) -> None:
    if provider not in _fairshare_providers:
        _fairshare_providers.append(provider)


def capacity_readings(now: dt.datetime) -> list[CapacityReading]:
    return [reading for source in _capacity_sources for reading in source(now)]


def fairshare_rows(user: AbstractBaseUser) -> list[FairShareRow]:
    return [row for provider in _fairshare_providers for row in provider(user)]


def node_pool_capacity(now: dt.datetime) -> list[CapacityReading]:
    """Each GPU node pool: GPUs of nodes not down, of shared nodes a job occupies, of dedicated nodes.
    Two queries whatever the number of nodes."""
    # Draining nodes still run their jobs: capacity is every node that is not down.
    return [CapacityReading("pool", pool.name, pool.accelerator_type,
                            (pool.node_total - pool.node_down) * pool.accelerator_count,
                            pool.node_busy_shared * pool.accelerator_count,
                            pool.node_dedicated * pool.accelerator_count)
            for pool in node_pools_with_usage()
            if pool.accelerator_type != NO_ACCELERATOR and pool.accelerator_count]
