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
    #: Where peers reach this machine (what its agent reported); empty until an agent joined.
    address = models.CharField(max_length=253, blank=True, default="")
    #: What the agent discovered: hostname, cpus, memoryBytes, gpus [{index, uuid, name}], simulated.
    facts = models.JSONField(default=dict, blank=True)
    joined_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["pool_id", "name"]
        indexes = [models.Index(fields=["state", "pool"])]

    def __str__(self) -> str:
        return self.name

    @property
    def peer_address(self) -> str:
        """The address a replica's peers use: the one its agent reported, else its hostname."""
        return self.address or self.hostname

    @property
    def simulated(self) -> bool:
        return bool(self.facts.get("simulated"))

    @property
    def gpu_indices(self) -> list[int]:
        return list(range(self.pool.accelerator_count))


class NodeCredential(models.Model):
    """The secret a joined machine's agent authenticates with (as a kubelet's client certificate).

    Only its SHA-256 digest is stored; the agent received the raw value once, at join. It grants
    access to its own node and the replicas placed there, and nothing else.
    """

    node = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="credentials")
    digest = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField()
    revoked_at = models.DateTimeField(null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["node"], condition=models.Q(revoked_at__isnull=True),
                                               name="one_live_credential_per_node")]


class JoinToken(models.Model):
    """A one-time-shown, expiring secret an admin hands to new machines of one pool (kubeadm's
    bootstrap token): ``trainhub-agent join`` trades it for a per-node credential."""

    pool = models.ForeignKey(NodePool, on_delete=models.CASCADE, related_name="join_tokens")
    digest = models.CharField(max_length=64, unique=True)
    description = models.CharField(max_length=200, blank=True)
    created_by = models.CharField(max_length=150)
    created_at = models.DateTimeField()
    expires_at = models.DateTimeField()
    #: How many machines may join with it; None: any number until it expires.
    max_uses = models.PositiveIntegerField(null=True, blank=True)
    uses = models.PositiveIntegerField(default=0)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def usable(self, now) -> bool:
        return (self.revoked_at is None and now < self.expires_at
                and (self.max_uses is None or self.uses < self.max_uses))


class AgentLogCursor(models.Model):
    """How many lines of one output stream the control plane has stored ("replica:<id>",
    "slurm:<job node id>:<stream>"): an agent resending a chunk after a network error gets the
    overlap dropped, as GitLab Runner's trace appends are by their Content-Range."""

    key = models.CharField(max_length=64, unique=True)
    received = models.PositiveBigIntegerField(default=0)
