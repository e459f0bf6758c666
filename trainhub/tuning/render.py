"""Tuning jobs, trials, pipelines and models -> Vertex AI v1 JSON (camelCase, enums by name,
int64 as strings, timestamps RFC 3339). trainhub's own additions sit under ``trainhubStatus``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

from trainhub.common.wire import format_timestamp
from trainhub.jobs.spec import render_job_spec
from trainhub.tuning import search
from trainhub.tuning.models import HyperparameterTuningJob, Model, ModelVersion, TrainingPipeline, Trial
from trainhub.tuning.spec import TUNING_TASK

TrialLike = TypeVar("TrialLike")


def _times(resource: Any, body: dict[str, Any]) -> dict[str, Any]:
    body["createTime"] = format_timestamp(resource.create_time)
    for key, value in (("startTime", resource.start_time), ("endTime", resource.end_time)):
        if value:
            body[key] = format_timestamp(value)
    body["updateTime"] = format_timestamp(resource.update_time)
    if resource.error and resource.is_terminal:
        body["error"] = resource.error
    return body


def render_trial(trial: Trial) -> dict[str, Any]:
    body: dict[str, Any] = {"id": trial.trial_id, "state": trial.state, "parameters": trial.parameters}
    if trial.final_measurement:
        body["finalMeasurement"] = trial.final_measurement
    if trial.measurements:
        body["measurements"] = trial.measurements
    body["startTime"] = format_timestamp(trial.start_time)
    if trial.end_time:
        body["endTime"] = format_timestamp(trial.end_time)
    if trial.custom_job is not None:
        body["customJob"] = trial.custom_job.resource_name
    if trial.infeasible_reason:
        body["infeasibleReason"] = trial.infeasible_reason
    return body


def study_maximizes(tuning_job: HyperparameterTuningJob) -> bool:
    return tuning_job.spec["studySpec"]["metrics"][0]["goal"] == "MAXIMIZE"


def best_of(trials: Sequence[TrialLike], maximize: bool) -> TrialLike | None:
    """The SUCCEEDED trial with the best primary metric (the first, by number, on a tie): trials
    or their summaries (selectors.TrialSummary), in order of number."""
    index = search.best_index([t.objective if t.state == "SUCCEEDED" else None for t in trials], maximize)
    return None if index is None else trials[index]


def best_trial(tuning_job: HyperparameterTuningJob) -> Trial | None:
    return best_of(list(tuning_job.trials.all()), study_maximizes(tuning_job))


def render_tuning_job(job: HyperparameterTuningJob) -> dict[str, Any]:
    spec = job.spec
    trials = list(job.trials.all())
    best = best_trial(job)
    body: dict[str, Any] = {
        "name": job.resource_name,
        "displayName": job.display_name,
        "studySpec": search.render_study_spec(spec["studySpec"]),
        "maxTrialCount": spec["maxTrialCount"],
        "parallelTrialCount": spec["parallelTrialCount"],
        "maxFailedTrialCount": spec["maxFailedTrialCount"],
        "trialJobSpec": render_job_spec(spec["trialJobSpec"]),
        "trials": [render_trial(trial) for trial in trials],
        "state": job.state,
    }
    _times(job, body)
    if spec["labels"]:
        body["labels"] = spec["labels"]
    if spec.get("encryptionSpec"):
        body["encryptionSpec"] = spec["encryptionSpec"]
    body["trainhubStatus"] = {
        "bestTrialId": best.trial_id if best else None,
        "failedTrialCount": sum(1 for trial in trials if trial.state == "INFEASIBLE"),
        "failedTrialLimit": job.failure_limit,
    }
    return body


def render_model_version(version: ModelVersion, *, latest: bool) -> dict[str, Any]:
    model = version.model
    body: dict[str, Any] = {
        "name": model.resource_name,
        "versionId": str(version.version),
        "versionAliases": ["default"] if latest else [],
        "versionCreateTime": format_timestamp(version.create_time),
        "versionUpdateTime": format_timestamp(version.create_time),
        "displayName": model.display_name,
        "artifactUri": version.artifact_uri,
        "createTime": format_timestamp(model.create_time),
        "updateTime": format_timestamp(model.update_time),
    }
    if model.description:
        body["description"] = model.description
    if model.labels:
        body["labels"] = model.labels
    if version.container_spec:
        body["containerSpec"] = version.container_spec
    if version.pipeline is not None:
        body["trainingPipeline"] = version.pipeline.resource_name
    body["trainhubStatus"] = {
        "customJob": version.custom_job.resource_name if version.custom_job else None,
        "host": version.host, "path": version.path, "files": version.files, "metrics": version.metrics,
    }
    return body


def render_model(model: Model) -> dict[str, Any]:
    """A model as models.get shows it: its default (latest) version."""
    versions = list(model.versions.all())
    return render_model_version(versions[-1], latest=True)


def render_pipeline(pipeline: TrainingPipeline) -> dict[str, Any]:
    spec = pipeline.spec
    body: dict[str, Any] = {"name": pipeline.resource_name, "displayName": pipeline.display_name}
    if "inputDataConfig" in spec:
        body["inputDataConfig"] = spec["inputDataConfig"]
    body["trainingTaskDefinition"] = spec["trainingTaskDefinition"]
    inputs = spec["trainingTaskInputs"]
    if spec["trainingTaskDefinition"] == TUNING_TASK:
        body["trainingTaskInputs"] = {**inputs, "studySpec": search.render_study_spec(inputs["studySpec"]),
                                      "trialJobSpec": render_job_spec(inputs["trialJobSpec"])}
    else:
        body["trainingTaskInputs"] = render_job_spec(inputs)
    metadata = {}
    if pipeline.custom_job is not None:
        metadata["backingCustomJob"] = pipeline.custom_job.resource_name
    if pipeline.tuning_job is not None:
        metadata["backingHyperparameterTuningJob"] = pipeline.tuning_job.resource_name
    if metadata:
        body["trainingTaskMetadata"] = metadata
    if "modelToUpload" in spec:
        model = dict(spec["modelToUpload"])
        uploaded = list(pipeline.model_versions.all())
        if uploaded:
            model.update(name=uploaded[0].model.resource_name, versionId=str(uploaded[0].version))
        body["modelToUpload"] = model
    for key in ("modelId", "parentModel"):
        if key in spec:
            body[key] = spec[key]
    body["state"] = pipeline.state
    _times(pipeline, body)
    if spec["labels"]:
        body["labels"] = spec["labels"]
    return body
