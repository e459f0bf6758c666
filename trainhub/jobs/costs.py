"""Estimated and accrued cost of jobs, from their GPUs and run time (see catalog.pricing)."""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db.models import Count, FloatField, Func, Sum

from trainhub.catalog.pricing import Cost, Prices, build_prices, cost_of
from trainhub.jobs.models import ACTIVE_JOBS, CostLedger, CustomJob
from trainhub.scheduling.quota import metric_accelerator


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


class EpochSeconds(Func):
    """A datetime column as seconds since the Unix epoch, computed by the database, so that sums
    of times over many jobs decode no row in Python."""

    output_field = FloatField()

    def as_sqlite(self, compiler, connection, **extra):
        unix_epoch_julian_day = 2440587.5
        return self.as_sql(compiler, connection, **extra,
                           template=f"((julianday(%(expressions)s) - {unix_epoch_julian_day}) * 86400.0)")

    def as_postgresql(self, compiler, connection, **extra):
        return self.as_sql(compiler, connection, template="EXTRACT(EPOCH FROM %(expressions)s)", **extra)


def gpus_by_quota_demand(demand: dict[str, int]) -> dict[str, int]:
    """GPUs per accelerator type from a job's quota demand (GPUs per quota metric)."""
    gpus: dict[str, int] = defaultdict(int)
    for metric, count in (demand or {}).items():
        if (accelerator := metric_accelerator(metric)) is not None:
            gpus[accelerator] += count
    return dict(gpus)


def project_costs(*, project_ids: list[int], now: dt.datetime) -> list[ProjectCost]:
    """Accrued cost per project over every job that has started: the ledger of finished jobs
    (one row per project and strategy), plus the jobs still running - two small reads, however
    long the projects' history."""
    table = prices()
    totals: dict[str, list[float]] = defaultdict(lambda: [0, 0.0, 0.0, 0.0])

    def add(project_id: str, jobs: int, gpu_seconds: dict[str, float], strategy: str) -> None:
        cost = cost_of(gpu_seconds, 1.0, strategy, table)  # linear in time: price GPU-seconds as 1 s
        row = totals[project_id]
        row[0] += jobs
        row[1] += sum(cost.gpu_hours.values())
        row[2] += cost.total
        row[3] += cost.on_demand_equivalent

    for ledger in CostLedger.objects.filter(project_id__in=project_ids).select_related("project"):
        add(ledger.project.project_id, ledger.jobs, ledger.gpu_seconds, ledger.strategy)
    # Running jobs asking for the same GPUs are summed by the database: sum(now - start) is
    # jobs * now - sum(start).
    running = (CustomJob.objects.filter(ACTIVE_JOBS, project_id__in=project_ids, start_time__isnull=False)
               .values("project__project_id", "strategy", "quota_demand")
               .annotate(jobs=Count("pk"), started=Sum(EpochSeconds("start_time"))).order_by())
    for group in running:
        # To the millisecond: SQLite's julianday() carries some microseconds of float noise.
        seconds = max(0.0, round(group["jobs"] * now.timestamp() - group["started"], 3))
        gpu_seconds = {kind: gpus * seconds for kind, gpus in gpus_by_quota_demand(group["quota_demand"]).items()}
        add(group["project__project_id"], group["jobs"], gpu_seconds, group["strategy"])
    return [ProjectCost(pid, int(r[0]), r[1], r[2], r[3]) for pid, r in sorted(totals.items())]
