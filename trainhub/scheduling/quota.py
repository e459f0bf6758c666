"""Per-project GPU quotas, named as Vertex AI names them. Pure Python, no Django.

Each project has, per region and GPU type, an on-demand quota
`custom_model_training_nvidia_<gpu>_gpus` and a preemptible one
`custom_model_training_preemptible_nvidia_<gpu>_gpus`. STANDARD jobs consume the on-demand
quota; FLEX_START (Dynamic Workload Scheduler) and SPOT consume the preemptible one ("preemptible
quota is used only in name" for FLEX_START). A metric with no limit set is unlimited. Usage is
the GPUs of every job holding an allocation; a job is admitted only if usage + its request stays
within every limit it touches, so usage never exceeds a limit.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Hashable, Iterable, Mapping

from trainhub.catalog.machines import QUOTA_GPU_NAME
from trainhub.jobs.spec import ReplicaShape

PREEMPTIBLE_STRATEGIES = frozenset({"FLEX_START", "SPOT"})
#: The strategy whose GPUs count against the on-demand quota (also a persistent resource's machines).
ON_DEMAND = "STANDARD"
METRIC_PREFIX = "aiplatform.googleapis.com/"


def quota_metric(accelerator_type: str, strategy: str) -> str | None:
    gpu = QUOTA_GPU_NAME.get(accelerator_type)
    if gpu is None:
        return None
    kind = "preemptible_" if strategy in PREEMPTIBLE_STRATEGIES else ""
    return f"custom_model_training_{kind}nvidia_{gpu}_gpus"


def metric_accelerator(metric: str) -> str | None:
    """The accelerator type a quota metric counts (the inverse of quota_metric), or None."""
    gpu = metric.removeprefix("custom_model_training_").removeprefix("preemptible_").removeprefix("nvidia_")
    gpu = gpu.removesuffix("_gpus")
    return next((accel for accel, name in QUOTA_GPU_NAME.items() if name == gpu), None)


def all_metrics() -> list[str]:
    return sorted({quota_metric(accel, strategy) for accel in QUOTA_GPU_NAME for strategy in ("STANDARD", "SPOT")})


def quota_demand(pools: Iterable[tuple[int, ReplicaShape]], strategy: str) -> dict[str, int]:
    """GPUs a job asks for, per quota metric, from (replica count, shape) pairs."""
    demand: dict[str, int] = {}
    for replicas, shape in pools:
        metric = quota_metric(shape.accelerator_type, strategy) if shape.accelerator_count else None
        if metric:
            demand[metric] = demand.get(metric, 0) + replicas * shape.accelerator_count
    return demand


@dataclass(frozen=True)
class QuotaShortfall:
    metric: str
    location: str
    limit: int
    in_use: int
    requested: int

    @property
    def exceeds_limit_outright(self) -> bool:
        return self.requested > self.limit

    def describe_usage(self) -> str:
        """The shortfall of a request that takes effect at once (a persistent resource's machines)."""
        return (f"{METRIC_PREFIX}{self.metric} in {self.location}: {self.in_use} in use + {self.requested} "
                f"requested > limit {self.limit}")

    def describe(self) -> str:
        if self.exceeds_limit_outright:
            return (f"{METRIC_PREFIX}{self.metric} in {self.location}: requested {self.requested}, "
                    f"limit {self.limit}")
        return (f"Waiting for quota {self.metric} in {self.location}: {self.in_use} in use + {self.requested} "
                f"requested > limit {self.limit} (short by {self.in_use + self.requested - self.limit}).")


@dataclass
class QuotaBook:
    """Limits and running usage keyed by (project key, location, metric)."""

    limits: Mapping[tuple[Hashable, str, str], int]
    usage: dict[tuple[Hashable, str, str], int] = field(default_factory=dict)
    #: (project key, location, metric) -> the job holding it in this pass (see ``hold``)
    holders: dict[tuple[Hashable, str, str], Hashable] = field(default_factory=dict)

    def headroom(self, project: Hashable, location: str, metric: str) -> int | None:
        """GPUs still free under the metric's limit (never negative); None when it has no limit."""
        limit = self.limits.get((project, location, metric))
        if limit is None:
            return None
        return max(0, limit - self.usage.get((project, location, metric), 0))

    def shortfalls(self, project: Hashable, location: str, demand: Mapping[str, int]) -> list[QuotaShortfall]:
        result = []
        for metric, requested in sorted(demand.items()):
            limit = self.limits.get((project, location, metric))
            in_use = self.usage.get((project, location, metric), 0)
            if limit is not None and in_use + requested > limit:
                result.append(QuotaShortfall(metric, location, limit, in_use, requested))
        return result

    def hold(self, key: Hashable, project: Hashable, location: str, demand: Mapping[str, int]) -> list[str]:
        """Hold, for the rest of the pass, every limited metric of ``demand`` no older job holds yet,
        for ``key``: a job short of quota that has waited past the threshold. Returns what it holds."""
        held = []
        for metric, requested in sorted(demand.items()):
            slot = (project, location, metric)
            if requested > 0 and slot in self.limits and slot not in self.holders:
                self.holders[slot] = key
                held.append(metric)
        return held

    def holder_against(self, project: Hashable, location: str, demand: Mapping[str, int]) -> Hashable | None:
        """The older job holding a metric ``demand`` needs, or None. While it is short of quota,
        whatever a younger job took of that metric would put its start further off."""
        for metric, requested in sorted(demand.items()):
            holder = self.holders.get((project, location, metric))
            if holder is not None and requested > 0:
                return holder
        return None

    def charge(self, project: Hashable, location: str, demand: Mapping[str, int]) -> None:
        for metric, requested in demand.items():
            key = (project, location, metric)
            self.usage[key] = self.usage.get(key, 0) + requested
