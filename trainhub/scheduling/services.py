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
from trainhub.common.redis import get_redis
from trainhub.common.wire import format_timestamp
from trainhub.iam.models import Project
from trainhub.inventory.models import Node, NodeState
from trainhub.jobs import services as job_services
from trainhub.jobs import states
from trainhub.jobs.models import CustomJob, Replica
from trainhub.jobs.spec import ReplicaShape
from trainhub.resources.pass_step import resource_jobs_pass, targets_persistent_resource
from trainhub.scheduling import working_memory
from trainhub.scheduling.pass_requests import request_pass
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
    live = Node.objects.filter(state=NodeState.UP, last_heartbeat__gte=fresh_after, dedicated_to="")
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


def _estimates(waiting: list[CustomJob], shapes: dict[int, list[tuple[int, int, ReplicaShape]]],
               free_nodes: list[FreeNode], now: dt.datetime) -> dict[int, WaitEstimate]:
    free_now: dict[NodeKind, int] = {}
    for node in free_nodes:
        for kind in _node_kinds(node.machine_type, node.accelerator_type):
            free_now[kind] = free_now.get(kind, 0) + 1
    busy_until: dict[NodeKind, list[dt.datetime]] = {}
    rows = Replica.objects.filter(active=True, node__state=NodeState.UP, node__dedicated_to="").values_list(
        "node__pool__machine_type", "node__pool__accelerator_type", "job__start_time", "assigned_at",
        "job__timeout_seconds")
    for machine, accel, started, assigned, timeout in rows:
        ends = (started or assigned) + dt.timedelta(seconds=timeout)
        for kind in _node_kinds(machine, accel):
            busy_until.setdefault(kind, []).append(max(ends, now))
    requests = [
        (job.pk, needs_by_kind((count, shape.machine_type, shape.accelerator_type if shape.accelerator_count
                                else NO_ACCELERATOR) for _, count, shape in shapes[job.pk]))
        for job in waiting
    ]
    return estimate_waits(requests, free_now, busy_until, now)


def _waited(job: CustomJob, now: dt.datetime) -> int:
    return int((now - job.create_time).total_seconds())


def _stockout_error(job: CustomJob, now: dt.datetime, reasons: list[str]) -> str | None:
    """STANDARD jobs retry placement for TRAINHUB_STOCKOUT_RETRY_SECONDS, then fail as Vertex does."""
    waited = _waited(job, now)
    if job.strategy != "STANDARD" or waited < settings.TRAINHUB_STOCKOUT_RETRY_SECONDS:
        return None
    missing = " ".join(reasons) or "capacity never became free."
    return (f"Resources are insufficient in region: {job.location} . Try a different region or use a "
            f"different accelerator. (Retried for {waited}s.) {missing}")


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


STALE_QUEUE_ENTRY_SECONDS = 300
#: What a pass reads of each waiting job (decoding every column of 10k rows is most of a pass).
_PASS_FIELDS = ("pk", "job_id", "project_id", "location", "state", "strategy", "spec", "quota_demand",
                "create_time", "max_wait_seconds", "timeout_seconds", "restart_count")
_ID_CHUNK = 5000


def _waiting_jobs(pks: list[int]) -> list[CustomJob]:
    """The queued ids that are really waiting and hold no allocation, oldest first."""
    allocated = Replica.objects.filter(job=OuterRef("pk"), active=True)
    jobs: list[CustomJob] = []
    for chunk in _chunks(pks):
        jobs += (CustomJob.objects.filter(pk__in=chunk, state__in=states.WAITING)
                 .annotate(allocated=Exists(allocated)).filter(allocated=False).only(*_PASS_FIELDS))
    jobs.sort(key=lambda job: (job.create_time, job.pk))
    return jobs


def _chunks(pks: list[int]):
    for start in range(0, len(pks), _ID_CHUNK):  # SQLite caps the parameters of one statement
        yield pks[start:start + _ID_CHUNK]


def _forget_stale(client, queued: list[int], waiting: list[CustomJob], now: dt.datetime) -> None:
    """Drop queue entries whose job no longer waits.

    An id with no row may be a submission whose transaction has not committed yet (jobs are queued
    before commit), so it is kept until its submission time is STALE_QUEUE_ENTRY_SECONDS old.
    """
    seen = {job.pk for job in waiting}
    unseen = [pk for pk in queued if pk not in seen]
    if not unseen:
        return
    existing: set[int] = set()
    for chunk in _chunks(unseen):
        existing.update(CustomJob.objects.filter(pk__in=chunk).values_list("pk", flat=True))
    vanished = [pk for pk in unseen if pk not in existing]
    scores = client.zmscore(working_memory.PENDING, vanished) if vanished else []
    stale_before = (now - dt.timedelta(seconds=STALE_QUEUE_ENTRY_SECONDS)).timestamp()
    gone = [pk for pk in unseen if pk in existing]
    gone += [pk for pk, score in zip(vanished, scores) if score is None or score < stale_before]
    working_memory.pending_remove(client, gone)


def working_memory_reconcile(*, now: dt.datetime, rebuild: bool = True) -> int:
    """Rebuild Redis from the database: the waiting queue, FLEX_START deadlines, heartbeats.

    Runs when Redis answers empty (FLUSHALL, restart), at worker start, and every minute from beat
    without ``rebuild`` as a resync that adds whatever a failed Redis write missed.
    """
    allocated = Replica.objects.filter(job=OuterRef("pk"), active=True)
    waiting = (CustomJob.objects.filter(state__in=states.WAITING).annotate(allocated=Exists(allocated))
               .filter(allocated=False).only("pk", "create_time", "strategy", "max_wait_seconds"))
    queued = [job_services.queued_job(job) for job in waiting.iterator(chunk_size=5000)]
    ttl = settings.TRAINHUB_NODE_HEARTBEAT_TTL_SECONDS
    heartbeats = {
        pk: int(ttl - (now - beat).total_seconds())
        for pk, beat in Node.objects.filter(state=NodeState.UP, last_heartbeat__isnull=False)
        .values_list("pk", "last_heartbeat")
    }
    working_memory.reconcile(get_redis(), waiting=queued, heartbeats=heartbeats, now=now, rebuild=rebuild)
    logger.info("working memory rebuilt from the database: %d waiting job(s)", len(queued))
    return len(queued)


def _ensure_warm(client, now: dt.datetime) -> None:
    if not working_memory.is_warm(client):
        working_memory_reconcile(now=now)


def flex_start_deadline_sweep(*, now: dt.datetime) -> int:
    """Fail FLEX_START jobs whose maxWaitDuration has run out (the deadline sorted set, swept by beat)."""
    client = get_redis()
    _ensure_warm(client, now)
    expired = working_memory.flex_expired(client, now)
    if not expired:
        return 0
    jobs = _waiting_jobs(expired)
    last_reasons = working_memory.waits_read(client, [job.pk for job in jobs])
    for job in jobs:
        reasons = last_reasons.get(job.pk, working_memory.WaitExplanation.empty()).reasons
        missing = " ".join(reasons) or "capacity never became free."
        job_services.job_fail(
            job=job, now=now, code=job_services.CODE_RESOURCE_EXHAUSTED,
            message=(f"The job waited {_waited(job, now)}s, its scheduling.maxWaitDuration "
                     f"({job.max_wait_seconds}s), without every requested GPU becoming free at once. {missing}"))
    working_memory.pending_remove(client, expired)
    return len(jobs)


def scheduler_pass(*, now: dt.datetime) -> PassResult:
    """One pass over the queue in Redis, oldest first; decisions are written to the database."""
    client = get_redis()
    _ensure_warm(client, now)
    flex_start_deadline_sweep(now=now)
    job_services.jobs_enforce_timeouts(now=now)
    queued = working_memory.pending_ids(client)
    waiting = _waiting_jobs(queued)
    _forget_stale(client, queued, waiting, now)
    # Jobs on a persistent resource use only its dedicated nodes: a step of their own.
    on_resources = [job for job in waiting if targets_persistent_resource(job)]
    waiting = [job for job in waiting if not targets_persistent_resource(job)]
    on_resources_result = resource_jobs_pass(client=client, jobs=on_resources, now=now)
    free_nodes, victims = _free_nodes(now)
    reserving = _reserving_job(waiting, now)
    shapes = {job.pk: job_replica_shapes(job) for job in waiting}
    requests = [
        GangRequest.from_pools(
            job.pk, shapes[job.pk], can_preempt=job.strategy != "SPOT", reserve=job.pk == reserving,
            project=job.project_id, location=job.location, quota_demand=tuple(sorted(job.quota_demand.items())),
        )
        for job in waiting
    ]
    quotas = quota_book()
    plan = plan_pass(requests, free_nodes, victims=victims, quotas=quotas)
    by_pk = {job.pk: job for job in waiting}
    for preemptor, victim_keys in plan.preemptions.items():
        for victim in CustomJob.objects.filter(pk__in=victim_keys):
            job_services.job_requeue(job=victim, now=now, message=f"Preempted (SPOT) to make room for job "
                                                                  f"{by_pk[preemptor].job_id}.")
    taken = {node_id for assignment in plan.placements.values() for node_id in assignment.values()}
    still_free = [node for node in free_nodes if node.node_id not in taken]
    estimates = _estimates([job for job in waiting if job.pk not in plan.placements], shapes, still_free, now)
    shape_of_pool = {pk: {index: shape for index, _, shape in shapes[pk]} for pk in plan.placements}
    placed = job_services.jobs_place(assignments={
        pk: {key: (node_id, list(range(shape_of_pool[pk][key[0]].accelerator_count)))
             for key, node_id in assignment.items()}
        for pk, assignment in plan.placements.items()
    }, now=now)
    done: list[int] = list(placed)
    explanations: dict[int, working_memory.WaitExplanation] = {}
    flex_waiting: list[int] = []
    for job in waiting:
        if job.pk in plan.placements:
            continue
        reasons = _wait_reasons(job, plan, reserving)
        stockout = _stockout_error(job, now, reasons) if job.pk in plan.shortfalls else None
        if stockout is not None:
            job_services.job_fail(job=job, now=now, code=job_services.CODE_RESOURCE_EXHAUSTED, message=stockout)
            done.append(job.pk)
            continue
        if job.strategy == "FLEX_START" and job.state == states.QUEUED:
            flex_waiting.append(job.pk)
        estimate = estimates[job.pk]
        explanations[job.pk] = working_memory.WaitExplanation(
            reasons, estimate.position, format_timestamp(estimate.estimated_start), format_timestamp(now))
    job_services.jobs_mark_flex_waiting(pks=flex_waiting, now=now)
    working_memory.pending_remove(client, done)
    working_memory.waits_write(client, explanations)
    result = PassResult(considered=len(waiting) + len(on_resources), placed=len(placed) + on_resources_result.placed,
                        failed=len(done) - len(placed) + on_resources_result.failed,
                        preempted=sum(len(v) for v in plan.preemptions.values()))
    working_memory.snapshot_write(
        client,
        free_gpus={node.node_id: node.gpu_count for node in still_free},
        quota_usage={f"{project}:{location}:{metric}": gpus for (project, location, metric), gpus in quotas.usage.items()},
        summary={"time": format_timestamp(now), "considered": result.considered, "placed": result.placed,
                 "failed": result.failed, "preempted": result.preempted},
    )
    return result


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
    request_pass()
    return quota
