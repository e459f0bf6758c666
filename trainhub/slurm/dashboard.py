"""Slurm's jobs on the dashboards, counted with the CustomJobs (registered in SlurmConfig.ready):
pending and running jobs per GPU type now, the starts and ends the sampler records, and the
pending jobs of a user's projects with Slurm's reason. A job's GPU type is that of its
partition's GPU node pools; its GPUs are nodes × GPUs per node."""

from __future__ import annotations

import datetime as dt

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import Count, F, Min, Q, Sum

from trainhub.catalog.machines import NO_ACCELERATOR
from trainhub.catalog.pricing import SLURM, Cost, cost_of
from trainhub.dashboards.sources import ActiveGroup, JobSource, JobSpan, WaitingRow
from trainhub.iam.models import Project
from trainhub.iam.selectors import projects_for_user
from trainhub.jobs import states
from trainhub.jobs.costs import EpochSeconds, ProjectCost, prices
from trainhub.slurm.models import ACTIVE_STATES, JobState, Partition, SlurmJob
from trainhub.slurm.selectors import job_queue_position
from trainhub.slurm.views.common import job_url

#: Slurm's final states as the CustomJob states the charts count.
FINAL_STATE = {JobState.COMPLETED: states.SUCCEEDED, JobState.CANCELLED: states.CANCELLED,
               JobState.PREEMPTED: states.CANCELLED, JobState.FAILED: states.FAILED,
               JobState.TIMEOUT: states.FAILED, JobState.NODE_FAIL: states.FAILED}


def partition_gpu_types() -> dict[tuple[int, str], str]:
    """(cluster pk, partition name) -> the GPU type of its nodes (NO_ACCELERATOR: CPU only). Two queries."""
    kinds: dict[tuple[int, str], str] = {}
    for partition in Partition.objects.prefetch_related("node_pools"):
        gpu_pools = [pool.accelerator_type for pool in partition.node_pools.all()
                     if pool.accelerator_type != NO_ACCELERATOR and pool.accelerator_count]
        kinds[(partition.cluster_id, partition.name)] = gpu_pools[0] if gpu_pools else NO_ACCELERATOR
    return kinds


def _kind(kinds: dict[tuple[int, str], str], cluster: int, partition: str, gpus_per_node: int) -> str:
    return kinds.get((cluster, partition), NO_ACCELERATOR) if gpus_per_node else NO_ACCELERATOR


def active_groups() -> list[ActiveGroup]:
    kinds = partition_gpu_types()
    rows = (SlurmJob.objects.filter(state__in=ACTIVE_STATES).values("cluster_id", "partition", "state")
            .annotate(jobs=Count("pk"), gpus=Sum(F("num_nodes") * F("gpus_per_node")), any_gpus=Sum("gpus_per_node"),
                      oldest=Min("submit_time")).order_by())
    groups = []
    for row in rows:
        running = row["state"] == JobState.RUNNING
        groups.append(ActiveGroup(states.RUNNING if running else states.PENDING,
                                  _kind(kinds, row["cluster_id"], row["partition"], row["any_gpus"] or 0),
                                  running, row["jobs"], row["gpus"] or 0, row["oldest"]))
    return groups


def started(since: dt.datetime, until: dt.datetime) -> list[tuple[str, float]]:
    kinds = partition_gpu_types()
    rows = SlurmJob.objects.filter(start_time__gte=since, start_time__lt=until).values_list(
        "cluster_id", "partition", "gpus_per_node", "submit_time", "start_time")
    return [(_kind(kinds, cluster, partition, gpus), (began - submitted).total_seconds())
            for cluster, partition, gpus, submitted, began in rows]


def ended(since: dt.datetime, until: dt.datetime) -> list[tuple[str, str, int]]:
    kinds = partition_gpu_types()
    rows = (SlurmJob.objects.filter(end_time__gte=since, end_time__lt=until, state__in=list(FINAL_STATE))
            .values("cluster_id", "partition", "state").annotate(jobs=Count("pk"), any_gpus=Sum("gpus_per_node"))
            .order_by())
    return [(_kind(kinds, row["cluster_id"], row["partition"], row["any_gpus"] or 0), FINAL_STATE[row["state"]],
             row["jobs"]) for row in rows]


def waiting(user: AbstractBaseUser, limit: int, project: Project | None = None) -> list[WaitingRow]:
    kinds = partition_gpu_types()
    projects = [project] if project is not None else projects_for_user(user=user)
    jobs = (SlurmJob.objects.filter(state=JobState.PENDING, cluster__project__in=projects)
            .select_related("cluster__project").order_by("submit_time", "job_id")[:limit])
    rows = []
    for job in jobs:
        reason = job.reason_in_words + (f" ({job.state_desc})" if job.state_desc else "")
        rows.append(WaitingRow(
            str(job.job_id), job.name, job.cluster.project.project_id, job.cluster.location,
            f"Slurm {job.cluster.cluster_id} · partition {job.partition}",
            _kind(kinds, job.cluster_id, job.partition, job.gpus_per_node), job.num_nodes * job.gpus_per_node,
            job.submit_time, job_queue_position(job=job), job.expected_start,
            f"Slurm reason: {reason}", job_url(job.cluster, job.job_id)))
    return rows


def spans(project: Project, since: dt.datetime, until: dt.datetime) -> list[JobSpan]:
    kinds = partition_gpu_types()
    rows = (SlurmJob.objects.filter(cluster__project=project, submit_time__lt=until)
            .filter(Q(end_time__isnull=True) | Q(end_time__gte=since))
            .values_list("cluster_id", "partition", "num_nodes", "gpus_per_node", "submit_time", "start_time",
                         "end_time"))
    return [JobSpan(_kind(kinds, cluster, partition, gpus), nodes * gpus, submitted, began, ended)
            for cluster, partition, nodes, gpus, submitted, began, ended in rows]


def job_gpus(job: SlurmJob) -> tuple[str, int]:
    """(GPU type, GPUs) a job asks for: its partition's GPU type, nodes × GPUs per node."""
    return _kind(partition_gpu_types(), job.cluster_id, job.partition, job.gpus_per_node), \
        job.num_nodes * job.gpus_per_node


def job_cost(job: SlurmJob, gpus: tuple[str, int], now: dt.datetime) -> Cost | None:
    """What a job has cost so far: its ``gpus`` (job_gpus: GPU type, count) from its start to its
    end (or now) at the catalog's on-demand price, as the team page counts it
    (catalog.pricing.SLURM); None before it starts."""
    if job.start_time is None:
        return None
    kind, count = gpus
    return cost_of({kind: count}, ((job.end_time or now) - job.start_time).total_seconds(), SLURM, prices())


def project_costs(*, project_ids: list[int], now: dt.datetime) -> list[ProjectCost]:
    """Accrued cost of every Slurm job that has started, per project: its GPUs from its start to its
    end (or ``now``) at the on-demand price (catalog.pricing.SLURM), as the team page and a job's
    page count it. One read, summed by the database: a running job's ``now - start`` is summed as
    GPUs × now - sum(GPUs × start)."""
    kinds = partition_gpu_types()
    gpus = F("num_nodes") * F("gpus_per_node")
    ended = Q(end_time__isnull=False)
    rows = (SlurmJob.objects.filter(cluster__project_id__in=project_ids, start_time__isnull=False, gpus_per_node__gt=0)
            .values("cluster__project__project_id", "cluster_id", "partition")
            .annotate(jobs=Count("pk"),
                      ended_seconds=Sum(gpus * (EpochSeconds("end_time") - EpochSeconds("start_time")), filter=ended),
                      running_gpus=Sum(gpus, filter=~ended), running_starts=Sum(gpus * EpochSeconds("start_time"),
                                                                                filter=~ended))
            .order_by())
    table = prices()
    totals: dict[str, list[float]] = {}
    for row in rows:
        seconds = ((row["ended_seconds"] or 0.0) + (row["running_gpus"] or 0) * now.timestamp()
                   - (row["running_starts"] or 0.0))
        kind = _kind(kinds, row["cluster_id"], row["partition"], 1)
        cost = cost_of({kind: max(0.0, round(seconds, 3))}, 1.0, SLURM, table)  # linear: GPU-seconds as 1 s
        total = totals.setdefault(row["cluster__project__project_id"], [0, 0.0, 0.0])
        total[0] += row["jobs"]
        total[1] += sum(cost.gpu_hours.values())
        total[2] += cost.total
    return [ProjectCost(pid, int(jobs), hours, usd, usd) for pid, (jobs, hours, usd) in sorted(totals.items())]


SLURM_JOBS = JobSource(active=active_groups, started=started, ended=ended, waiting=waiting, spans=spans)
