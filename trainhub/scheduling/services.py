"""The scheduler pass: read the queue from Redis and what still waits, free nodes and quota usage
from the database, plan with the pure placement module, write every placed gang's allocation in
one transaction (the database stays the record; see scheduler_pass).

STANDARD jobs that do not fit keep retrying for TRAINHUB_STOCKOUT_RETRY_SECONDS and then fail
with Vertex's stockout error; FLEX_START jobs wait (in PENDING) until their gang fits, up to
maxWaitDuration (unset: one day; "0s": forever), then fail saying what never became free; SPOT
jobs wait for idle capacity and are preempted (requeued, restart counted) for the others. A job
short of quota waits in QUEUED for as long as it takes, as on Vertex.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Mapping
from dataclasses import dataclass

from django.conf import settings
from django.db import transaction
from django.db.models import Exists, OuterRef, QuerySet
from redis.exceptions import RedisError

from trainhub.catalog.machines import NO_ACCELERATOR
from trainhub.common.collector import collector_paused
from trainhub.common.redis import get_redis
from trainhub.common.wire import format_timestamp, parse_timestamp
from trainhub.iam.models import Project
from trainhub.inventory import services as inventory_services
from trainhub.inventory.models import Node, NodeState
from trainhub.inventory.wake import nodes_wake
from trainhub.jobs import services as job_services
from trainhub.jobs import states
from trainhub.jobs.models import CustomJob, Replica
from trainhub.resources.pass_step import resource_jobs_pass
from trainhub.scheduling import working_memory
from trainhub.scheduling.pass_requests import request_pass
from trainhub.scheduling.estimate import (
    NodeKind,
    WaitEstimate,
    estimate_waits,
    needs_by_kind,
    quota_waits,
)
from trainhub.scheduling.models import Quota
from trainhub.scheduling.placement import (
    FreeNode,
    GangRequest,
    PassPlan,
    Victim,
    plan_pass,
)
from trainhub.scheduling.quota import QuotaBook, all_metrics
from trainhub.scheduling.selectors import quota_book, quota_releases

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class PassResult:
    considered: int
    placed: int
    failed: int
    preempted: int = 0


@dataclass(frozen=True, slots=True)
class WaitingJob:
    """A queued job as a pass sees it: its state from the database, the rest from Redis."""

    pk: int
    state: str
    #: Submit time (POSIX seconds), as stored with the queue entry.
    submitted: float
    gang: working_memory.Gang

    @property
    def strategy(self) -> str:
        return self.gang.strategy

    def waited(self, now: dt.datetime) -> float:
        # Rounded to the microsecond the submit time was stored with, so no float noise crosses a boundary.
        return round(now.timestamp() - self.submitted, 6)


def _free_nodes(now: dt.datetime) -> tuple[list[FreeNode], list[Victim], list[FreeNode]]:
    """Idle live nodes, the running SPOT jobs (newest first) with the live nodes they hold, and the
    usable inventory: every live node (up, heart-beating, not dedicated), idle or busy."""
    fresh_after = now - dt.timedelta(seconds=settings.TRAINHUB_NODE_HEARTBEAT_TTL_SECONDS)
    live = Node.objects.filter(state=NodeState.UP, last_heartbeat__gte=fresh_after, dedicated_to="")
    busy = Replica.objects.filter(node=OuterRef("pk"), active=True)
    rows = live.annotate(busy=Exists(busy)).values_list(
        "pk", "pool__machine_type", "pool__accelerator_type", "pool__accelerator_count", "pool__location", "busy")
    usable = [(FreeNode(gpus, pk, machine, accel, location), taken)
              for pk, machine, accel, gpus, location, taken in rows]
    free = [node for node, taken in usable if not taken]
    spot_rows = (
        Replica.objects.filter(active=True, job__strategy="SPOT", job__state__in=(states.PENDING, states.RUNNING),
                               node__in=live)
        .order_by("-job__create_time", "-job_id")
        .values_list("job_id", "node_id", "node__pool__machine_type", "node__pool__accelerator_type",
                     "node__pool__accelerator_count", "node__pool__location")
    )
    held: dict[int, list[FreeNode]] = {}
    for job_id, node_id, machine, accel, gpus, location in spot_rows:
        held.setdefault(job_id, []).append(FreeNode(gpus, node_id, machine, accel, location))
    return free, [Victim(job_id, tuple(nodes)) for job_id, nodes in held.items()], [node for node, _ in usable]


def _node_kinds(machine: str, accelerator: str) -> list[NodeKind]:
    # A node with GPUs can also serve CPU-only replicas of its machine type.
    kinds = [(machine, accelerator)]
    if accelerator != NO_ACCELERATOR:
        kinds.append((machine, NO_ACCELERATOR))
    return kinds


def _estimates(waiting: list[WaitingJob], free_nodes: list[FreeNode], now: dt.datetime) -> dict[int, WaitEstimate]:
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
    needs: dict[int, dict[NodeKind, int]] = {}  # by id() of a pools tuple jobs share
    requests = []
    for job in waiting:
        need = needs.get(id(job.gang.pools))
        if need is None:
            need = needs[id(job.gang.pools)] = needs_by_kind(
                (pool.replica_count, pool.shape.machine_type,
                 pool.shape.accelerator_type if pool.shape.accelerator_count else NO_ACCELERATOR)
                for pool in job.gang.pools)
        requests.append((job.pk, need))
    return estimate_waits(requests, free_now, busy_until, now)


def _quota_estimates(estimates: dict[int, WaitEstimate], unplaced: list[WaitingJob], plan: PassPlan,
                     quotas: QuotaBook, now: dt.datetime) -> None:
    """A job short of quota starts no earlier than its quota frees up (estimate.quota_waits, from
    the holders' ends after this pass's placements); no estimate if it never does."""
    for job in unplaced:
        if job.pk in plan.quota_held_against:  # it starts after the holder, whose start is not known
            estimates[job.pk] = WaitEstimate(estimates[job.pk].position, None)
    blocked = [job for job in unplaced if job.pk in plan.quota_shortfalls]
    if not blocked:
        return
    releases = quota_releases(project_ids=sorted({job.gang.project_id for job in blocked}), now=now)
    frees = quota_waits([(job.pk, job.gang.project_id, job.gang.location, dict(job.gang.quota_demand))
                         for job in blocked], quotas.limits, quotas.usage, releases, now)
    for job in blocked:
        capacity, quota = estimates[job.pk].estimated_start, frees[job.pk]
        start = None if capacity is None or quota is None else max(capacity, quota)
        estimates[job.pk] = WaitEstimate(estimates[job.pk].position, start)


def _retry_from(job: WaitingJob, plan: PassPlan, marks: Mapping[int, float | None],
                changed: dict[int, float | None], now: dt.datetime) -> float | None:
    """When a STANDARD job's stockout retry window started (POSIX seconds): at submission, or at the
    first pass that found free the quota it had waited for; None while it waits for quota. Vertex
    keeps a job short of quota QUEUED "until you have sufficient quotas" and only then tries, and
    retries, to get its machines: a job that waited an hour for quota has its full retry window
    once it gets it. Marks that change go to ``changed`` (kept in Redis by pass_end)."""
    if job.pk in plan.quota_shortfalls or job.pk in plan.quota_held_against:
        if marks.get(job.pk, 0.0) is not None:
            changed[job.pk] = None
        return None
    if job.pk not in marks:
        return job.submitted
    if marks[job.pk] is None:
        changed[job.pk] = now.timestamp()
        return now.timestamp()
    return marks[job.pk]


def _stockout_error(job: WaitingJob, now: dt.datetime, reasons: list[str], retry_from: float) -> str | None:
    """STANDARD jobs retry placement for TRAINHUB_STOCKOUT_RETRY_SECONDS, then fail as Vertex does."""
    retried = round(now.timestamp() - retry_from, 6)
    if retried < settings.TRAINHUB_STOCKOUT_RETRY_SECONDS:
        return None
    missing = " ".join(reasons) or "capacity never became free."
    return (f"Resources are insufficient in region: {job.gang.location} . Try a different region or use a "
            f"different accelerator. (Retried for {int(retried)}s.) {missing}")


def _holds_quota(job: WaitingJob, now: dt.datetime) -> bool:
    """A job (not SPOT: preemptible by design) that has waited past the quota-hold threshold; short
    of quota, it holds what it needs of its project's quota (see placement)."""
    return job.strategy != "SPOT" and job.waited(now) >= settings.TRAINHUB_QUOTA_HOLD_AFTER_SECONDS


def _quota_holders(plan: PassPlan) -> dict[int, tuple[str, str]]:
    """The jobs holding quota this pass: pk -> (job id, display name), for the reasons."""
    pks = set(plan.quota_holds) | set(plan.quota_held_against.values())
    if not pks:
        return {}
    return {pk: (str(job_id), name)
            for pk, job_id, name in CustomJob.objects.filter(pk__in=pks).values_list("pk", "job_id", "display_name")}


def _may_reserve(job: WaitingJob, now: dt.datetime) -> bool:
    """A FLEX_START gang that has waited past the reservation threshold; the planner picks, per
    location, the oldest of them the usable inventory could hold (see placement)."""
    return job.strategy == "FLEX_START" and job.waited(now) >= settings.TRAINHUB_FLEX_RESERVATION_AFTER_SECONDS


def _clock(timestamp: str | None) -> str:
    if timestamp is None:
        return "it starts (its maxWaitDuration is 0s: no deadline)"
    return f"{parse_timestamp(timestamp):%Y-%m-%d %H:%M} UTC at most"


def _held_nodes(reservation: working_memory.Reservation) -> str:
    pools = sorted({pool for _, pool in reservation.nodes})
    return f"{len(reservation.nodes)} node(s) of pool {', '.join(pools)}"


def _reservations(plan: PassPlan, now: dt.datetime, previous: dict[int, working_memory.Reservation]
                  ) -> dict[int, working_memory.Reservation]:
    """The plan's held nodes as Reservation records: who holds which nodes, since when (the first
    pass that held for the gang) and until when at most. Two queries, only when a gang holds."""
    held = {pk: nodes for pk, nodes in plan.reservations.items() if nodes}
    if not held:
        return {}
    names = {pk: (name, pool) for pk, name, pool in Node.objects.filter(
        pk__in=[node.node_id for nodes in held.values() for node in nodes]).values_list("pk", "name", "pool__name")}
    records = {}
    for job in CustomJob.objects.filter(pk__in=list(held)).select_related("project").only(
            "pk", "job_id", "display_name", "location", "strategy", "create_time", "max_wait_seconds",
            "project__project_id"):
        before = previous.get(job.pk)
        deadline = job.flex_start_deadline
        records[job.pk] = working_memory.Reservation(
            job_pk=job.pk, project_pk=job.project_id, project=job.project.project_id, location=job.location,
            job_id=str(job.job_id), display_name=job.display_name,
            nodes=[names[node.node_id] for node in held[job.pk]],
            since=before.since if before is not None else format_timestamp(now),
            until=format_timestamp(deadline) if deadline is not None else None)
    return records


def _wait_reasons(pk: int, plan: PassPlan, reservations: dict[int, working_memory.Reservation],
                  quota_holders: dict[int, tuple[str, str]]) -> list[str]:
    reasons = [s.describe() for s in plan.quota_shortfalls.get(pk, [])]
    if plan.quota_holds.get(pk):
        reasons.append(f"Holding quota {', '.join(plan.quota_holds[pk])}: it has waited over "
                       f"{settings.TRAINHUB_QUOTA_HOLD_AFTER_SECONDS}s, so younger jobs of this project that need it "
                       f"wait until this job starts.")
    holder = plan.quota_held_against.get(pk)
    if holder is not None:
        job_id, name = quota_holders.get(holder, ("?", "an older job"))
        reasons.append(f"Waiting: this project's quota is held for older job {name} ({job_id}), which has waited "
                       f"over {settings.TRAINHUB_QUOTA_HOLD_AFTER_SECONDS}s for it; this job starts after it.")
    reasons += [f"Waiting for capacity: {s.describe()}." for s in plan.shortfalls.get(pk, [])]
    own = reservations.get(pk)
    if own is not None:
        reasons.append(f"Holding {_held_nodes(own)} ({', '.join(name for name, _ in own.nodes)}) for this "
                       f"FLEX_START gang since {parse_timestamp(own.since):%Y-%m-%d %H:%M} UTC so smaller jobs "
                       f"cannot starve it, until {_clock(own.until)}.")
    behind = reservations.get(plan.held_against.get(pk))
    if behind is not None:
        reasons.append(f"Waiting: {_held_nodes(behind)} are reserved for FLEX_START job {behind.display_name} "
                       f"({behind.job_id}) until {_clock(behind.until)}.")
    beyond = plan.unreservable.get(pk)
    if beyond is not None:
        reasons.append(f"Holds no nodes: the usable nodes of its location (up, alive, not drained or dedicated) "
                       f"could not hold this gang even if all were idle ({beyond.describe('usable')}); it waits "
                       f"for nodes to come back, until its maxWaitDuration.")
    return reasons


STALE_QUEUE_ENTRY_SECONDS = 300
_ID_CHUNK = 5000


def _unallocated_waiting() -> QuerySet[CustomJob]:
    """Jobs waiting in the database that hold no allocation (a placed job is PENDING with replicas)."""
    allocated = Replica.objects.filter(job=OuterRef("pk"), active=True)
    return CustomJob.objects.filter(state__in=states.WAITING).exclude(Exists(allocated))


def _waiting_jobs(pks: list[int]) -> list[CustomJob]:
    """Those of ``pks`` that really wait and hold no allocation, oldest first, as full rows."""
    jobs: list[CustomJob] = []
    for chunk in _chunks(pks):
        jobs += _unallocated_waiting().filter(pk__in=chunk)
    jobs.sort(key=lambda job: (job.create_time, job.pk))
    return jobs


def _chunks(pks: list[int]):
    for start in range(0, len(pks), _ID_CHUNK):  # SQLite caps the parameters of one statement
        yield pks[start:start + _ID_CHUNK]


def _details_from_database(client, pks: list[int]) -> dict[int, working_memory.QueuedJob]:
    """Queued jobs whose details are missing from Redis (a resync queued them, or a write was lost),
    read from the database and stored back for the next pass."""
    found: dict[int, working_memory.QueuedJob] = {}
    for chunk in _chunks(pks):
        for job in CustomJob.objects.filter(pk__in=chunk).only(
                "pk", "project_id", "location", "strategy", "spec", "quota_demand", "create_time", "max_wait_seconds"):
            found[job.pk] = job_services.queued_job(job)
    working_memory.details_write(client, found.values())
    return found


def _queue_read(client) -> tuple[list[int], list[WaitingJob]]:
    """The queued ids, and those that really wait in the database, in scheduling order: oldest
    submission first, then lowest id.

    The database says which jobs still wait (one narrow query, no row decoded); Redis says what
    each one asks for.
    """
    queue = working_memory.pending_read(client)
    state_of = dict(_unallocated_waiting().values_list("pk", "state"))
    entries = [entry for entry in queue if entry[0] in state_of]
    missing = [pk for pk, _, gang in entries if gang is None]
    if missing:
        found = _details_from_database(client, missing)
        entries = [(pk, submitted, gang) if gang is not None else (pk, found[pk].submitted.timestamp(), found[pk].gang)
                   for pk, submitted, gang in entries if gang is not None or pk in found]
    entries.sort(key=lambda entry: (entry[1], entry[0]))
    waiting = [WaitingJob(pk, state_of[pk], submitted, gang) for pk, submitted, gang in entries]
    return [pk for pk, _, _ in queue], waiting


def _forget_stale(client, queued: list[int], waiting: list[WaitingJob], now: dt.datetime) -> None:
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
    without ``rebuild`` as a resync that adds whatever a failed Redis write missed. A rebuild also
    stores every waiting job's Gang; a resync leaves a missing one to the next pass.
    """
    fields = ("pk", "create_time", "strategy", "max_wait_seconds")
    if rebuild:
        fields += ("project_id", "location", "spec", "quota_demand")
    waiting = _unallocated_waiting().only(*fields)
    queued = [job_services.queued_job(job, with_gang=rebuild) for job in waiting.iterator(chunk_size=5000)]
    heartbeats = dict(Node.objects.filter(state=NodeState.UP, last_heartbeat__isnull=False)
                      .values_list("pk", "last_heartbeat"))
    working_memory.reconcile(get_redis(), waiting=queued, heartbeats=heartbeats, now=now, rebuild=rebuild,
                             heartbeat_ttl=settings.TRAINHUB_NODE_HEARTBEAT_TTL_SECONDS)
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
        waited = int((now - job.create_time).total_seconds())
        job_services.job_fail(
            job=job, now=now, code=job_services.CODE_RESOURCE_EXHAUSTED,
            message=(f"The job waited {waited}s, its scheduling.maxWaitDuration "
                     f"({job.max_wait_seconds}s), without every requested GPU becoming free at once. {missing}"))
    working_memory.pending_remove(client, expired)
    return len(jobs)


def _on_resources_pass(client, waiting: list[WaitingJob], now: dt.datetime):
    """Jobs on a persistent resource use only its dedicated nodes: a step of their own, on full rows."""
    jobs = list(CustomJob.objects.filter(pk__in=[job.pk for job in waiting]))
    jobs.sort(key=lambda job: (job.create_time, job.pk))
    return resource_jobs_pass(client=client, jobs=jobs, now=now)


def _preempt(plan: PassPlan, now: dt.datetime) -> None:
    """Requeue the SPOT jobs the plan stops, naming the job each one makes room for."""
    if not plan.preemptions:
        return
    job_ids = dict(CustomJob.objects.filter(pk__in=list(plan.preemptions)).values_list("pk", "job_id"))
    for preemptor, victim_keys in plan.preemptions.items():
        for victim in CustomJob.objects.filter(pk__in=victim_keys):
            job_services.job_requeue(job=victim, now=now, message=f"Preempted (SPOT) to make room for job "
                                                                  f"{job_ids[preemptor]}.")


def _place(plan: PassPlan, by_pk: dict[int, WaitingJob], now: dt.datetime) -> set[int]:
    """Write every placed gang's allocation (one transaction, see jobs_place)."""
    assignments = {}
    for pk, assignment in plan.placements.items():
        gpus = {pool.index: list(range(pool.shape.accelerator_count)) for pool in by_pk[pk].gang.pools}
        assignments[pk] = {key: (node_id, gpus[key[0]]) for key, node_id in assignment.items()}
    return job_services.jobs_place(assignments=assignments, now=now)


def _fail_stockouts(errors: dict[int, str], now: dt.datetime) -> None:
    for job in CustomJob.objects.filter(pk__in=list(errors)).only("pk"):
        job_services.job_fail(job=job, now=now, code=job_services.CODE_RESOURCE_EXHAUSTED, message=errors[job.pk])


def scheduler_pass(*, now: dt.datetime) -> PassResult:
    """One pass over the queue in Redis, oldest first; decisions are written to the database.

    Reads: the queue, and each waiting job's Gang, from Redis; which queued jobs still wait, the
    free live nodes, running SPOT jobs and quota usage from the database (the record). Writes: all
    placed gangs in one transaction, stockout failures, at most TRAINHUB_FLEX_PENDING_PER_PASS
    FLEX_START jobs moved QUEUED -> PENDING, then the explanations, the queue entries of jobs that
    stopped waiting and the snapshot in one Redis round trip.
    """
    with collector_paused():
        return _scheduler_pass(now)


def _scheduler_pass(now: dt.datetime) -> PassResult:
    client = get_redis()
    _ensure_warm(client, now)
    flex_start_deadline_sweep(now=now)
    job_services.jobs_enforce_timeouts(now=now)
    queued, waiting = _queue_read(client)
    _forget_stale(client, queued, waiting, now)
    on_resources = [job for job in waiting if job.gang.on_resource]
    waiting = [job for job in waiting if not job.gang.on_resource]
    on_resources_result = _on_resources_pass(client, on_resources, now)
    free_nodes, victims, inventory = _free_nodes(now)
    requests = [
        GangRequest(job.pk, job.gang.pools, can_preempt=job.strategy != "SPOT", reserve=_may_reserve(job, now),
                    project=job.gang.project_id, location=job.gang.location, quota_demand=job.gang.quota_demand,
                    holds_quota=_holds_quota(job, now))
        for job in waiting
    ]
    quotas = quota_book()
    plan = plan_pass(requests, free_nodes, victims=victims, quotas=quotas, inventory=inventory)
    reservations = _reservations(plan, now, working_memory.reservations_read(client))
    _preempt(plan, now)
    taken = {node_id for assignment in plan.placements.values() for node_id in assignment.values()}
    still_free = [node for node in free_nodes if node.node_id not in taken]
    unplaced = [job for job in waiting if job.pk not in plan.placements]
    estimates = _estimates(unplaced, still_free, now)
    placed = _place(plan, {job.pk: job for job in waiting}, now)
    _quota_estimates(estimates, unplaced, plan, quotas, now)
    explanations: dict[int, working_memory.WaitExplanation] = {}
    stockouts: dict[int, str] = {}
    flex_waiting: list[int] = []
    computed_at = format_timestamp(now)
    quota_holders = _quota_holders(plan)
    retry_marks = working_memory.retry_marks_read(client)
    changed_marks: dict[int, float | None] = {}
    for job in unplaced:
        reasons = _wait_reasons(job.pk, plan, reservations, quota_holders)
        retry_from = _retry_from(job, plan, retry_marks, changed_marks, now) if job.strategy == "STANDARD" else None
        if retry_from is not None and job.pk in plan.shortfalls:
            stockout = _stockout_error(job, now, reasons, retry_from)
            if stockout is not None:
                stockouts[job.pk] = stockout
                continue
        if job.strategy == "FLEX_START" and job.state == states.QUEUED:
            flex_waiting.append(job.pk)
        estimate = estimates[job.pk]
        explanations[job.pk] = working_memory.WaitExplanation(
            reasons, estimate.position, format_timestamp(estimate.estimated_start), computed_at)
    _fail_stockouts(stockouts, now)
    job_services.jobs_mark_flex_waiting(pks=flex_waiting[:settings.TRAINHUB_FLEX_PENDING_PER_PASS], now=now)
    result = PassResult(considered=len(waiting) + len(on_resources), placed=len(placed) + on_resources_result.placed,
                        failed=len(stockouts) + on_resources_result.failed,
                        preempted=sum(len(v) for v in plan.preemptions.values()))
    working_memory.pass_end(
        client, done=list(placed) + list(stockouts), explanations=explanations,
        free_gpus={node.node_id: node.gpu_count for node in still_free},
        quota_usage={f"{project}:{location}:{metric}": gpus for (project, location, metric), gpus in quotas.usage.items()},
        summary={"time": computed_at, "considered": result.considered, "placed": result.placed,
                 "failed": result.failed, "preempted": result.preempted},
        reservations=reservations.values(), retry_marks=changed_marks,
        # a job that stopped waiting between the pass's read and a pass_end that wrote its mark
        stale_marks=set(retry_marks) - {job.pk for job in unplaced},
    )
    return result


def _alive_in_redis(node_ids: list[int], since: dt.datetime) -> set[int]:
    try:
        return working_memory.alive(get_redis(), node_ids, since)
    except RedisError:
        logger.warning("heartbeat keys not read: Redis did not answer; the database decides", exc_info=True)
        return set()


def nodes_sweep_heartbeats(*, now: dt.datetime) -> int:
    """Mark nodes whose agent stopped heart-beating DOWN and settle the replicas they ran.

    Contact first: the long poll's contacts recorded since the last sweep are written to the
    nodes' last heartbeat (one UPDATE), so an agent that only long-polls keeps its node UP. Then
    two witnesses must agree a node is silent: the database's last heartbeat (the record) and its
    Redis TTL key. A flushed or unreachable Redis leaves the database to decide alone (never
    marking a live node DOWN), and a heartbeat whose database write lagged keeps its node UP.
    A node marked DOWN is woken, so its agent, once back, fetches its assignments (they say DOWN)
    and heart-beats at once to bring it back UP.
    """
    inventory_services.node_contacts_flush()
    expired_before = now - dt.timedelta(seconds=settings.TRAINHUB_NODE_HEARTBEAT_TTL_SECONDS)
    candidates = list(Node.objects.filter(state=NodeState.UP, last_heartbeat__lt=expired_before))
    still_beating = _alive_in_redis([node.pk for node in candidates], expired_before)
    stale = [node for node in candidates if node.pk not in still_beating]
    for node in stale:
        node.state = NodeState.DOWN
        node.state_reason = f"heartbeat expired (none since {node.last_heartbeat:%Y-%m-%d %H:%M:%S} UTC)"
        node.save(update_fields=["state", "state_reason"])
        for replica in Replica.objects.filter(node=node, active=True):
            job_services.replica_exited(replica=replica, exit_code=None, now=now,
                                        lost_reason=f"node {node.name} stopped responding")
    nodes_wake(node.pk for node in stale)
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
