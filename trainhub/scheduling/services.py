"""The scheduler pass: read a snapshot from the database, plan with the pure placement module,
write each gang's allocation in its own transaction.

STANDARD jobs that do not fit keep retrying for TRAINHUB_STOCKOUT_RETRY_SECONDS and then fail
with Vertex's stockout error; FLEX_START jobs wait (in PENDING) until their gang fits, up to
maxWaitDuration (unset: one day; "0s": forever), then fail saying what never became free; SPOT
jobs wait for idle capacity and are preempted (requeued, restart counted) for the others. A job
short of quota waits in QUEUED for as long as it takes, as on Vertex.
"""

from __future__ import annotations

import datetime as dt
import logging
from dataclasses import dataclass

from django.conf import settings
from django.db import transaction
from django.db.models import Exists, OuterRef

from trainhub.catalog.machines import NO_ACCELERATOR
from trainhub.iam.models import Project
from trainhub.inventory.models import Node, NodeState
from trainhub.jobs import services as job_services
from trainhub.jobs import states
from trainhub.jobs.models import CustomJob, Replica
from trainhub.jobs.spec import ReplicaShape
from trainhub.scheduling.estimate import (
    NodeKind,
    WaitEstimate,
    estimate_waits,
    needs_by_kind,
)
from trainhub.scheduling.models import Quota
from trainhub.scheduling.placement import (
    FreeNode,
    GangRequest,
    PassPlan,
    Victim,
    plan_pass,
)
from trainhub.scheduling.quota import all_metrics
from trainhub.scheduling.selectors import quota_book

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class PassResult:
    considered: int
    placed: int
    failed: int
    preempted: int = 0


def job_replica_shapes(job: CustomJob) -> list[tuple[int, int, ReplicaShape]]:
    """(pool index, replica count, shape) for each non-empty pool of a job's canonical spec."""
    result = []
    for index, pool in enumerate(job.spec["jobSpec"]["workerPoolSpecs"]):
        if not pool:
            continue
        machine = pool["machineSpec"]
        shape = ReplicaShape(machine["machineType"], machine.get("acceleratorType", NO_ACCELERATOR),
                             machine.get("acceleratorCount", 0))
        result.append((index, pool["replicaCount"], shape))
    return result


def _free_nodes(now: dt.datetime) -> tuple[list[FreeNode], list[Victim]]:
    """Idle live nodes, and the running SPOT jobs (newest first) with the live nodes they hold."""
    fresh_after = now - dt.timedelta(seconds=settings.TRAINHUB_NODE_HEARTBEAT_TTL_SECONDS)
    live = Node.objects.filter(state=NodeState.UP, last_heartbeat__gte=fresh_after)
    busy = Replica.objects.filter(node=OuterRef("pk"), active=True)
    rows = live.annotate(busy=Exists(busy)).filter(busy=False).values_list(
        "pk", "pool__machine_type", "pool__accelerator_type", "pool__accelerator_count")
    free = [FreeNode(gpus, pk, machine, accel) for pk, machine, accel, gpus in rows]
    spot_rows = (
        Replica.objects.filter(active=True, job__strategy="SPOT", job__state__in=(states.PENDING, states.RUNNING),
                               node__in=live)
        .order_by("-job__create_time", "-job_id")
        .values_list("job_id", "node_id", "node__pool__machine_type", "node__pool__accelerator_type",
                     "node__pool__accelerator_count")
    )
    held: dict[int, list[FreeNode]] = {}
    for job_id, node_id, machine, accel, gpus in spot_rows:
        held.setdefault(job_id, []).append(FreeNode(gpus, node_id, machine, accel))
    return free, [Victim(job_id, tuple(nodes)) for job_id, nodes in held.items()]


def _node_kinds(machine: str, accelerator: str) -> list[NodeKind]:
    # A node with GPUs can also serve CPU-only replicas of its machine type.
    kinds = [(machine, accelerator)]
    if accelerator != NO_ACCELERATOR:
        kinds.append((machine, NO_ACCELERATOR))
    return kinds


def _estimates(waiting: list[CustomJob], free_nodes: list[FreeNode], now: dt.datetime) -> dict[int, WaitEstimate]:
    free_now: dict[NodeKind, int] = {}
    for node in free_nodes:
        for kind in _node_kinds(node.machine_type, node.accelerator_type):
            free_now[kind] = free_now.get(kind, 0) + 1
    busy_until: dict[NodeKind, list[dt.datetime]] = {}
    rows = Replica.objects.filter(active=True, node__state=NodeState.UP).values_list(
        "node__pool__machine_type", "node__pool__accelerator_type", "job__start_time", "assigned_at",
        "job__timeout_seconds")
    for machine, accel, started, assigned, timeout in rows:
        ends = (started or assigned) + dt.timedelta(seconds=timeout)
        for kind in _node_kinds(machine, accel):
            busy_until.setdefault(kind, []).append(max(ends, now))
    requests = [
        (job.pk, needs_by_kind((count, shape.machine_type, shape.accelerator_type if shape.accelerator_count
                                else NO_ACCELERATOR) for _, count, shape in job_replica_shapes(job)))
        for job in waiting
    ]
    return estimate_waits(requests, free_now, busy_until, now)


def _waited(job: CustomJob, now: dt.datetime) -> int:
    return int((now - job.create_time).total_seconds())


def _deadline_error(job: CustomJob, now: dt.datetime, reasons: list[str]) -> tuple[int, str] | None:
    """FLEX_START fails after maxWaitDuration, STANDARD after the stockout retry window."""
    waited = _waited(job, now)
    missing = " ".join(reasons) or "capacity never became free."
    if job.strategy == "FLEX_START":
        if job.max_wait_seconds is not None and waited >= job.max_wait_seconds:
            return (job_services.CODE_RESOURCE_EXHAUSTED,
                    f"The job waited {waited}s, its scheduling.maxWaitDuration ({job.max_wait_seconds}s), "
                    f"without every requested GPU becoming free at once. {missing}")
        return None
    if job.strategy == "STANDARD" and waited >= settings.TRAINHUB_STOCKOUT_RETRY_SECONDS:
        return (job_services.CODE_RESOURCE_EXHAUSTED,
                f"Resources are insufficient in region: {job.location} . Try a different region or use a "
                f"different accelerator. (Retried for {waited}s.) {missing}")
    return None


def _reserving_job(waiting: list[CustomJob], now: dt.datetime) -> int | None:
    """The oldest FLEX_START gang that has waited past the reservation threshold, if any."""
    threshold = settings.TRAINHUB_FLEX_RESERVATION_AFTER_SECONDS
    for job in waiting:
        if job.strategy == "FLEX_START" and _waited(job, now) >= threshold:
            return job.pk
    return None


def _wait_reasons(job: CustomJob, plan: PassPlan, reserving: int | None) -> list[str]:
    reasons = [s.describe() for s in plan.quota_shortfalls.get(job.pk, [])]
    reasons += [f"Waiting for capacity: {s.describe()}." for s in plan.shortfalls.get(job.pk, [])]
    held = plan.reservations.get(job.pk)
    if held is not None:
        reasons.append(f"Holding {held} idle node(s) for this FLEX_START gang so smaller jobs cannot starve it.")
    elif reserving is not None and reserving != job.pk and job.pk in plan.shortfalls:
        reasons.append("Nodes are reserved for an older FLEX_START gang that has waited past the threshold.")
    return reasons


def scheduler_pass(*, now: dt.datetime) -> PassResult:
    """One pass over every waiting job, oldest first."""
    job_services.jobs_enforce_timeouts(now=now)
    allocated = Replica.objects.filter(job=OuterRef("pk"), active=True)
    waiting = list(
        CustomJob.objects.filter(state__in=states.WAITING)
        .annotate(allocated=Exists(allocated))
        .filter(allocated=False)
        .select_related("project")
        .order_by("create_time", "id")
    )
    free_nodes, victims = _free_nodes(now)
    reserving = _reserving_job(waiting, now)
    requests = [
        GangRequest.from_pools(
            job.pk, job_replica_shapes(job), can_preempt=job.strategy != "SPOT", reserve=job.pk == reserving,
            project=job.project_id, location=job.location, quota_demand=tuple(sorted(job.quota_demand.items())),
        )
        for job in waiting
    ]
    plan = plan_pass(requests, free_nodes, victims=victims, quotas=quota_book())
    by_pk = {job.pk: job for job in waiting}
    taken = {node_id for assignment in plan.placements.values() for node_id in assignment.values()}
    estimates = _estimates([job for job in waiting if job.pk not in plan.placements],
                           [node for node in free_nodes if node.node_id not in taken], now)
    for preemptor, victim_keys in plan.preemptions.items():
        for victim in CustomJob.objects.filter(pk__in=victim_keys):
            job_services.job_requeue(job=victim, now=now, message=f"Preempted (SPOT) to make room for job "
                                                                  f"{by_pk[preemptor].job_id}.")
    placed = failed = 0
    for job in waiting:
        assignment = plan.placements.get(job.pk)
        if assignment is not None:
            shapes = {index: shape for index, _, shape in job_replica_shapes(job)}
            with_gpus = {
                key: (node_id, list(range(shapes[key[0]].accelerator_count)))
                for key, node_id in assignment.items()
            }
            if job_services.job_place(job_pk=job.pk, assignment=with_gpus, now=now):
                placed += 1
            continue
        reasons = _wait_reasons(job, plan, reserving)
        deadline = _deadline_error(job, now, reasons) if job.pk in plan.shortfalls else None
        if deadline is not None:
            job_services.job_fail(job=job, now=now, code=deadline[0], message=deadline[1])
            failed += 1
            continue
        waiting_state = states.PENDING if job.strategy == "FLEX_START" else states.QUEUED
        estimate = estimates[job.pk]
        job_services.job_wait(job=job, reasons=reasons, now=now, waiting_state=waiting_state,
                              position=estimate.position, estimated_start=estimate.estimated_start)
    return PassResult(considered=len(waiting), placed=placed, failed=failed,
                      preempted=sum(len(v) for v in plan.preemptions.values()))


def nodes_sweep_heartbeats(*, now: dt.datetime) -> int:
    """Mark nodes whose agent stopped heart-beating DOWN and settle the replicas they ran."""
    expired_before = now - dt.timedelta(seconds=settings.TRAINHUB_NODE_HEARTBEAT_TTL_SECONDS)
    stale = list(Node.objects.filter(state=NodeState.UP, last_heartbeat__lt=expired_before))
    for node in stale:
        node.state = NodeState.DOWN
        node.state_reason = f"heartbeat expired (none since {node.last_heartbeat:%Y-%m-%d %H:%M:%S} UTC)"
        node.save(update_fields=["state", "state_reason"])
        for replica in Replica.objects.filter(node=node, active=True):
            job_services.replica_exited(replica=replica, exit_code=None, now=now,
                                        lost_reason=f"node {node.name} stopped responding")
    return len(stale)


def quota_set(*, project: Project, location: str, metric: str, limit: int | None, actor: str) -> Quota | None:
    """Set a project's limit for one quota metric in one region; ``None`` removes it (unlimited)."""
    if metric not in all_metrics():
        raise ValueError(f"unknown quota metric {metric!r}")
    if limit is not None and limit < 0:
        raise ValueError("a quota limit cannot be negative")
    with transaction.atomic():
        if limit is None:
            Quota.objects.filter(project=project, location=location, metric=metric).delete()
            return None
        quota, _ = Quota.objects.update_or_create(project=project, location=location, metric=metric,
                                                  defaults={"limit": limit, "updated_by": actor})
    _request_pass()
    return quota


def _request_pass() -> None:
    from trainhub.scheduling.tasks import scheduler_pass as scheduler_pass_task

    transaction.on_commit(lambda: scheduler_pass_task.delay(), robust=True)
