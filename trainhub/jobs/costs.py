"""Estimated and accrued cost of jobs, from their GPUs and run time (see catalog.pricing)."""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from trainhub.catalog.pricing import Cost, Prices, build_prices, cost_of
from trainhub.jobs.models import CustomJob


def prices() -> Prices:
    return build_prices(settings.TRAINHUB_GPU_PRICES, settings.TRAINHUB_MANAGEMENT_FEE_PERCENT)


def gpus_by_type(spec: dict[str, Any]) -> dict[str, int]:
    """The GPUs a job is charged for; none on a persistent resource, which is billed instead."""
    if spec["jobSpec"].get("persistentResourceId"):
        return {}
    gpus: dict[str, int] = defaultdict(int)
    for pool in spec["jobSpec"]["workerPoolSpecs"]:
        machine = pool.get("machineSpec") if pool else None
        if machine and machine.get("acceleratorCount"):
            gpus[machine["acceleratorType"]] += pool["replicaCount"] * machine["acceleratorCount"]
    return dict(gpus)


def run_seconds(job: CustomJob, now: dt.datetime) -> float:
    if job.start_time is None:
        return 0.0
    return ((job.end_time or now) - job.start_time).total_seconds()


@dataclass(frozen=True)
class JobCost:
    estimated: Cost
    accrued: Cost


def job_cost(job: CustomJob, now: dt.datetime, table: Prices | None = None) -> JobCost:
    """Estimated: every GPU for the whole scheduling.timeout (an upper bound). Accrued: so far."""
    table = table or prices()
    gpus = gpus_by_type(job.spec)
    return JobCost(
        estimated=cost_of(gpus, job.timeout_seconds, job.strategy, table),
        accrued=cost_of(gpus, run_seconds(job, now), job.strategy, table),
    )


def render_cost_breakdown(cost: Cost) -> dict[str, Any]:
    return {"gpuHours": {k: round(v, 4) for k, v in cost.gpu_hours.items()},
            "infrastructureUsd": round(cost.infrastructure, 4), "managementFeeUsd": round(cost.management_fee, 4),
            "totalUsd": round(cost.total, 4), "onDemandEquivalentUsd": round(cost.on_demand_equivalent, 4)}


def render_cost(cost: JobCost) -> dict[str, Any]:
    return {"estimated": render_cost_breakdown(cost.estimated), "accrued": render_cost_breakdown(cost.accrued)}


@dataclass(frozen=True)
class ProjectCost:
    project_id: str
    jobs: int
    gpu_hours: float
    total: float
    on_demand_equivalent: float


def project_costs(*, project_ids: list[int], now: dt.datetime) -> list[ProjectCost]:
    """Accrued cost per project over every job that has started."""
    table = prices()
    totals: dict[str, list[float]] = defaultdict(lambda: [0, 0.0, 0.0, 0.0])
    jobs = (CustomJob.objects.filter(project_id__in=project_ids, start_time__isnull=False)
            .select_related("project").only("project__project_id", "spec", "strategy", "start_time", "end_time"))
    for job in jobs.iterator(chunk_size=2000):
        cost = cost_of(gpus_by_type(job.spec), run_seconds(job, now), job.strategy, table)
        row = totals[job.project.project_id]
        row[0] += 1
        row[1] += sum(cost.gpu_hours.values())
        row[2] += cost.total
        row[3] += cost.on_demand_equivalent
    return [ProjectCost(pid, int(r[0]), r[1], r[2], r[3]) for pid, r in sorted(totals.items())]
