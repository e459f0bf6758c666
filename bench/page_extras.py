"""The rest of the page benchmark's dataset: tuning studies, training pipelines and the models they
register, persistent resources with jobs on them. Everything goes through the services (tuning
job, pipeline and resource creation, job submission, study and pipeline advancement) so the rows
are what the app stores; only a trial's or pipeline's job finishing is written directly, as the
agent's reports would leave it (state, times, hypertune reports, model files).
"""

from __future__ import annotations

import datetime as dt
import random
from typing import Any

LOCATION = "us-central1"
TRIAL_MACHINE = "a2-highgpu-8g"
RESOURCE_MACHINE, RESOURCE_GPU = "g2-standard-8", "NVIDIA_L4"
#: 8-50 trials a study, as the issue's bench dataset asks.
TRIALS = (8, 50)


def _pool(machine: str = TRIAL_MACHINE) -> dict[str, Any]:
    return {"machineSpec": {"machineType": machine}, "replicaCount": 1,
            "containerSpec": {"imageUri": "python:3.11", "command": ["python", "train.py"]}}


def _study_body(name: str, trials: int) -> dict[str, Any]:
    return {
        "displayName": name, "maxTrialCount": trials, "parallelTrialCount": trials,
        "studySpec": {"metrics": [{"metricId": "accuracy", "goal": "MAXIMIZE"}], "algorithm": "RANDOM_SEARCH",
                      "parameters": [
                          {"parameterId": "learning_rate", "scaleType": "UNIT_LOG_SCALE",
                           "doubleValueSpec": {"minValue": 1e-5, "maxValue": 0.1}},
                          {"parameterId": "layers", "integerValueSpec": {"minValue": "2", "maxValue": "12"}},
                          {"parameterId": "batch", "discreteValueSpec": {"values": [32, 64, 128, 256]}},
                          {"parameterId": "optimizer", "categoricalValueSpec": {"values": ["adam", "sgd"]}}]},
        "trialJobSpec": {"workerPoolSpecs": [_pool()],
                         "baseOutputDirectory": {"outputUriPrefix": f"gs://bench/{name}/"}}}


def _finish_jobs(jobs: list[Any], *, rng: random.Random, started: dt.datetime, metric: str | None,
                 files: bool) -> dt.datetime:
    """End ``jobs`` as their agents would report (90 % SUCCEEDED): returns when the last ended."""
    from trainhub.jobs import states
    from trainhub.jobs.models import CustomJob

    last = started
    for job in jobs:
        job.start_time = started + dt.timedelta(seconds=rng.uniform(5, 600))
        job.end_time = job.update_time = job.start_time + dt.timedelta(seconds=rng.uniform(600, 4 * 3600))
        job.state = states.SUCCEEDED if rng.random() < 0.9 else states.FAILED
        job.error = None if job.state == states.SUCCEEDED else {"code": 13, "message": "exit code 1"}
        peak = rng.uniform(0.5, 0.95)
        job.hp_metrics = ([{"globalStep": step * 100, "timestamp": job.start_time.timestamp() + 60 * step,
                            "metrics": {metric: peak * (1 - 0.5 ** (step + 1))}} for step in range(10)]
                          if metric else [])
        # As the agent reports them (agent.outputs): each file's path under AIP_MODEL_DIR and size.
        job.model_artifacts = ({"host": "bench-node", "path": f"/work/gcs/{job.job_id}",
                                "files": [{"path": "model.pt", "sizeBytes": 48_213_504}]} if files else {})
        last = max(last, job.end_time)
    CustomJob.objects.bulk_update(jobs, ["state", "start_time", "end_time", "update_time", "error", "hp_metrics",
                                         "model_artifacts"], batch_size=500)
    return last


def _run_study(tuning_job: Any, *, rng: random.Random, now: dt.datetime, share: float = 1.0) -> None:
    """Finish ``share`` of the study's trials and let the study (and a pipeline on it) follow."""
    from trainhub.jobs.models import CustomJob
    from trainhub.tuning.services import study_advance

    jobs = list(CustomJob.objects.filter(trial__tuning_job=tuning_job).order_by("pk"))
    ended = _finish_jobs(jobs[:round(len(jobs) * share)], rng=rng, started=tuning_job.create_time,
                         metric="accuracy", files=True)
    study_advance(tuning_job=tuning_job, now=min(now, ended))


def build_studies(*, project: Any, user: Any, count: int, now: dt.datetime) -> None:
    """``count`` random-search studies of 8-50 trials: 80 % finished, 10 % half done, 10 % just queued."""
    from trainhub.tuning.services import tuning_job_create

    rng = random.Random(5)
    for index in range(count):
        created = now - dt.timedelta(seconds=rng.uniform(3600, 20 * 86400))
        tuning_job = tuning_job_create(project=project, location=LOCATION, user=user, now=created,
                                       body=_study_body(f"study-{index}", rng.randint(*TRIALS)))
        if index % 10 < 8:
            _run_study(tuning_job, rng=rng, now=now)
        elif index % 10 == 8:
            _run_study(tuning_job, rng=rng, now=now, share=0.5)


def build_pipelines(*, project: Any, user: Any, count: int, models: int, now: dt.datetime) -> None:
    """``count`` pipelines: four in five train a custom job whose model becomes a new version of
    one of ``models`` models, the fifth tunes a small study and registers its best trial; one in
    ten still runs."""
    from trainhub.jobs.models import CustomJob
    from trainhub.tuning.models import Model
    from trainhub.tuning.services import pipeline_create, pipeline_follow
    from trainhub.tuning.spec import CUSTOM_TASK, TUNING_TASK

    rng = random.Random(6)
    for index in range(count):
        created = now - dt.timedelta(seconds=rng.uniform(3600, 30 * 86400))
        model_id = f"bench-model-{index % models}"
        upload = {"displayName": model_id, "description": "bench model"}
        body: dict[str, Any] = {"displayName": f"pipeline-{index}", "modelToUpload": upload}
        if index % 5 == 4:
            study = _study_body(f"pipeline-study-{index}", TRIALS[0])
            study.pop("displayName")
            body.update(trainingTaskDefinition=TUNING_TASK, trainingTaskInputs=study)
        else:
            body.update(trainingTaskDefinition=CUSTOM_TASK, trainingTaskInputs={
                "workerPoolSpecs": [_pool()], "baseOutputDirectory": {"outputUriPrefix": f"gs://bench/p{index}/"}})
            # The first pipeline that registers a model creates it, later ones add versions.
            exists = Model.objects.filter(project=project, location=LOCATION, model_id=model_id).exists()
            body.update({"parentModel": f"projects/{project.project_id}/locations/{LOCATION}/models/{model_id}"}
                        if exists else {"modelId": model_id})
        pipeline = pipeline_create(project=project, location=LOCATION, user=user, body=body, now=created)
        if index % 10 == 9:
            continue
        if pipeline.tuning_job is not None:
            _run_study(pipeline.tuning_job, rng=rng, now=now)
        else:
            job = CustomJob.objects.get(pk=pipeline.custom_job_id)
            ended = _finish_jobs([job], rng=rng, started=created, metric=None, files=True)
            pipeline_follow(pipeline=pipeline, now=min(now, ended))


def build_resources(*, project: Any, user: Any, count: int, now: dt.datetime) -> str:
    """``count`` RUNNING persistent resources of 2-4 L4 machines each (on a node pool of their own),
    each with finished jobs and jobs waiting or running on it; returns the first one's id."""
    from trainhub.inventory.models import Executor, Node
    from trainhub.inventory.services import node_heartbeat, node_pool_ensure
    from trainhub.jobs.services import job_submit
    from trainhub.resources.services import persistent_resource_create, persistent_resources_advance
    from trainhub.scheduling.quota import quota_metric
    from trainhub.scheduling.services import quota_set

    rng = random.Random(8)
    sizes = [rng.randint(2, 4) for _ in range(count)]
    pool = node_pool_ensure(name="bench-resources", machine_type=RESOURCE_MACHINE, node_count=sum(sizes),
                            executor=Executor.SIMULATED)
    node_heartbeat(node_ids=list(Node.objects.filter(pool=pool).values_list("pk", flat=True)), now=now)
    quota_set(project=project, location=LOCATION, metric=quota_metric(RESOURCE_GPU, "STANDARD"), limit=4096,
              actor="bench")
    machine = {"machineType": RESOURCE_MACHINE}
    created = now - dt.timedelta(days=2)
    for index, size in enumerate(sizes):
        persistent_resource_create(
            project=project, location=LOCATION, resource_id=f"bench-pr-{index}", user=user, now=created,
            body={"displayName": f"bench resource {index}",
                  "resourcePools": [{"id": "l4", "machineSpec": machine, "replicaCount": size}]})
    persistent_resources_advance(now=created)
    for index, size in enumerate(sizes):
        body = {"displayName": f"on-pr-{index}",
                "jobSpec": {"workerPoolSpecs": [_pool(RESOURCE_MACHINE)], "persistentResourceId": f"bench-pr-{index}"}}
        finished = [job_submit(project=project, location=LOCATION, user=user, body=body, now=created)
                    for _ in range(3 * size)]
        _finish_jobs(finished, rng=rng, started=created, metric=None, files=False)
        for _ in range(2 * size):  # the scheduler pass that ends the dataset's build starts those that fit
            job_submit(project=project, location=LOCATION, user=user, body=body, now=now)
    return "bench-pr-0"
