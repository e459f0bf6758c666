"""What every Slurm page shares: the per-user cluster lookup and the cluster's page links."""

from __future__ import annotations

from django.http import HttpRequest
from django.urls import reverse

from trainhub.slurm.models import SlurmCluster
from trainhub.slurm.selectors import cluster_get_for_user, is_cluster_admin, simulated_notice

GET = "aiplatform.slurmClusters.get"
ADMIN = "aiplatform.slurmClusters.update"
PAGES = ("detail", "queue", "priority", "fairshare", "accounting", "nodes", "sacctmgr", "accounts", "submit")


def cluster_for(request: HttpRequest, project: str, location: str, cluster: str, permission: str = GET) -> SlurmCluster:
    return cluster_get_for_user(user=request.user, project_id=project, location=location, cluster_id=cluster,
                                permission=permission)


def cluster_kwargs(cluster: SlurmCluster) -> dict[str, str]:
    return {"project": cluster.project.project_id, "location": cluster.location, "cluster": cluster.cluster_id}


def cluster_context(request: HttpRequest, cluster: SlurmCluster, page: str) -> dict:
    """The cluster, its tabs and whether the viewer administers it (every cluster page's header)."""
    kwargs = cluster_kwargs(cluster)
    return {"cluster": cluster, "page": page, "is_admin": is_cluster_admin(user=request.user, cluster=cluster),
            "tabs": {name: reverse(f"slurm:{name}", kwargs=kwargs) for name in PAGES},
            "simulated": simulated_notice(cluster=cluster)}


def job_url(cluster: SlurmCluster, job_id: int, name: str = "job") -> str:
    return reverse(f"slurm:{name}", kwargs={**cluster_kwargs(cluster), "slurm_job_id": job_id})
