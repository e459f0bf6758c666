"""Every write to a CustomJob, its replicas, logs and timeline happens here.

State changes go through ``_transition`` so the state machine in jobs.states is the only
authority on what may follow what.
"""

from __future__ import annotations

import datetime as dt
import logging
import secrets
from collections import defaultdict
from typing import Any, Iterable

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, transaction
from django.db.models import Exists, OuterRef, Q
from django.utils import timezone

from trainhub.common.compiled import CompiledInsert
from trainhub.common.errors import ApiError, FieldViolation, invalid_argument
from trainhub.common.live import live_changed
from trainhub.common.locations import location_check
from trainhub.common.redis import best_effort, one_round_trip
from trainhub.iam.models import Project
from trainhub.inventory.models import Node
from trainhub.inventory.wake import nodes_wake
from trainhub.jobs import retries, states
from trainhub.jobs.costs import gpus_by_quota_demand
from trainhub.jobs.models import CostLedger, CustomJob, JobEvent, LogLine, Replica
from trainhub.jobs.ports import free_master_port, parse_port_range
from trainhub.jobs.signals import job_state_changed
from trainhub.jobs.spec import ParsedCustomJob, SpecError, document_pools, parse_custom_job
from trainhub.resources.selectors import job_resource_check
from trainhub.scheduling import working_memory
from trainhub.scheduling.pass_requests import request_pass
from trainhub.scheduling.quota import QuotaBook, quota_demand
from trainhub.scheduling.selectors import gang_beyond_inventory, project_quota_limits

# google.rpc.Code values used in CustomJob.error.
CODE_CANCELLED = 1
CODE_INVALID_ARGUMENT = 3
CODE_DEADLINE_EXCEEDED = 4
CODE_RESOURCE_EXHAUSTED = 8
CODE_ABORTED = 10
CODE_INTERNAL = 13
CODE_UNAVAILABLE = 14

PRIMARY = (0, 0)

logger = logging.getLogger(__name__)

# Every submission inserts a job and its creation event: their INSERTs are compiled once.
_JOB_INSERT = CompiledInsert(CustomJob)
_EVENT_INSERT = CompiledInsert(JobEvent)


def remember_pending(jobs: list[CustomJob]) -> None:
    """Put jobs in the scheduler's Redis queue. Best effort: the periodic reconcile repairs a miss."""
    queued = [queued_job(job) for job in jobs]
    best_effort(lambda pipe: working_memory.pending_add(pipe, queued),
                failed=lambda exc: logger.warning("could not queue job(s) %s in Redis (%s); the next reconcile will",
                                                  [job.pk for job in jobs], exc))


def queued_job(job: CustomJob, *, with_gang: bool = True) -> working_memory.QueuedJob:
    return working_memory.QueuedJob(job.pk, job.create_time, job.flex_start_deadline,
                                    job_gang(job) if with_gang else None)


def job_gang(job: CustomJob) -> working_memory.Gang:
    """What the scheduler keeps in Redis of a queued job (see working_memory.Gang)."""
    return working_memory.Gang(job.project_id, job.location, job.strategy, tuple(sorted(job.quota_demand.items())),
                               document_pools(job.spec), bool(job.spec["jobSpec"].get("persistentResourceId")))


def _event(job: CustomJob, now: dt.datetime, message: str, state: str = "") -> None:
    _EVENT_INSERT.save(JobEvent(job=job, time=now, state=state, message=message))
    live_changed()


def _create(job: CustomJob, message: str) -> None:
    """Insert a new job with its first timeline event: one statement on PostgreSQL (see CompiledInsert.save_with)."""
    _JOB_INSERT.save_with(job, JobEvent(time=job.create_time, state=job.state, message=message), _EVENT_INSERT)
    live_changed()


def _transition(job: CustomJob, target: str, now: dt.datetime, message: str, *, error: dict | None = None) -> None:
    states.check_transition(job.state, target)
    job.state = target
    job.update_time = now
    fields = ["state", "update_time"]
    if target == states.RUNNING and job.start_time is None:
        job.start_time = now
        fields.append("start_time")
    if target in states.TERMINAL:
        job.end_time = now
        fields.append("end_time")
    if error is not None:
        job.error = error
        fields.append("error")
    job.save(update_fields=fields)
    _event(job, now, message, target)
    transaction.on_commit(lambda: job_state_changed.send(sender=CustomJob, job=job, state=target), robust=True)
    if target in states.TERMINAL and job.start_time is not None:
        _cost_ledger_add(job)


def _cost_ledger_add(job: CustomJob) -> None:
    """Book a finished job's GPU-seconds in its project's cost ledger (see CostLedger)."""
    ledger, _ = CostLedger.objects.select_for_update().get_or_create(project_id=job.project_id, strategy=job.strategy)
    seconds = (job.end_time - job.start_time).total_seconds()
    for accelerator, gpus in gpus_by_quota_demand(job.quota_demand).items():
        ledger.gpu_seconds[accelerator] = ledger.gpu_seconds.get(accelerator, 0.0) + gpus * seconds
    ledger.jobs += 1
    ledger.save(update_fields=["jobs", "gpu_seconds"])


def _new_job_id() -> str:
    # Vertex job ids are large decimal integers; 18 random digits keep the same shape.
    return str(secrets.randbelow(9 * 10**17) + 10**17)


def _quota_demand(parsed: ParsedCustomJob) -> dict[str, int]:
    if parsed.document["jobSpec"].get("persistentResourceId"):
        # The resource's machines are already held (and billed) for the project: no quota, no provisioning.
        return {}
    return quota_demand(((p.replica_count, p.shape) for p in parsed.pools), parsed.strategy)


def job_submission_check(*, project: Project, location: str, body: Any) -> ParsedCustomJob:
    """Every rule job_submit applies before it writes: raises the ApiError it would answer.

    Resources that submit jobs later (tuning trials, pipelines) call it at their own creation so a
    spec that could never be submitted is refused at once, not one trial at a time.
    """
    location_check(location)
    try:
        parsed = parse_custom_job(body)
    except SpecError as exc:
        raise invalid_argument(exc.violations) from exc
    if parsed.document["jobSpec"].get("persistentResourceId"):
        # The job must fit one of the resource's pools exactly.
        violations = job_resource_check(project=project, location=location, job_spec=parsed.document["jobSpec"])
        if violations:
            raise invalid_argument(violations)
    _reject_requests_above_quota(project=project, location=location, demand=_quota_demand(parsed))
    if parsed.strategy == "FLEX_START" and not parsed.document["jobSpec"].get("persistentResourceId"):
        _reject_gangs_beyond_inventory(location=location, parsed=parsed)
    return parsed


def _reject_gangs_beyond_inventory(*, location: str, parsed: ParsedCustomJob) -> None:
    """A FLEX_START gang that the location's whole inventory could never hold at once would wait
    (and, past the reservation threshold, hold nodes) for nothing: 400 naming the worker pools and
    the node pools at create, as persistent resources are refused."""
    beyond = gang_beyond_inventory(location=location, pools=parsed.pools)
    if beyond is None:
        return
    shortfall, node_pools = beyond
    shape = shortfall.shape
    gpus = f" with {shape.accelerator_count} x {shape.accelerator_type}" if shape.accelerator_count else ""
    where = (f"node pool(s) {', '.join(node_pools)} in {location} have {shortfall.free}" if node_pools
             else f"{location} has none")
    raise invalid_argument([
        FieldViolation(f"jobSpec.workerPoolSpecs[{pool.index}].replicaCount",
                       f"the job needs {shortfall.needed} {shape.machine_type} node(s){gpus} at once; {where} "
                       "in all (idle or not), so it could never start")
        for pool in parsed.pools if pool.shape == shape])


def job_submit(*, project: Project, location: str, user: AbstractBaseUser | None, body: Any,
               now: dt.datetime | None = None, owner: str = "", trial_id: str = "") -> CustomJob:
    """Validate a CustomJob document and queue it; 400 INVALID_ARGUMENT lists every violation.

    ``owner`` names the resource submitting the job for the user ("hyperparameterTuningJobs/<pk>"),
    which is then told of its state changes through signals.job_state_changed; ``trial_id`` makes
    the job a tuning trial (CLUSTER_SPEC.task.trial, CLOUD_ML_TRIAL_ID, AIP_* dirs per trial).
    """
    parsed = job_submission_check(project=project, location=location, body=body)
    demand = _quota_demand(parsed)
    now = now or timezone.now()
    job = CustomJob(
        project=project,
        location=location,
        job_id=_new_job_id(),
        display_name=parsed.document["displayName"],
        spec=parsed.document,
        labels=parsed.document["labels"],
        strategy=parsed.strategy,
        gpu_count=sum(p.replica_count * p.shape.accelerator_count for p in parsed.pools),
        replica_count=sum(p.replica_count for p in parsed.pools),
        accelerator_type=parsed.accelerator_type,
        quota_demand=demand,
        owner=owner,
        trial_id=trial_id,
        persistent_resource_id=parsed.document["jobSpec"].get("persistentResourceId"),
        timeout_seconds=parsed.timeout_seconds,
        max_wait_seconds=parsed.max_wait_seconds,
        created_by=user if user is not None and user.is_authenticated else None,
        create_time=now,
        update_time=now,
    )
    # The job is committed before Redis hears of it (reconcile queues a job whose Redis write was
    # lost); the three best-effort writes that follow share one round trip.
    with one_round_trip():
        _create(job, f"Job created by {user or 'system'} ({parsed.strategy}).")
        remember_pending([job])
        request_pass()
    return job


def _reject_requests_above_quota(*, project: Project, location: str, demand: dict[str, int]) -> None:
    """A request larger than the limit itself can never run: 429 RESOURCE_EXHAUSTED at create.

    A request that fits the limit but not the current usage is accepted and waits in QUEUED.
    """
    if not demand:
        return
    book = QuotaBook(limits=project_quota_limits(project_pk=project.pk))
    outright = [s for s in book.shortfalls(project.pk, location, demand) if s.exceeds_limit_outright]
    if outright:
        raise ApiError(429, "The following quota metrics exceed quota limits: "
                            + ", ".join(s.describe() for s in outright), "RESOURCE_EXHAUSTED")


def job_cancel(*, job: CustomJob, now: dt.datetime | None = None) -> CustomJob:
    """Vertex cancel: best effort, asynchronous; a finished job is left as it is."""
    now = now or timezone.now()
    with transaction.atomic():
        job = CustomJob.objects.select_for_update().get(pk=job.pk)
        if job.state in states.TERMINAL or job.state == states.CANCELLING:
            return job
        active = job.replicas.filter(active=True)
        if not active.exists():
            _transition(job, states.CANCELLED, now, "Job cancelled before any replica started.",
                        error={"code": CODE_CANCELLED, "message": "CANCELED"})
            request_pass()
            return job
        _stop_active(job)
        _transition(job, states.CANCELLING, now, "Cancel requested; stopping every replica.")
    return job


def job_delete(*, job: CustomJob) -> None:
    if job.state not in states.TERMINAL:
        raise ApiError(400, f"CustomJob {job.resource_name} is in state {job.state} and cannot be deleted; "
                            "cancel it first.", "FAILED_PRECONDITION")
    job.delete()


Assignment = dict[tuple[int, int], tuple[int, list[int]]]
_ID_CHUNK = 5000


def jobs_place(*, assignments: dict[int, Assignment], now: dt.datetime) -> set[int]:
    """Write the allocations of many gangs; return the job ids placed.

    ``assignments`` maps job id -> {(pool index, replica index): (node id, GPU indices)}. All gangs
    are written in one transaction; if any node was taken meanwhile (the partial unique index on
    active replicas refuses it) each gang is retried in a transaction of its own, so one conflict
    costs only that gang. A job that stopped waiting meanwhile is skipped.
    """
    if not assignments:
        return set()
    try:
        with transaction.atomic():
            return _place_gangs(assignments, now)
    except IntegrityError:
        if len(assignments) == 1:
            return set()
        placed: set[int] = set()
        for pk, assignment in assignments.items():
            placed |= jobs_place(assignments={pk: assignment}, now=now)
        return placed


def _place_gangs(assignments: dict[int, Assignment], now: dt.datetime) -> set[int]:
    pks = sorted(assignments)
    allocated = Replica.objects.filter(job=OuterRef("pk"), active=True)
    jobs: list[CustomJob] = []
    for start in range(0, len(pks), _ID_CHUNK):  # SQLite caps the parameters of one statement
        jobs += (CustomJob.objects.select_for_update().filter(pk__in=pks[start:start + _ID_CHUNK],
                                                                state__in=states.WAITING)
                 .exclude(Exists(allocated)).only("pk", "state", "restart_count"))
    ports = _rendezvous_ports(jobs, assignments)
    jobs = [job for job in jobs if job.pk in ports]
    nodes_wake(node_id for job in jobs for node_id, _ in assignments[job.pk].values())
    Replica.objects.bulk_create(
        (Replica(job_id=job.pk, pool_index=pool_index, replica_index=replica_index, node_id=node_id,
                 gpu_indices=gpus, attempt=job.restart_count, assigned_at=now,
                 master_port=ports[job.pk], cluster_port=ports[job.pk] + 1)
         for job in jobs for (pool_index, replica_index), (node_id, gpus) in sorted(assignments[job.pk].items())),
        batch_size=1000,
    )
    states.check_transition(states.QUEUED, states.PENDING)
    placed = [job.pk for job in jobs]
    for start in range(0, len(placed), _ID_CHUNK):
        CustomJob.objects.filter(pk__in=placed[start:start + _ID_CHUNK]).update(state=states.PENDING,
                                                                               update_time=now)
    JobEvent.objects.bulk_create(
        (JobEvent(job_id=job.pk, time=now, state=states.PENDING,
                  message=f"All {len(assignments[job.pk])} replica(s) placed; starting.") for job in jobs),
        batch_size=1000,
    )
    return set(placed)


def _rendezvous_ports(jobs: list[CustomJob], assignments: dict[int, Assignment]) -> dict[int, int]:
    """Each job's master port (its cluster port is the next one), free on every address of its
    nodes among the active jobs and the jobs placed before it here; a job left without one is
    not placed this time (see jobs.ports)."""
    port_range = parse_port_range(settings.TRAINHUB_RENDEZVOUS_PORTS)
    node_ids = sorted({node_id for job in jobs for node_id, _ in assignments[job.pk].values()})
    address_of: dict[int, str] = {}
    for start in range(0, len(node_ids), _ID_CHUNK):
        for pk, address, hostname in Node.objects.filter(pk__in=node_ids[start:start + _ID_CHUNK]).values_list(
                "pk", "address", "hostname"):
            address_of[pk] = address or hostname
    used: dict[str, set[int]] = defaultdict(set)
    addresses = sorted(set(address_of.values()))
    for start in range(0, len(addresses), _ID_CHUNK):
        chunk = addresses[start:start + _ID_CHUNK]
        for address, hostname, port in (
                Replica.objects.filter(active=True, master_port__isnull=False)
                .filter(Q(node__address__in=chunk) | Q(node__address="", node__hostname__in=chunk))
                .values_list("node__address", "node__hostname", "master_port")):
            used[address or hostname].add(port)
    ports: dict[int, int] = {}
    for job in jobs:
        mine = {address_of[node_id] for node_id, _ in assignments[job.pk].values()}
        port = free_master_port(port_range, (p for address in mine for p in used[address]))
        if port is None:
            logger.warning("job %s not placed: every rendezvous port of TRAINHUB_RENDEZVOUS_PORTS (%s) is taken "
                           "on %s", job.pk, settings.TRAINHUB_RENDEZVOUS_PORTS, sorted(mine))
            continue
        ports[job.pk] = port
        for address in mine:
            used[address].add(port)
    return ports


def jobs_mark_flex_waiting(*, pks: list[int], now: dt.datetime) -> int:
    """FLEX_START jobs that cannot start yet wait in PENDING (waiting for Dynamic Workload
    Scheduler capacity); moved in one transaction, and only those still QUEUED."""
    if not pks:
        return 0
    states.check_transition(states.QUEUED, states.PENDING)
    with transaction.atomic():
        moved = list(CustomJob.objects.select_for_update().filter(pk__in=pks, state=states.QUEUED)
                     .values_list("pk", flat=True))
        CustomJob.objects.filter(pk__in=moved).update(state=states.PENDING, update_time=now)
        JobEvent.objects.bulk_create(
            JobEvent(job_id=pk, time=now, state=states.PENDING,
                     message="Waiting until every requested GPU is free at once (FLEX_START).")
            for pk in moved)
    return len(moved)


def job_fail(*, job: CustomJob, now: dt.datetime, code: int, message: str) -> None:
    with transaction.atomic():
        job = CustomJob.objects.select_for_update().get(pk=job.pk)
        if job.state in states.TERMINAL:
            return
        _stop_active(job)
        _transition(job, states.FAILED, now, message, error={"code": code, "message": message})
    request_pass()


def job_requeue(*, job: CustomJob, now: dt.datetime, message: str, retry: bool = False) -> None:
    """Put a running job back in the queue (preemption, a lost worker with restartJobOnWorkerRestart);
    ``retry``: Vertex's job retry after a replica failed, counted in ``retry_count`` (see jobs.retries)."""
    with transaction.atomic():
        job = CustomJob.objects.select_for_update().get(pk=job.pk)
        if job.state in states.TERMINAL or job.state == states.CANCELLING:
            return
        _stop_active(job, active=False, state=states.REPLICA_EXITED, ended_at=now)
        job.restart_count += 1
        job.retry_count += int(retry)
        job.save(update_fields=["restart_count", "retry_count"])
        _transition(job, states.QUEUED, now, message)
        transaction.on_commit(lambda: remember_pending([job]))
    request_pass()


def replica_started(*, replica: Replica, now: dt.datetime) -> None:
    with transaction.atomic():
        job = CustomJob.objects.select_for_update().get(pk=replica.job_id)
        Replica.objects.filter(pk=replica.pk).update(state=states.REPLICA_RUNNING, started_at=now)
        waiting = job.replicas.filter(active=True, state=states.REPLICA_ASSIGNED).exists()
        if not waiting and job.state == states.PENDING:
            _transition(job, states.RUNNING, now, "Every replica is running.")


def _stop_active(job: CustomJob, exclude: Replica | None = None, **changes) -> None:
    """Ask the agents of the job's active replicas (but ``exclude``) to stop them, and wake those agents."""
    replicas = job.replicas.filter(active=True)
    if exclude is not None:
        replicas = replicas.exclude(pk=exclude.pk)
    nodes_wake(replicas.values_list("node_id", flat=True))
    replicas.update(stop_requested=True, **changes)


def _stop_others(job: CustomJob, replica: Replica) -> None:
    _stop_active(job, exclude=replica)


def replica_exited(*, replica: Replica, exit_code: int | None, now: dt.datetime, lost_reason: str = "",
                   start_error: str = "") -> None:
    """A replica ended: free its node, then decide the job. ``start_error``: it never started (its
    image could not be pulled), and the job's error says why.

    Vertex rules: the job succeeds when the primary replica (workerpool0-0) exits 0, and then the
    other workers are shut down; a replica exiting non-zero is restarted on its node, the job
    retried, or the job failed, as jobs.retries decides. A replica the control plane asked to
    stop is not judged.
    """
    with transaction.atomic():
        job = CustomJob.objects.select_for_update().get(pk=replica.job_id)
        replica = Replica.objects.select_for_update().get(pk=replica.pk)
        if replica.state == states.REPLICA_EXITED:
            return
        replica.state = states.REPLICA_EXITED
        replica.active = False
        replica.exit_code = exit_code
        replica.ended_at = now
        replica.save(update_fields=["state", "active", "exit_code", "ended_at"])
        task = replica.task_name
        if lost_reason:
            _event(job, now, f"Replica {task} lost: {lost_reason}")
        else:
            _event(job, now, f"Replica {task} exited with status {exit_code}.")
        others_active = job.replicas.filter(active=True).exists()
        scheduling = job.spec["jobSpec"]["scheduling"]
        if job.state == states.CANCELLING:
            if not others_active:
                _transition(job, states.CANCELLED, now, "Every replica stopped; job cancelled.",
                            error={"code": CODE_CANCELLED, "message": "CANCELED"})
        elif job.state in states.TERMINAL or replica.stop_requested:
            pass
        elif lost_reason:
            restart = scheduling.get("restartJobOnWorkerRestart") and not scheduling.get("disableRetries")
            if restart and job.retry_count < retries.MAX_JOB_RETRIES:
                transaction.on_commit(lambda: job_requeue(
                    job=job, now=now, retry=True, message=f"Restarting the job: replica {task} lost ({lost_reason})."))
            else:
                _stop_others(job, replica)
                message = f"The replica {task} was lost: {lost_reason}."
                _transition(job, states.FAILED, now, message, error={"code": CODE_UNAVAILABLE, "message": message})
        elif exit_code != 0 and start_error:  # an image that cannot be pulled will not be pulled on a retry
            _stop_others(job, replica)
            message = f"The replica {task} could not start: {start_error}"
            _transition(job, states.FAILED, now, message, error={"code": CODE_INVALID_ARGUMENT, "message": message})
        elif exit_code != 0:
            _replica_failed(job, replica, exit_code, now)
        elif (replica.pool_index, replica.replica_index) == PRIMARY:
            if others_active:
                _stop_others(job, replica)
            if job.state == states.PENDING:
                _transition(job, states.RUNNING, now, "Every replica is running.")
            _transition(job, states.SUCCEEDED, now, "The primary replica workerpool0-0 exited with status 0.")
    request_pass()


def _replica_failed(job: CustomJob, replica: Replica, exit_code: int, now: dt.datetime) -> None:
    """Restart the worker on its node, retry the job, or fail it (jobs.retries.decide)."""
    scheduling = job.spec["jobSpec"]["scheduling"]
    decision = retries.decide(task=replica.task_name, exit_code=exit_code, worker_restarts=replica.restart,
                              job_retries=job.retry_count,
                              disable_retries=bool(scheduling.get("disableRetries")),
                              restart_job_on_worker_restart=bool(scheduling.get("restartJobOnWorkerRestart")))
    if decision.action == retries.RESTART_WORKER and replica.node_id is not None:
        _event(job, now, decision.message)
        replica_restart(replica=replica, now=now)
    elif decision.action in (retries.RESTART_WORKER, retries.RETRY_JOB):
        job_requeue(job=job, now=now, message=decision.message, retry=True)
    else:
        _stop_others(job, replica)
        _transition(job, states.FAILED, now, decision.message,
                    error={"code": CODE_INVALID_ARGUMENT, "message": decision.message})


def replica_restart(*, replica: Replica, now: dt.datetime) -> Replica:
    """Start an ended replica again on its node: a new row (its next ``restart``) with the same
    place in the gang, GPUs and ports. The node's agent starts it as it starts any listed replica."""
    restarted = Replica.objects.create(
        job_id=replica.job_id, pool_index=replica.pool_index, replica_index=replica.replica_index,
        node_id=replica.node_id, gpu_indices=replica.gpu_indices, attempt=replica.attempt,
        restart=replica.restart + 1, master_port=replica.master_port, cluster_port=replica.cluster_port,
        assigned_at=now)
    nodes_wake([replica.node_id])
    return restarted


def job_outputs_record(*, job: CustomJob, hp_metrics: list[dict], model_artifacts: dict) -> None:
    """Store what the primary replica left behind: its hypertune reports and model files.

    The agent calls this before it reports the primary's exit, so whoever reacts to the job's
    end (a tuning study, a pipeline) finds the outputs already stored.
    """
    CustomJob.objects.filter(pk=job.pk).update(hp_metrics=hp_metrics, model_artifacts=model_artifacts)


def replica_logs_append(*, replica: Replica, lines: Iterable[tuple[str, dt.datetime, str]]) -> int:
    """Store (stream, time, text) lines of one replica; returns how many were stored.

    A replica's log keeps its first TRAINHUB_REPLICA_LOG_MAX_LINES lines, then one truncation
    marker; the lines after it are counted (Replica.log_lines) but not stored, and accepted all
    the same, so the agent is never stuck on a chunk.
    """
    lines = list(lines)
    if not lines:
        return 0
    limit = settings.TRAINHUB_REPLICA_LOG_MAX_LINES
    with transaction.atomic():
        received = Replica.objects.select_for_update().filter(pk=replica.pk).values_list("log_lines", flat=True).get()
        Replica.objects.filter(pk=replica.pk).update(log_lines=received + len(lines))
        if received > limit:
            return 0
        kept = lines[:limit - received]
        rows = [LogLine(replica=replica, job_id=replica.job_id, stream=stream, time=time, text=text[:65536])
                for stream, time, text in kept]
        if len(kept) < len(lines):
            rows.append(LogLine(replica=replica, job_id=replica.job_id, stream="stderr", time=lines[len(kept)][1],
                                text=truncation_marker(limit)))
        LogLine.objects.bulk_create(rows)
    return len(rows)


def truncation_marker(limit: int) -> str:
    return (f"[trainhub] Log truncated: this replica's log keeps its first {limit:,} lines "
            "(TRAINHUB_REPLICA_LOG_MAX_LINES); later lines are counted, not stored.")


def jobs_enforce_timeouts(*, now: dt.datetime) -> int:
    """Fail RUNNING jobs whose scheduling.timeout has passed (Vertex: DEADLINE_EXCEEDED)."""
    count = 0
    for job in CustomJob.objects.filter(state=states.RUNNING, start_time__isnull=False).only(
            "pk", "start_time", "timeout_seconds", "state"):
        if job.start_time + dt.timedelta(seconds=job.timeout_seconds) <= now:
            job_fail(job=job, now=now, code=CODE_DEADLINE_EXCEEDED,
                     message=f"Job timed out: it ran longer than scheduling.timeout ({job.timeout_seconds}s).")
            count += 1
    return count
