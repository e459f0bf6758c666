"""Reads for the Slurm API and pages. Every cluster and job lookup also checks the user's permission.

A cluster of a project the user is not a member of does not exist for them (404). Admin
operations (accounts, QOS, partitions, slurm.conf, prolog/epilog, other users' jobs) need the
project permission aiplatform.slurmClusters.update *and* a platform administrator (is_staff).
"""

from __future__ import annotations

import datetime as dt

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import Count, Prefetch, Q, QuerySet
from django.utils import timezone

from trainhub.catalog.machines import NO_ACCELERATOR
from trainhub.slurm.conf import parse_config
from trainhub.common.compiled import CompiledQuery, field_names, instances
from trainhub.common.errors import ApiError
from trainhub.dashboards.sources import CapacityReading, FairShareRow
from trainhub.iam.models import Project
from trainhub.iam.selectors import project_get_for_user, projects_for_user, user_has_permission
from trainhub.inventory.models import Executor, Node, NodePool, NodeState
from trainhub.slurm import arrays, snapshot
from trainhub.slurm.models import (ClusterAuditEntry, GpuAllocation, JobEvent, JobLogLine, JobNode, JobRun, JobState,
                                   JobStep, Partition, SlurmCluster, SlurmJob, StepLogLine, StepNode)
from trainhub.slurm.steps import TIME_LIMIT

ADMIN_PERMISSION = "aiplatform.slurmClusters.update"


def cluster_get_for_user(*, user: AbstractBaseUser, project_id: str, location: str, cluster_id: str,
                         permission: str) -> SlurmCluster:
    project = project_get_for_user(user=user, project_id=project_id, permission=permission)
    if permission in ("aiplatform.slurmClusters.create", "aiplatform.slurmClusters.delete", ADMIN_PERMISSION):
        require_platform_admin(user=user, project=project)
    rows = _CLUSTER.rows(project.pk, location, cluster_id)
    if not rows:
        raise ApiError(404, f"SlurmCluster projects/{project_id}/locations/{location}/slurmClusters/{cluster_id} "
                            "not found.")
    (cluster,) = instances(rows[0], SlurmCluster)
    cluster.project = project
    cluster.login_pool = (instances(rows[0][len(field_names(SlurmCluster)):], NodePool)[0]
                          if cluster.login_pool_id else None)
    return cluster


# Every Slurm API request and page looks its cluster up (with its login pool, which the cluster's
# JSON names): compiled once (trainhub.common.compiled), not built by the ORM each time.
_CLUSTER = CompiledQuery(
    lambda project_pk, location, cluster_id: SlurmCluster.objects.filter(
        project_id=project_pk, location=location, cluster_id=cluster_id)
    .values_list(*field_names(SlurmCluster), *(f"login_pool__{name}" for name in field_names(NodePool)))[:1],
    918273645, "\x00location", "\x00cluster")


def require_platform_admin(*, user: AbstractBaseUser, project: Project) -> None:
    if not user.is_staff:
        raise ApiError(403, f"Permission '{ADMIN_PERMISSION}' denied on resource 'projects/{project.project_id}': "
                            "Slurm cluster administration needs a platform administrator.")


def is_cluster_admin(*, user: AbstractBaseUser, cluster: SlurmCluster) -> bool:
    """Slurm's AdminLevel=Administrator: may manage accounting and act on anyone's jobs."""
    return bool(user.is_staff) and user_has_permission(user=user, project=cluster.project,
                                                       permission=ADMIN_PERMISSION)


def clusters_list(*, project: Project, location: str) -> QuerySet[SlurmCluster]:
    return (SlurmCluster.objects.filter(project=project, location=location).select_related("project", "login_pool")
            .prefetch_related(Prefetch("partitions", queryset=Partition.objects.prefetch_related("node_pools")))
            .annotate(job_count=Count("jobs", filter=Q(jobs__state__in=["PENDING", "RUNNING"])))
            .order_by("cluster_id"))


def cluster_partitions(*, cluster: SlurmCluster) -> list[Partition]:
    return list(cluster.partitions.prefetch_related("node_pools").order_by("position", "name"))


def cluster_nodes(*, cluster: SlurmCluster) -> list[Node]:
    """The cluster's compute and login nodes, by name."""
    return list(Node.objects.filter(dedicated_to=cluster.owner_key).select_related("pool").order_by("name"))


def cluster_node(*, cluster: SlurmCluster, name: str) -> Node:
    """One of the cluster's nodes by name; 404 when it has none of that name."""
    node = Node.objects.filter(dedicated_to=cluster.owner_key, name=name).select_related("pool").first()
    if node is None:
        raise ApiError(404, f"Node {name} is not a node of cluster {cluster.cluster_id}.")
    return node


def simulated_owner_keys() -> set[str]:
    """The owner keys (SlurmCluster.owner_key) of clusters with simulated nodes (the cluster list)."""
    return set(Node.objects.filter(pool__executor=Executor.SIMULATED).exclude(dedicated_to="")
               .values_list("dedicated_to", flat=True).distinct())


def simulated_notice(*, cluster: SlurmCluster) -> str:
    """What every Slurm page and sbatch say of a cluster with simulated nodes (no agent runs their
    jobs); "" when none is. At most one query (snapshot.cluster_pools)."""
    pools = snapshot.cluster_pools(cluster)
    simulated = sorted(name for name, executor in pools.items() if executor == Executor.SIMULATED)
    if not simulated:
        return ""
    every = len(simulated) == len(pools)
    return (f"{'Simulated' if every else 'Partly simulated'} cluster: the nodes of pool(s) {', '.join(simulated)} "
            "are simulated, so jobs placed there do not really run.")


def cluster_audit(*, cluster: SlurmCluster, limit: int = 50) -> list[ClusterAuditEntry]:
    return list(cluster.audit.order_by("-time", "-id")[:limit])


def job_get_for_user(*, user: AbstractBaseUser, project_id: str, location: str, cluster_id: str, job_id: str,
                     permission: str) -> SlurmJob:
    cluster = cluster_get_for_user(user=user, project_id=project_id, location=location, cluster_id=cluster_id,
                                   permission=permission)
    jobs = SlurmJob.objects.select_related("cluster__project").filter(cluster=cluster)
    array_id, task = arrays.task_of(job_id)
    if task is not None:
        # A_T: the task's own record once it is split off, else the array's record while T pends.
        job = (jobs.filter(array_job_id=array_id, array_task_id=task).first()
               or next((job for job in jobs.filter(array_job_id=array_id).exclude(array_pending="")
                        if task in arrays.expand(job.array_pending)), None))
    else:
        job = jobs.filter(job_id=job_id).first() if str(job_id).isdigit() else None
    if job is None:
        raise ApiError(404, f"slurm_load_jobs error: Invalid job id specified ({job_id}).")
    return job


def pending_task(job: SlurmJob, job_id: str) -> int | None:
    """The task ``A_T`` names when ``job`` is its array's record and T still pends there, else None."""
    _, task = arrays.task_of(job_id)
    return task if task is not None and job.array_pending else None


def job_runs(*, job: SlurmJob) -> list[JobRun]:
    return list(job.runs.order_by("index"))


def job_nodes(*, job: SlurmJob) -> list[JobNode]:
    return list(JobNode.objects.filter(job=job, run_index=job.restart_count).select_related("node")
                .order_by("-batch_host", "node__name"))


def job_events(*, job: SlurmJob) -> list[JobEvent]:
    return list(job.events.order_by("time", "id"))


def steps_ended(*, job: SlurmJob, run_index: int) -> int:
    """How many steps of a job's run have ended: a waiting srun tries again after each (22.05's
    "step creation still disabled" line when it still does not fit)."""
    return JobStep.objects.filter(job=job, run_index=run_index).exclude(state="RUNNING").count()


def kill_wait(*, job: SlurmJob) -> int:
    """The job's cluster's KillWait (seconds): srun says it waits that and 2 more for an aborted step."""
    return parse_config(job.cluster.config).kill_wait


def step_layout(*, step: JobStep) -> list[list]:
    """The step's nodes in SLURM_NODEID order, each with its tasks: [[node, [task, ...]], ...]."""
    return [[name, list(tasks)] for name, tasks in StepNode.objects.filter(step=step).order_by("node_index")
            .values_list("job_node__node__name", "task_ids")]


def step_output(*, step: JobStep, after: int, limit: int) -> dict:
    """What srun reads of its step: the tasks' lines after line id ``after``, the step's state and,
    once it ended, the tasks that failed ([task, node, exit code, signal], in task order), how many
    nodes have not reported their tasks' exits yet (the job ended under the step: they are being
    stopped), when it ended (``endTime``, as slurmstepd's ``CANCELLED AT`` prints it), its first node,
    and ``cause``: slurmstepd's words after the time for a step its job's time limit ended
    (``DUE TO TIME LIMIT``, fixtures/22.05/srun-timeout/srun-2.err), else none."""
    lines = list(StepLogLine.objects.filter(step=step, id__gt=after).order_by("id")
                 .values_list("id", "task", "stream", "text")[:limit])
    failed, first_node, pending, cause = [], None, 0, None
    if step.state != "RUNNING":
        job = SlurmJob.objects.only("state", "ending_state").get(pk=step.job_id)
        cause = TIME_LIMIT if JobState.TIMEOUT in (job.state, job.ending_state) else None
        for name, exits in (StepNode.objects.filter(step=step).order_by("node_index")
                            .values_list("job_node__node__name", "exits")):
            first_node = first_node or name
            pending += exits is None
            failed += [[task, name, code, signal] for task, code, signal in exits or [] if code or signal]
    return {"state": step.state, "exitCode": step.exit_code, "signal": step.exit_signal, "label": step.label,
            "numTasks": step.num_tasks, "lines": [[task, stream, text] for _, task, stream, text in lines],
            "next": lines[-1][0] if lines else after, "failed": sorted(failed), "firstNode": first_node,
            "pendingNodes": pending,
            "endTime": step.end_time.strftime("%Y-%m-%dT%H:%M:%S") if step.end_time else None,
            "cause": cause}


def job_log(*, job: SlurmJob, after: int = 0, limit: int = 1000) -> list[JobLogLine]:
    return list(JobLogLine.objects.filter(job=job, id__gt=after).order_by("id")[:limit])


def jobs_page(*, cluster: SlurmCluster, state: str = "", user: str = "", partition: str = "", after: int = 0,
              size: int = 100) -> list[SlurmJob]:
    """Jobs by job id after ``after`` (keyset pages), optionally one state / user / partition."""
    jobs = SlurmJob.objects.filter(cluster=cluster, job_id__gt=after)
    if state:
        jobs = jobs.filter(state=state.upper())
    if user:
        jobs = jobs.filter(user_name=user)
    if partition:
        jobs = jobs.filter(partition=partition)
    return list(jobs.order_by("job_id")[:size])


def job_queue_position(*, job: SlurmJob) -> int | None:
    """1 + the pending jobs of its partition that Slurm evaluates first (higher priority, then
    earlier submission, then lower job id); None when the job is not pending."""
    if job.state != "PENDING":
        return None
    ahead = SlurmJob.objects.filter(cluster_id=job.cluster_id, partition=job.partition, state="PENDING").filter(
        Q(priority__gt=job.priority)
        | Q(priority=job.priority, submit_time__lt=job.submit_time)
        | Q(priority=job.priority, submit_time=job.submit_time, job_id__lt=job.job_id))
    return ahead.count() + 1


# --- the dashboards' Slurm sources (registered in SlurmConfig.ready) ------------------------------

CAPACITY_SOURCE = "cluster"


def _capacity_scope(cluster: SlurmCluster) -> str:
    return f"{cluster.project.project_id}/{cluster.location}/{cluster.cluster_id}"


def cluster_capacity(now: dt.datetime) -> list[CapacityReading]:
    """Each cluster's GPUs per GPU type: of its nodes that are not down (drained nodes still run
    their jobs, as sinfo's "drng"), and those jobs hold (GPU allocations). Three queries."""
    clusters = {cluster.owner_key: cluster for cluster in SlurmCluster.objects.select_related("project")}
    busy = dict(GpuAllocation.objects.filter(active=True, node__dedicated_to__in=list(clusters)).values("node_id")
                .annotate(gpus=Count("id")).values_list("node_id", "gpus"))
    totals: dict[tuple[str, str], list[int]] = {}
    for node in Node.objects.filter(dedicated_to__in=list(clusters)).select_related("pool"):
        if node.pool.accelerator_type == NO_ACCELERATOR or not node.pool.accelerator_count:
            continue  # the login node
        counts = totals.setdefault((node.dedicated_to, node.pool.accelerator_type), [0, 0])
        if node.state != NodeState.DOWN:
            counts[0] += node.pool.accelerator_count
        counts[1] += busy.get(node.pk, 0)
    return [CapacityReading(CAPACITY_SOURCE, _capacity_scope(clusters[owner]), accelerator_type, total, allocated)
            for (owner, accelerator_type), (total, allocated) in sorted(totals.items())]


def _visible_clusters(user: AbstractBaseUser) -> QuerySet[SlurmCluster]:
    return SlurmCluster.objects.filter(project__in=projects_for_user(user=user)).select_related("project")


def capacity_scopes_for_user(user: AbstractBaseUser) -> set[str]:
    """The capacity scopes of the clusters of the user's projects."""
    return {_capacity_scope(cluster) for cluster in _visible_clusters(user)}


def fairshare_rows_for_user(user: AbstractBaseUser) -> list[FairShareRow]:
    """sshare for each cluster of the user's projects: every account, and the user's own
    associations (sshare without -a), in sshare's order; the root row left out."""
    now = timezone.now()
    rows = []
    for cluster in _visible_clusters(user):
        for row in snapshot.compute_fairshare(snapshot.load_cluster(cluster, now=now)).rows:
            if row.is_root or (row.user is not None and row.user != user.get_username()):
                continue
            rows.append(FairShareRow(cluster.cluster_id, row.account, row.norm_shares, row.effective_usage,
                                     row.fairshare, row.user or "", row.raw_shares))
    return rows
