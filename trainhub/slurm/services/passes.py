"""One scheduler pass of one cluster, as slurmctld's threads would do it:

1. usage decay and accrual (the decay thread, services.usage);
2. jobs on a DOWN node fail NODE_FAIL and are requeued; jobs past their time limit are stopped
   (TIMEOUT);
3. pending jobs that became eligible start accruing age (accrue_time);
4. priorities: every pending job's when PriorityCalcPeriod has passed, else only new and
   requeued jobs' (multifactor, with fair-share from the association tree);
5. scheduling: main + backfill + preemption (trainhub.slurm.scheduler); allocations written in
   one transaction, pending reasons and --start estimates stored.

Every pass records its time and outcome (or its error) on the cluster, shown on the cluster page.
"""

from __future__ import annotations

import datetime as dt
import logging
from dataclasses import asdict, dataclass

from django.db import transaction
from django.db.models import F

from trainhub.common.wire import format_timestamp
from trainhub.inventory.models import NodeState
from trainhub.slurm import snapshot
from trainhub.slurm.models import Hold, JobNode, JobState, NodePhase, SlurmCluster, SlurmJob
from trainhub.slurm.priority import compute_priority
from trainhub.slurm.services import lifecycle
from trainhub.slurm.services.usage import usage_pass

logger = logging.getLogger(__name__)


@dataclass
class PassSummary:
    pending: int = 0
    running: int = 0
    started: int = 0
    preempted: int = 0
    timed_out: int = 0
    node_failed: int = 0
    priorities_computed: int = 0


def cluster_pass_recorded(*, cluster_pk: int, now: dt.datetime) -> PassSummary | None:
    """Run a pass and record its outcome on the cluster; an error is recorded, not raised."""
    cluster = SlurmCluster.objects.filter(pk=cluster_pk).first()
    if cluster is None:
        return None
    try:
        summary = cluster_pass(cluster=cluster, now=now)
        record = {"time": format_timestamp(now), "ok": True, **asdict(summary)}
    except Exception as exc:  # noqa: BLE001 - a failed pass is shown on the cluster page, then retried by beat
        logger.exception("scheduler pass of Slurm cluster %s failed", cluster.cluster_id)
        summary = None
        record = {"time": format_timestamp(now), "ok": False, "error": f"{type(exc).__name__}: {exc}"}
    SlurmCluster.objects.filter(pk=cluster_pk).update(last_pass_time=now, last_pass_summary=record)
    return summary


def _fail_jobs_on_down_nodes(cluster: SlurmCluster, now: dt.datetime) -> int:
    """slurmctld requeues a batch job whose node went DOWN (NODE_FAIL), or ends it NODE_FAIL."""
    lost = (JobNode.objects.filter(job__cluster=cluster, job__state=JobState.RUNNING, node__state=NodeState.DOWN)
            .exclude(phase__in=[NodePhase.EPILOG, NodePhase.DONE]).select_related("node"))
    count = 0
    for job_node in lost:
        lifecycle.job_node_lost(job_node=job_node, now=now, reason=f"node {job_node.node.name} is down")
        count += 1
    return count


def _stop_timed_out(cluster: SlurmCluster, state: snapshot.ClusterState, now: dt.datetime) -> int:
    grace = dt.timedelta(minutes=state.config.over_time_limit)
    count = 0
    for job in SlurmJob.objects.filter(cluster=cluster, state=JobState.RUNNING, ending_state="",
                                       time_limit__isnull=False, start_time__isnull=False):
        if job.start_time + dt.timedelta(minutes=job.time_limit) + grace <= now:
            with transaction.atomic():
                job = SlurmJob.objects.select_for_update().get(pk=job.pk)
                if job.state == JobState.RUNNING and not job.ending_state:
                    lifecycle.job_stop(job=job, ending_state=JobState.TIMEOUT, now=now,
                                       desc="DUE TO TIME LIMIT")
                    count += 1
    return count


def _start_accruing(cluster: SlurmCluster, now: dt.datetime) -> None:
    """A pending job accrues age from the moment it is eligible: not held, begin time reached."""
    SlurmJob.objects.filter(cluster=cluster, state=JobState.PENDING, hold=Hold.NONE, accrue_time__isnull=True,
                            begin_time__lte=now).update(accrue_time=F("begin_time"))


def _recompute_priorities(cluster: SlurmCluster, state: snapshot.ClusterState, now: dt.datetime) -> int:
    """Every pending job's priority each PriorityCalcPeriod (the decay thread); in between only
    jobs that have none yet (new, requeued, released, reniced)."""
    due = (cluster.last_priority_time is None
           or (now - cluster.last_priority_time).total_seconds() >= state.config.priority_calc_period)
    jobs = SlurmJob.objects.filter(cluster=cluster, state=JobState.PENDING)
    if not due:
        jobs = jobs.filter(priority_factors={})
    jobs = list(jobs)
    if not jobs:
        return 0
    shares = snapshot.compute_fairshare(state)
    context = snapshot.priority_context(state)
    for job in jobs:
        breakdown = compute_priority(snapshot.priority_job(job, state, shares), context, now)
        job.priority = breakdown.priority
        job.priority_factors = snapshot.breakdown_json(breakdown, now)
    SlurmJob.objects.bulk_update(jobs, ["priority", "priority_factors"], batch_size=1000)
    if due:
        SlurmCluster.objects.filter(pk=cluster.pk).update(last_priority_time=now)
    return len(jobs)


def cluster_pass(*, cluster: SlurmCluster, now: dt.datetime) -> PassSummary:
    summary = PassSummary()
    state = snapshot.load_cluster(cluster, now=now)
    usage_pass(cluster=cluster, config=state.config, now=now)
    summary.node_failed = _fail_jobs_on_down_nodes(cluster, now)
    summary.timed_out = _stop_timed_out(cluster, state, now)
    _start_accruing(cluster, now)
    state = snapshot.load_cluster(cluster, now=now)
    summary.priorities_computed = _recompute_priorities(cluster, state, now)
    summary.pending = SlurmJob.objects.filter(cluster=cluster, state=JobState.PENDING).count()
    summary.running = SlurmJob.objects.filter(cluster=cluster, state=JobState.RUNNING).count()
    return summary
