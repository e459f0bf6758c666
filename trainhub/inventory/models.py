from django.core.exceptions import ValidationError
from django.db import models

from trainhub.catalog.machines import NO_ACCELERATOR, machine_type_get


class Executor(models.TextChoices):
    SUBPROCESS = "subprocess", "subprocess (runs the command on the agent's host)"
    SIMULATED = "simulated", "simulated (replicas succeed after a simulated run time)"


class NodePool(models.Model):
    """A group of identical VMs of one machine type, in one location."""

    name = models.SlugField(max_length=63, unique=True)
    location = models.CharField(max_length=32, default="us-central1")
    machine_type = models.CharField(max_length=64)
    accelerator_type = models.CharField(max_length=32, default=NO_ACCELERATOR)
    accelerator_count = models.PositiveSmallIntegerField(default=0)
    executor = models.CharField(max_length=16, choices=Executor.choices, default=Executor.SUBPROCESS)
    #: Seconds a simulated replica "runs" before exiting 0.
    simulated_runtime_seconds = models.PositiveIntegerField(default=30)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        machine = machine_type_get(self.machine_type)
        if machine is None:
            raise ValidationError({"machine_type": f"unknown machine type {self.machine_type!r}"})
        if self.accelerator_type == NO_ACCELERATOR:
            if self.accelerator_count:
                raise ValidationError({"accelerator_count": "set without an accelerator type"})
            return
        allowed = machine.accelerators.get(self.accelerator_type, ())
        if self.accelerator_count not in allowed:
            raise ValidationError({"accelerator_count": f"{self.machine_type} takes {allowed} x {self.accelerator_type}"})


class NodeState(models.TextChoices):
    UP = "UP"
    DOWN = "DOWN"
    DRAIN = "DRAIN"


class Node(models.Model):
    """One VM. A replica occupies a whole node, as a Vertex replica occupies a whole VM."""

    pool = models.ForeignKey(NodePool, on_delete=models.PROTECT, related_name="nodes")
    name = models.SlugField(max_length=63, unique=True)
    hostname = models.CharField(max_length=253)
    state = models.CharField(max_length=8, choices=NodeState.choices, default=NodeState.UP)
    state_reason = models.CharField(max_length=255, blank=True)
    last_heartbeat = models.DateTimeField(null=True, blank=True)
    #: Who holds this node exclusively ("persistentResources/<pk>", "slurmClusters/<pk>"); empty
    #: means the shared pool the serverless scheduler places CustomJobs on.
    dedicated_to = models.CharField(max_length=96, blank=True, default="", db_index=True)

    class Meta:
        ordering = ["pool_id", "name"]
        indexes = [models.Index(fields=["state", "pool"])]

    def __str__(self) -> str:
        return self.name

    @property
    def gpu_indices(self) -> list[int]:
        return list(range(self.pool.accelerator_count))
