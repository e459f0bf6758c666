import datetime as dt
from typing import Iterable

from django.conf import settings
from django.db import models

from trainhub.catalog.machines import NO_ACCELERATOR
from trainhub.iam.models import Project
from trainhub.inventory.models import Node
from trainhub.jobs import states

JOB_STATE_CHOICES = [(name, name) for name in states.JOB_STATES.values()]
#: The job list's two tabs (see CustomJob.Meta).
ACTIVE_JOBS = models.Q(end_time__isnull=True)
FINISHED_JOBS = models.Q(end_time__isnull=False)


class CustomJob(models.Model):
    """A Vertex CustomJob. ``spec`` holds the canonical document (see jobs.spec)."""

    # Every index is written by each submission: the project's own index would repeat the first
    # column of job_list_keyset, and job_id is unique through a constraint because unique=True
    # adds, on PostgreSQL, a second index for LIKE that no query uses.
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="custom_jobs", db_index=False)
    location = models.CharField(max_length=32)
    job_id = models.CharField(max_length=24)
    display_name = models.CharField(max_length=128)
    spec = models.JSONField()
    labels = models.JSONField(default=dict)
    strategy = models.CharField(max_length=24, default="STANDARD")
    gpu_count = models.PositiveIntegerField(default=0)
    replica_count = models.PositiveIntegerField(default=1)
    #: The GPU type it asks most GPUs of (see jobs.spec.main_accelerator_type), for filters and dashboards.
    accelerator_type = models.CharField(max_length=32, default=NO_ACCELERATOR)
    #: GPUs requested per quota metric (see scheduling.quota), fixed at submission.
    quota_demand = models.JSONField(default=dict, blank=True)
    timeout_seconds = models.PositiveIntegerField()
    #: Seconds a FLEX_START job may wait for capacity; null = wait forever.
    max_wait_seconds = models.PositiveIntegerField(null=True, blank=True)
    state = models.CharField(max_length=40, choices=JOB_STATE_CHOICES, default=states.QUEUED)
    #: google.rpc.Status {code, message} when FAILED or CANCELLED.
    error = models.JSONField(null=True, blank=True)
    #: How often the job went back to the queue (preemption, lost node, retry): its attempt number.
    restart_count = models.PositiveIntegerField(default=0)
    #: Of those, the retries after a replica failed (Vertex retries a job up to 3 times; see jobs.retries).
    retry_count = models.PositiveIntegerField(default=0)
    #: The resource that submitted this job on the user's behalf ("hyperparameterTuningJobs/<pk>",
    #: "trainingPipelines/<pk>"); empty for a job the user submitted. Told of every state change.
    owner = models.CharField(max_length=64, blank=True, default="")
    #: Trial id (from "1") when the job is a hyperparameter tuning trial: CLUSTER_SPEC.task.trial.
    trial_id = models.CharField(max_length=16, blank=True, default="")
    #: jobSpec.persistentResourceId, kept in a column of its own so a resource's jobs are found
    #: through an index, not by reading every job's document; null for a job on the shared nodes
    #: (so the index holds only jobs on resources, and planners see how few each resource has).
    persistent_resource_id = models.CharField(max_length=63, null=True, blank=True)
    #: What the primary replica reported through the cloudml-hypertune file, as the agent read it:
    #: [{"globalStep": int, "timestamp": float, "metrics": {tag: value}}], in report order.
    hp_metrics = models.JSONField(default=list, blank=True)
    #: Files the primary replica left under AIP_MODEL_DIR: {"uri", "host", "path", "files": [{"path", "sizeBytes"}]}.
    model_artifacts = models.JSONField(default=dict, blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL)
    create_time = models.DateTimeField()
    start_time = models.DateTimeField(null=True, blank=True)
    end_time = models.DateTimeField(null=True, blank=True)
    update_time = models.DateTimeField()

    class Meta:
        # A job is finished exactly when it has an end time (services._transition sets both), so the
        # job list's Active and Finished tabs each get partial indexes that never hold the other's
        # rows: 10k active jobs stay cheap to sort next to a million finished ones. The conditions
        # are IS [NOT] NULL so that SQLite, which matches partial indexes only against literal
        # terms, uses them as PostgreSQL does.
        indexes = [
            models.Index(fields=["project", "location", "-create_time", "-id"], name="job_list_keyset"),
            models.Index(fields=["state", "create_time"], name="job_state_age"),
            models.Index(fields=["project", "-create_time", "-id"], condition=ACTIVE_JOBS, name="job_active_created"),
            models.Index(fields=["project", "-gpu_count", "-id"], condition=ACTIVE_JOBS, name="job_active_gpus"),
            models.Index(fields=["-end_time", "-id"], condition=FINISHED_JOBS, name="job_finished_ended"),
            models.Index(fields=["project", "-end_time", "-id"], condition=FINISHED_JOBS, name="job_finished_project"),
            models.Index(fields=["created_by", "-end_time", "-id"], condition=FINISHED_JOBS, name="job_finished_user"),
            models.Index(fields=["state", "-end_time", "-id"], condition=FINISHED_JOBS, name="job_finished_state"),
            # The dashboards' sampler reads the jobs that started since its last sample.
            models.Index(fields=["start_time"], condition=models.Q(start_time__isnull=False), name="job_started"),
            # A persistent resource's page and its deletion read the jobs that run or wait on it.
            # IS NOT NULL: SQLite matches it from the query's equality on the column, as PostgreSQL does.
            models.Index(fields=["persistent_resource_id", "state", "create_time"],
                         condition=models.Q(persistent_resource_id__isnull=False), name="job_resource_state"),
        ]
        constraints = [
            models.UniqueConstraint(fields=["job_id"], name="job_id_unique"),
            models.CheckConstraint(
                condition=(FINISHED_JOBS & models.Q(state__in=sorted(states.TERMINAL)))
                | (ACTIVE_JOBS & ~models.Q(state__in=sorted(states.TERMINAL))),
                name="job_end_time_iff_finished"),
        ]

    def __str__(self) -> str:
        return self.resource_name

    @property
    def resource_name(self) -> str:
        return f"projects/{self.project.project_id}/locations/{self.location}/customJobs/{self.job_id}"

    @property
    def flex_start_deadline(self):
        """When a waiting FLEX_START job gives up (None: not FLEX_START, or waits forever)."""
        if self.strategy != "FLEX_START" or self.max_wait_seconds is None:
            return None
        return self.create_time + dt.timedelta(seconds=self.max_wait_seconds)

    @property
    def is_terminal(self) -> bool:
        return self.state in states.TERMINAL

    @property
    def is_cancellable(self) -> bool:
        return self.state in states.CANCELLABLE

    @property
    def short_state(self) -> str:
        return self.state.removeprefix("JOB_STATE_")


class Replica(models.Model):
    """One replica of one worker pool, and - while ``active`` - its allocation of a whole node.

    The partial unique constraint on (node) for active replicas is what makes double allocation
    impossible: two transactions placing replicas on one node cannot both commit.
    """

    job = models.ForeignKey(CustomJob, on_delete=models.CASCADE, related_name="replicas")
    pool_index = models.PositiveSmallIntegerField()
    replica_index = models.PositiveIntegerField()
    node = models.ForeignKey(Node, null=True, on_delete=models.SET_NULL, related_name="replicas")
    gpu_indices = models.JSONField(default=list)
    active = models.BooleanField(default=True)
    state = models.CharField(max_length=16, choices=states.REPLICA_STATES, default=states.REPLICA_ASSIGNED)
    #: The job's attempt (CustomJob.restart_count when placed).
    attempt = models.PositiveIntegerField(default=0)
    #: How often this task was restarted on its node within the attempt (jobs.retries): each restart
    #: is a new row, on the same node with the same GPUs and ports.
    restart = models.PositiveSmallIntegerField(default=0)
    #: The job's rendezvous ports (MASTER_PORT, and the CLUSTER_SPEC/TF_CONFIG port), the same on
    #: every replica of the attempt, unique among the active jobs on nodes sharing an address.
    master_port = models.PositiveIntegerField(null=True, blank=True)
    cluster_port = models.PositiveIntegerField(null=True, blank=True)
    exit_code = models.IntegerField(null=True, blank=True)
    stop_requested = models.BooleanField(default=False)
    assigned_at = models.DateTimeField()
    started_at = models.DateTimeField(null=True, blank=True)
    ended_at = models.DateTimeField(null=True, blank=True)
    #: Log lines received from the agent, stored or not (see services.replica_logs_append).
    log_lines = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["pool_index", "replica_index", "restart"]
        constraints = [
            models.UniqueConstraint(fields=["node"], condition=models.Q(active=True), name="one_active_replica_per_node"),
            models.UniqueConstraint(fields=["job", "pool_index", "replica_index", "attempt", "restart"],
                                    name="replica_identity"),
        ]
        indexes = [
            models.Index(fields=["node", "active"], name="replica_node_active"),
            # Which jobs hold GPUs now (quota usage): the few active replicas, never the history.
            models.Index(fields=["job"], condition=models.Q(active=True), name="replica_active_job"),
        ]

    def __str__(self) -> str:
        return f"{self.job.job_id}/{self.task_name}"

    @property
    def task_name(self) -> str:
        return f"workerpool{self.pool_index}-{self.replica_index}"


def current_replicas(replicas: Iterable[Replica], attempt: int) -> list[Replica]:
    """The replicas of one job attempt, the latest restart of each task only, in task order."""
    latest: dict[tuple[int, int], Replica] = {}
    for replica in replicas:
        key = (replica.pool_index, replica.replica_index)
        if replica.attempt == attempt and (key not in latest or latest[key].restart < replica.restart):
            latest[key] = replica
    return [latest[key] for key in sorted(latest)]


class LogLine(models.Model):
    replica = models.ForeignKey(Replica, on_delete=models.CASCADE, related_name="logs")
    job = models.ForeignKey(CustomJob, on_delete=models.CASCADE, related_name="logs")
    stream = models.CharField(max_length=8, default="stdout")
    time = models.DateTimeField()
    text = models.TextField()

    class Meta:
        ordering = ["id"]
        indexes = [models.Index(fields=["job", "id"], name="log_job_seq")]


class JobEvent(models.Model):
    """The job's timeline: every state change and scheduler decision, with its time."""

    job = models.ForeignKey(CustomJob, on_delete=models.CASCADE, related_name="events")
    time = models.DateTimeField()
    state = models.CharField(max_length=40, blank=True)
    message = models.TextField()

    class Meta:
        ordering = ["time", "id"]


class CostLedger(models.Model):
    """What the finished jobs of a project ran, per strategy: how many had started, and their
    GPU-seconds per accelerator type. Added to as each job ends (services._transition), so a
    project's cost over its whole history is one small read; deleting a finished job does not
    take back what it cost."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="cost_ledger")
    strategy = models.CharField(max_length=24)
    jobs = models.PositiveIntegerField(default=0)
    #: accelerator type -> GPU-seconds.
    gpu_seconds = models.JSONField(default=dict)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["project", "strategy"], name="one_ledger_per_strategy")]

    def __str__(self) -> str:
        return f"{self.project} {self.strategy}: {self.jobs} jobs"
