"""Persistent resources (Vertex AI v1 PersistentResource): long-lived pools of dedicated nodes
that CustomJobs target with jobSpec.persistentResourceId to start without provisioning.

A resource holds real inventory nodes: each node it reserves is marked
``Node.dedicated_to = "persistentResources/<pk>"`` (so the serverless pass never places on it) and
belongs to exactly one of its resource pools through a ``PoolNode`` row. A deleted resource keeps
its row (``deleted_time`` set) so its cost and utilisation history stay in the project's books;
the id becomes free for a new resource.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models

from trainhub.catalog.machines import NO_ACCELERATOR
from trainhub.iam.models import Project
from trainhub.inventory.models import Node
from trainhub.jobs.spec import ReplicaShape
from trainhub.resources.spec import PoolSize


class State(models.TextChoices):
    PROVISIONING = "PROVISIONING"
    RUNNING = "RUNNING"
    STOPPING = "STOPPING"
    ERROR = "ERROR"
    REBOOTING = "REBOOTING"
    UPDATING = "UPDATING"


#: States in which the nodes are up and held for the project, so the resource is billed.
BILLABLE_STATES = frozenset({State.RUNNING, State.UPDATING, State.REBOOTING})


def owner_key(resource_pk: int) -> str:
    """The inventory owner key of a resource's nodes (Node.dedicated_to)."""
    return f"persistentResources/{resource_pk}"


class PersistentResource(models.Model):
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="persistent_resources")
    location = models.CharField(max_length=32)
    resource_id = models.CharField(max_length=63)
    display_name = models.CharField(max_length=128, blank=True)
    labels = models.JSONField(default=dict, blank=True)
    #: Accepted fields trainhub stores and echoes but does not act on (network, encryptionSpec, ...).
    options = models.JSONField(default=dict, blank=True)
    state = models.CharField(max_length=16, choices=State.choices, default=State.PROVISIONING)
    #: google.rpc.Status {code, message} while ERROR (or when STOPPING after one).
    error = models.JSONField(null=True, blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    create_time = models.DateTimeField()
    #: First entry into RUNNING.
    start_time = models.DateTimeField(null=True, blank=True)
    update_time = models.DateTimeField()
    #: When the current state began (provisioning and reboot deadlines count from here).
    state_time = models.DateTimeField()
    deleted_time = models.DateTimeField(null=True, blank=True)
    #: Billing: GPU-seconds accrued per accelerator type up to ``billed_until``.
    gpu_seconds = models.JSONField(default=dict, blank=True)
    billed_until = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["project_id", "location", "resource_id"]
        constraints = [
            models.UniqueConstraint(fields=["project", "location", "resource_id"],
                                    condition=models.Q(deleted_time__isnull=True), name="one_live_resource_per_id"),
        ]
        indexes = [models.Index(fields=["project", "location", "-create_time", "-id"], name="resource_list_keyset")]

    def __str__(self) -> str:
        return self.resource_name

    @property
    def resource_name(self) -> str:
        return f"projects/{self.project.project_id}/locations/{self.location}/persistentResources/{self.resource_id}"

    @property
    def owner(self) -> str:
        return owner_key(self.pk)


class ResourcePool(PoolSize, models.Model):
    """One resource pool: identical machines, a fixed size or an autoscaling range."""

    resource = models.ForeignKey(PersistentResource, on_delete=models.CASCADE, related_name="pools")
    position = models.PositiveSmallIntegerField()
    pool_id = models.CharField(max_length=63)
    machine_type = models.CharField(max_length=64)
    accelerator_type = models.CharField(max_length=32, default=NO_ACCELERATOR)
    accelerator_count = models.PositiveSmallIntegerField(default=0)
    disk_type = models.CharField(max_length=32)
    disk_size_gb = models.PositiveIntegerField()
    replica_count = models.PositiveIntegerField()
    min_replica_count = models.PositiveIntegerField(null=True, blank=True)
    max_replica_count = models.PositiveIntegerField(null=True, blank=True)

    class Meta:
        ordering = ["resource_id", "position"]
        constraints = [models.UniqueConstraint(fields=["resource", "pool_id"], name="one_pool_id_per_resource")]

    def __str__(self) -> str:
        return f"{self.resource_id}/{self.pool_id}"

    @property
    def shape(self) -> ReplicaShape:
        return ReplicaShape(self.machine_type, self.accelerator_type, self.accelerator_count)

    @property
    def machine_spec(self) -> dict:
        spec: dict = {"machineType": self.machine_type}
        if self.accelerator_count:
            spec.update(acceleratorType=self.accelerator_type, acceleratorCount=self.accelerator_count)
        return spec

    @property
    def disk_spec(self) -> dict:
        return {"bootDiskType": self.disk_type, "bootDiskSizeGb": self.disk_size_gb}


class PoolNode(models.Model):
    """A node a resource pool holds. A node belongs to at most one pool (OneToOne)."""

    pool = models.ForeignKey(ResourcePool, on_delete=models.CASCADE, related_name="members")
    node = models.OneToOneField(Node, on_delete=models.CASCADE, related_name="resource_membership")
    added_at = models.DateTimeField()

    class Meta:
        ordering = ["pool_id", "node_id"]


class OperationKind(models.TextChoices):
    CREATE = "CREATE"
    UPDATE = "UPDATE"
    REBOOT = "REBOOT"
    DELETE = "DELETE"


class ResourceOperation(models.Model):
    """A long-running operation (google.longrunning.Operation) on a persistent resource.

    Kept after the resource is deleted, so a client can still poll the delete operation.
    """

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="resource_operations")
    location = models.CharField(max_length=32)
    operation_id = models.CharField(max_length=24, unique=True)
    resource = models.ForeignKey(PersistentResource, null=True, on_delete=models.SET_NULL, related_name="operations")
    #: The resource's id, kept for the operation's name after the resource is deleted.
    target_id = models.CharField(max_length=63)
    kind = models.CharField(max_length=8, choices=OperationKind.choices)
    #: What an update asked for (the new pools), applied by the operation.
    request = models.JSONField(default=dict, blank=True)
    done = models.BooleanField(default=False)
    error = models.JSONField(null=True, blank=True)
    progress_message = models.CharField(max_length=255, blank=True)
    create_time = models.DateTimeField()
    update_time = models.DateTimeField()

    class Meta:
        ordering = ["-create_time", "-id"]
        indexes = [models.Index(fields=["resource", "done"], name="operation_in_flight")]

    def __str__(self) -> str:
        return self.name

    @property
    def name(self) -> str:
        return (f"projects/{self.project.project_id}/locations/{self.location}/persistentResources/"
                f"{self.target_id}/operations/{self.operation_id}")


class UtilisationSample(models.Model):
    """Machines provisioned and in use in one pool at one moment (the pool page's chart)."""

    pool = models.ForeignKey(ResourcePool, on_delete=models.CASCADE, related_name="samples")
    time = models.DateTimeField()
    provisioned = models.PositiveIntegerField()
    used = models.PositiveIntegerField()

    class Meta:
        ordering = ["time", "id"]
        indexes = [models.Index(fields=["pool", "time"], name="sample_pool_time")]
