"""The scheduler pass: read a snapshot from the database, plan with the pure placement module,
write each gang's allocation in its own transaction.

STANDARD jobs that do not fit keep retrying for TRAINHUB_STOCKOUT_RETRY_SECONDS and then fail
with Vertex's stockout error; FLEX_START jobs wait (in PENDING) until their gang fits, up to
maxWaitDuration (unset: one day; "0s": forever), then fail saying what never became free.
"""

from __future__ import annotations

import datetime as dt
import logging
from dataclasses import dataclass

from django.conf import settings
from django.db.models import Exists, OuterRef

from trainhub.catalog.machines import NO_ACCELERATOR
from trainhub.inventory.models import Node, NodeState
from trainhub.jobs import services as job_services
from trainhub.jobs import states
from trainhub.jobs.models import CustomJob, Replica
from trainhub.jobs.spec import ReplicaShape
from trainhub.scheduling.placement import FreeNode, GangRequest, Shortfall, plan_pass

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class PassResult:
    considered: int
    placed: int
    failed: int


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


def _free_nodes(now: dt.datetime) -> list[FreeNode]:
    fresh_after = now - dt.timedelta(seconds=settings.TRAINHUB_NODE_HEARTBEAT_TTL_SECONDS)
    busy = Replica.objects.filter(node=OuterRef("pk"), active=True)
    rows = (
        Node.objects.filter(state=NodeState.UP, last_heartbeat__gte=fresh_after)
        .annotate(busy=Exists(busy))
        .filter(busy=False)
        .values_list("pk", "pool__machine_type", "pool__accelerator_type", "pool__accelerator_count")
    )
    return [FreeNode(gpus, pk, machine, accel) for pk, machine, accel, gpus in rows]


def _describe(shortfalls: list[Shortfall]) -> list[str]:
    return [f"Waiting for capacity: {s.describe()}." for s in shortfalls]


def _deadline_error(job: CustomJob, now: dt.datetime, reasons: list[str]) -> tuple[int, str] | None:
    waited = int((now - job.create_time).total_seconds())
    missing = " ".join(reasons) or "capacity never became free."
    if job.strategy == "FLEX_START":
        if job.max_wait_seconds is not None and waited >= job.max_wait_seconds:
            return (job_services.CODE_RESOURCE_EXHAUSTED,
                    f"The job waited {waited}s, its scheduling.maxWaitDuration ({job.max_wait_seconds}s), "
                    f"without every requested GPU becoming free at once. {missing}")
        return None
    if waited >= settings.TRAINHUB_STOCKOUT_RETRY_SECONDS:
        return (job_services.CODE_RESOURCE_EXHAUSTED,
                f"Resources are insufficient in region: {job.location} . Try a different region or use a "
                f"different accelerator. (Retried for {waited}s.) {missing}")
    return None


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
    free_nodes = _free_nodes(now)
    requests = [GangRequest.from_pools(job.pk, job_replica_shapes(job)) for job in waiting]
    plan = plan_pass(requests, free_nodes)
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
        reasons = _describe(plan.shortfalls.get(job.pk, []))
        deadline = _deadline_error(job, now, reasons)
        if deadline is not None:
            job_services.job_fail(job=job, now=now, code=deadline[0], message=deadline[1])
            failed += 1
            continue
        waiting_state = states.PENDING if job.strategy == "FLEX_START" else states.QUEUED
        job_services.job_wait(job=job, reasons=reasons, now=now, waiting_state=waiting_state)
    return PassResult(considered=len(waiting), placed=placed, failed=failed)


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
