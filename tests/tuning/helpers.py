"""Bodies and steps shared by the tuning tests: a tuning job document, and finishing a trial's
CustomJob the way the agent would (outputs recorded, then the primary exits)."""

from __future__ import annotations

import json

from tests.conftest import container_pool
from trainhub.jobs import services as job_services
from trainhub.jobs.models import CustomJob
from trainhub.scheduling.services import scheduler_pass
from trainhub.tuning.spec import CUSTOM_TASK, TUNING_TASK

BASE = "/v1/projects/alpha/locations/us-central1/hyperparameterTuningJobs"
PIPELINES = "/v1/projects/alpha/locations/us-central1/trainingPipelines"
MODELS = "/v1/projects/alpha/locations/us-central1/models"


def study(*parameters, algorithm="ALGORITHM_UNSPECIFIED", goal="MAXIMIZE", selection=None, metric="score"):
    spec = {"metrics": [{"metricId": metric, "goal": goal}], "parameters": list(parameters), "algorithm": algorithm}
    if selection:
        spec["measurementSelectionType"] = selection
    return spec


def double(name, low, high, scale=None):
    spec = {"parameterId": name, "doubleValueSpec": {"minValue": low, "maxValue": high}}
    if scale:
        spec["scaleType"] = scale
    return spec


def integer(name, low, high):
    return {"parameterId": name, "integerValueSpec": {"minValue": str(low), "maxValue": str(high)}}


def categorical(name, *values, children=()):
    spec = {"parameterId": name, "categoricalValueSpec": {"values": list(values)}}
    if children:
        spec["conditionalParameterSpecs"] = list(children)
    return spec


def discrete(name, *values):
    return {"parameterId": name, "discreteValueSpec": {"values": list(values)}}


def tuning_body(study_spec, *, name="study", max_trials=4, parallel=2, max_failed=None, pool=None, **spec):
    body = {"displayName": name, "studySpec": study_spec, "maxTrialCount": max_trials,
            "parallelTrialCount": parallel,
            "trialJobSpec": {"workerPoolSpecs": [pool or container_pool(command=["python3"], args=["train.py"])],
                             **spec}}
    if max_failed is not None:
        body["maxFailedTrialCount"] = max_failed
    return body


def hypertune_reports(metric, values):
    """What the agent stores from a hypertune file: one report per (step, value)."""
    return [{"globalStep": step, "timestamp": 1000.0 + step, "metrics": {metric: value}} for step, value in values]


def finish_job(job: CustomJob, now, *, exit_code=0, reports=(), model_files=None):
    """Place the job if needed, record its outputs as the agent does, then end its primary."""
    job.refresh_from_db()
    if not job.replicas.filter(active=True).exists():
        scheduler_pass(now=now)
    primary = job.replicas.get(active=True, pool_index=0, replica_index=0)
    job_services.replica_started(replica=primary, now=now)
    artifacts = {"host": "n1", "path": f"/work/gcs/{job.job_id}", "files": model_files} if model_files else {}
    job_services.job_outputs_record(job=job, hp_metrics=list(reports), model_artifacts=artifacts)
    job_services.replica_exited(replica=primary, exit_code=exit_code, now=now)
    job.refresh_from_db()
    return job


def args_of(job: CustomJob) -> list[str]:
    return job.spec["jobSpec"]["workerPoolSpecs"][0]["containerSpec"]["args"]


def dumps(value) -> str:
    return json.dumps(value, sort_keys=True)


def custom_pipeline(name="train", **extra):
    """A TrainingPipeline running a custom job and registering what it saves as "quadratic"."""
    return {"displayName": name, "trainingTaskDefinition": CUSTOM_TASK,
            "trainingTaskInputs": {"workerPoolSpecs": [container_pool(command=["python3"], args=["train.py"])],
                                   "baseOutputDirectory": {"outputUriPrefix": "gs://models-bucket/run"}},
            "modelToUpload": {"displayName": "quadratic", "description": "a fitted quadratic"}, **extra}


def tuning_pipeline():
    """A TrainingPipeline running a two-trial random study (both at once) and registering its best trial."""
    return {"displayName": "tuned", "trainingTaskDefinition": TUNING_TASK,
            "trainingTaskInputs": {"studySpec": study(double("x", 0, 1), algorithm="RANDOM_SEARCH"),
                                   "maxTrialCount": 2, "parallelTrialCount": 2,
                                   "trialJobSpec": {"workerPoolSpecs": [container_pool()],
                                                    "baseOutputDirectory": {"outputUriPrefix": "gs://b/hp/"}}},
            "modelToUpload": {"displayName": "tuned-model"}}
