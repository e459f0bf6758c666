"""Roles and the permission strings they grant, named as Vertex AI names its IAM permissions.

viewer reads, user also submits and stops its jobs, admin holds every permission of the project.
Persistent resources: viewers and users see them and users run jobs on them (customJobs.create,
as Vertex requires); creating, resizing, rebooting and deleting one is for admins, because it
holds nodes for the whole project and bills it while RUNNING (Vertex's docs likewise send you to
roles/aiplatform.admin for these).
"""

from __future__ import annotations

VIEWER = "viewer"
USER = "user"
ADMIN = "admin"
ROLE_CHOICES = [(VIEWER, "Viewer"), (USER, "User"), (ADMIN, "Admin")]

_READ = [
    "aiplatform.customJobs.get",
    "aiplatform.customJobs.list",
    "aiplatform.nodes.list",
    "aiplatform.hyperparameterTuningJobs.get",
    "aiplatform.hyperparameterTuningJobs.list",
    "aiplatform.trainingPipelines.get",
    "aiplatform.trainingPipelines.list",
    "aiplatform.models.get",
    "aiplatform.models.list",
    "aiplatform.persistentResources.get",
    "aiplatform.persistentResources.list",
    "aiplatform.slurmClusters.get",
    "aiplatform.slurmClusters.list",
    "aiplatform.slurmJobs.get",
    "aiplatform.slurmJobs.list",
]
_WRITE = [
    "aiplatform.customJobs.create",
    "aiplatform.customJobs.cancel",
    "aiplatform.customJobs.delete",
    "aiplatform.hyperparameterTuningJobs.create",
    "aiplatform.hyperparameterTuningJobs.cancel",
    "aiplatform.hyperparameterTuningJobs.delete",
    "aiplatform.trainingPipelines.create",
    "aiplatform.trainingPipelines.cancel",
    "aiplatform.trainingPipelines.delete",
    "aiplatform.slurmJobs.create",
    "aiplatform.slurmJobs.cancel",
    "aiplatform.slurmJobs.update",
]
_ADMIN = [
    "aiplatform.projects.manageMembers",
    "aiplatform.persistentResources.create",
    "aiplatform.persistentResources.update",
    "aiplatform.persistentResources.delete",
    # Slurm cluster administration (also needs a platform admin, is_staff): create/delete clusters,
    # slurm.conf, prolog/epilog, partitions, accounts/users/QOS, and other users' jobs.
    "aiplatform.slurmClusters.create",
    "aiplatform.slurmClusters.delete",
    "aiplatform.slurmClusters.update",
]

PERMISSIONS_BY_ROLE: dict[str, frozenset[str]] = {
    VIEWER: frozenset(_READ),
    USER: frozenset(_READ + _WRITE),
    ADMIN: frozenset(_READ + _WRITE + _ADMIN),
}

ALL_PERMISSIONS = PERMISSIONS_BY_ROLE[ADMIN]


def role_grants(role: str, permission: str) -> bool:
    if permission not in ALL_PERMISSIONS:
        raise ValueError(f"unknown permission {permission!r}")
    return permission in PERMISSIONS_BY_ROLE.get(role, frozenset())
