from django.conf import settings
from django.db import models

from trainhub.iam.models import Project
from trainhub.jobs import states
from trainhub.jobs.models import JOB_STATE_CHOICES, CustomJob

# Trial.State (study.proto).
REQUESTED = "REQUESTED"
ACTIVE = "ACTIVE"
STOPPING = "STOPPING"
SUCCEEDED = "SUCCEEDED"
INFEASIBLE = "INFEASIBLE"
TRIAL_STATES = {0: "STATE_UNSPECIFIED", 1: REQUESTED, 2: ACTIVE, 3: STOPPING, 4: SUCCEEDED, 5: INFEASIBLE}
TRIAL_FINAL = frozenset({SUCCEEDED, INFEASIBLE})

# PipelineState (pipeline_state.proto): the JobState of the job the pipeline runs, renamed.
PIPELINE_STATES = {0: "PIPELINE_STATE_UNSPECIFIED", 1: "PIPELINE_STATE_QUEUED", 2: "PIPELINE_STATE_PENDING",
                   3: "PIPELINE_STATE_RUNNING", 4: "PIPELINE_STATE_SUCCEEDED", 5: "PIPELINE_STATE_FAILED",
                   6: "PIPELINE_STATE_CANCELLING", 7: "PIPELINE_STATE_CANCELLED", 8: "PIPELINE_STATE_PAUSED"}


def pipeline_state(job_state: str) -> str:
    return "PIPELINE_STATE_" + job_state.removeprefix("JOB_STATE_")


class _OwnedResource(models.Model):
    """What a tuning job and a pipeline share: a named resource of a project that submits jobs
    on its creator's behalf (its CustomJobs carry ``owner_key``)."""

    #: The REST collection, and the field holding the id in it.
    COLLECTION = ""
    ID_FIELD = ""
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="+")
    location = models.CharField(max_length=32)
    display_name = models.CharField(max_length=128)
    spec = models.JSONField()
    error = models.JSONField(null=True, blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    create_time = models.DateTimeField()
    start_time = models.DateTimeField(null=True, blank=True)
    end_time = models.DateTimeField(null=True, blank=True)
    update_time = models.DateTimeField()

    class Meta:
        abstract = True

    def __str__(self) -> str:
        return self.resource_name

    @property
    def resource_name(self) -> str:
        resource_id = getattr(self, self.ID_FIELD)
        return f"projects/{self.project.project_id}/locations/{self.location}/{self.COLLECTION}/{resource_id}"

    @property
    def owner_key(self) -> str:
        """What the CustomJob.owner of the jobs it submits holds."""
        return f"{self.COLLECTION}/{self.pk}"

    @property
    def short_state(self) -> str:
        return self.state.split("_STATE_", 1)[1]

    @property
    def is_terminal(self) -> bool:
        return "JOB_STATE_" + self.short_state in states.TERMINAL

    @property
    def is_cancellable(self) -> bool:
        return "JOB_STATE_" + self.short_state in states.CANCELLABLE


class HyperparameterTuningJob(_OwnedResource):
    """A Vertex HyperparameterTuningJob. ``spec`` holds its canonical document (see tuning.spec);
    its state follows the CustomJob state machine (jobs.states)."""

    COLLECTION = "hyperparameterTuningJobs"
    ID_FIELD = "job_id"
    job_id = models.CharField(max_length=24, unique=True)
    #: Seeds the search algorithm, so a study's suggestions can be replayed.
    seed = models.BigIntegerField()
    #: maxFailedTrialCount with 0 replaced by the service default (search.default_max_failed_trials).
    failure_limit = models.PositiveIntegerField()
    state = models.CharField(max_length=40, choices=JOB_STATE_CHOICES, default=states.QUEUED)

    class Meta:
        indexes = [models.Index(fields=["project", "location", "-create_time", "-id"], name="tuning_list_keyset"),
                   models.Index(fields=["state"], name="tuning_state")]


class Trial(models.Model):
    tuning_job = models.ForeignKey(HyperparameterTuningJob, on_delete=models.CASCADE, related_name="trials")
    number = models.PositiveIntegerField()
    state = models.CharField(max_length=16, default=REQUESTED)
    #: [{"parameterId", "value"}] as on the wire.
    parameters = models.JSONField()
    #: [{"stepCount", "elapsedDuration", "metrics": [{"metricId", "value"}]}] as on the wire.
    measurements = models.JSONField(default=list, blank=True)
    final_measurement = models.JSONField(null=True, blank=True)
    #: The primary metric of final_measurement, kept apart so trials sort by it in the database.
    objective = models.FloatField(null=True, blank=True)
    infeasible_reason = models.TextField(blank=True)
    custom_job = models.OneToOneField(CustomJob, null=True, blank=True, on_delete=models.SET_NULL,
                                      related_name="trial")
    start_time = models.DateTimeField()
    end_time = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["number"]
        constraints = [models.UniqueConstraint(fields=["tuning_job", "number"], name="trial_number")]

    def __str__(self) -> str:
        return f"{self.tuning_job.job_id}/trials/{self.number}"

    @property
    def trial_id(self) -> str:
        return str(self.number)

    @property
    def is_final(self) -> bool:
        return self.state in TRIAL_FINAL


class TrainingPipeline(_OwnedResource):
    """A Vertex TrainingPipeline: runs a CustomJob or a HyperparameterTuningJob and, when it
    succeeds, registers the model it wrote as a ModelVersion."""

    COLLECTION = "trainingPipelines"
    ID_FIELD = "pipeline_id"
    pipeline_id = models.CharField(max_length=24, unique=True)
    state = models.CharField(max_length=40, default="PIPELINE_STATE_QUEUED")
    custom_job = models.ForeignKey(CustomJob, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="pipelines")
    tuning_job = models.ForeignKey(HyperparameterTuningJob, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="pipelines")

    class Meta:
        indexes = [models.Index(fields=["project", "location", "-create_time", "-id"], name="pipeline_list_keyset")]


class Model(models.Model):
    """A registered model (Vertex Model): a name with numbered versions."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="models")
    location = models.CharField(max_length=32)
    model_id = models.CharField(max_length=63)
    display_name = models.CharField(max_length=128)
    description = models.TextField(blank=True)
    labels = models.JSONField(default=dict, blank=True)
    create_time = models.DateTimeField()
    update_time = models.DateTimeField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["project", "location", "model_id"], name="model_identity")]
        indexes = [models.Index(fields=["project", "location", "-create_time", "-id"], name="model_list_keyset")]

    def __str__(self) -> str:
        return self.resource_name

    @property
    def resource_name(self) -> str:
        return f"projects/{self.project.project_id}/locations/{self.location}/models/{self.model_id}"


class ModelVersion(models.Model):
    model = models.ForeignKey(Model, on_delete=models.CASCADE, related_name="versions")
    version = models.PositiveIntegerField()
    #: Where the model is, as the job saw it: AIP_MODEL_DIR's URI or modelToUpload.artifactUri.
    artifact_uri = models.CharField(max_length=2048)
    #: The node and local directory holding the files (see agent.environment.local_output_uri).
    host = models.CharField(max_length=255, blank=True)
    path = models.CharField(max_length=2048, blank=True)
    files = models.JSONField(default=list, blank=True)
    #: The producing trial's final measurement metrics, {metricId: value}; empty for a custom task.
    metrics = models.JSONField(default=dict, blank=True)
    container_spec = models.JSONField(null=True, blank=True)
    pipeline = models.ForeignKey(TrainingPipeline, null=True, blank=True, on_delete=models.SET_NULL,
                                 related_name="model_versions")
    custom_job = models.ForeignKey(CustomJob, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="model_versions")
    create_time = models.DateTimeField()

    class Meta:
        ordering = ["model", "version"]
        constraints = [models.UniqueConstraint(fields=["model", "version"], name="model_version_number")]

    def __str__(self) -> str:
        return f"{self.model.model_id}@{self.version}"
