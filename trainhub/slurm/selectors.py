"""Reads for the Slurm API and pages. Every cluster and job lookup also checks the user's permission.

A cluster of a project the user is not a member of does not exist for them (404). Admin
operations (accounts, QOS, partitions, slurm.conf, prolog/epilog, other users' jobs) need the
project permission aiplatform.slurmClusters.update *and* a platform administrator (is_staff).
"""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import Count, Prefetch, Q, QuerySet

from trainhub.common.errors import ApiError
from trainhub.iam.models import Project
from trainhub.iam.selectors import project_get_for_user, user_has_permission
from trainhub.inventory.models import Node
from trainhub.slurm.models import ClusterAuditEntry, JobEvent, JobLogLine, JobNode, JobRun, Partition, SlurmCluster, SlurmJob

ADMIN_PERMISSION = "aiplatform.slurmClusters.update"


def cluster_get_for_user(*, user: AbstractBaseUser, project_id: str, location: str, cluster_id: str,
                         permission: str) -> SlurmCluster:
    project = project_get_for_user(user=user, project_id=project_id, permission=permission)
    if permission in ("aiplatform.slurmClusters.create", "aiplatform.slurmClusters.delete", ADMIN_PERMISSION):
        require_platform_admin(user=user, project=project)
    cluster = (SlurmCluster.objects.select_related("project", "login_pool")
               .filter(project=project, location=location, cluster_id=cluster_id).first())
    if cluster is None:
        raise ApiError(404, f"SlurmCluster projects/{project_id}/locations/{location}/slurmClusters/{cluster_id} "
                            "not found.")
    return cluster


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


def cluster_audit(*, cluster: SlurmCluster, limit: int = 50) -> list[ClusterAuditEntry]:
    return list(cluster.audit.order_by("-time", "-id")[:limit])


def job_get_for_user(*, user: AbstractBaseUser, project_id: str, location: str, cluster_id: str, job_id: str,
                     permission: str) -> SlurmJob:
    cluster = cluster_get_for_user(user=user, project_id=project_id, location=location, cluster_id=cluster_id,
                                   permission=permission)
    job = (SlurmJob.objects.select_related("cluster__project").filter(cluster=cluster, job_id=job_id).first()
           if str(job_id).isdigit() else None)
    if job is None:
        raise ApiError(404, f"slurm_load_jobs error: Invalid job id specified ({job_id}).")
    return job


def job_runs(*, job: SlurmJob) -> list[JobRun]:
    return list(job.runs.order_by("index"))


def job_nodes(*, job: SlurmJob) -> list[JobNode]:
    return list(JobNode.objects.filter(job=job, run_index=job.restart_count).select_related("node")
                .order_by("-batch_host", "node__name"))


def job_events(*, job: SlurmJob) -> list[JobEvent]:
    return list(job.events.order_by("time", "id"))


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
