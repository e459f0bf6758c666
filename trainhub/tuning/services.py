"""Every write to tuning jobs, trials, training pipelines and registered models happens here.

A study advances (``study_advance``) whenever one of its trials' CustomJobs changes state - the
jobs app sends signals.job_state_changed, tuning.apps queues tasks.owned_job_changed - and on a
beat sweep as a safety net. Advancing is idempotent and runs under a row lock on the tuning job,
so two trials ending at once cannot launch the same trial twice.

Study rules: at most parallelTrialCount trials are live (REQUESTED, ACTIVE or STOPPING) at once;
trials are numbered from 1 and each runs as a CustomJob submitted through jobs.services.job_submit
(so FLEX_START, SPOT and persistentResourceId behave exactly as for any CustomJob); a trial whose
job fails, or succeeds without reporting the primary metric, is INFEASIBLE and counts as failed;
the study fails as soon as failed trials reach maxFailedTrialCount (0: see
search.default_max_failed_trials) and stops its live trials; it succeeds when maxTrialCount trials
(or the whole grid) are done and one of them SUCCEEDED, and fails when none did.
"""

from __future__ import annotations

import datetime as dt
import secrets
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from trainhub.common.errors import ApiError, FieldViolation, invalid_argument
from trainhub.common.locations import location_check
from trainhub.common.wire import format_duration
from trainhub.iam.models import Project
from trainhub.jobs import services as job_services
from trainhub.jobs import states
from trainhub.jobs.models import CustomJob
from trainhub.tuning import search
from trainhub.tuning.models import (
    ACTIVE,
    INFEASIBLE,
    REQUESTED,
    STOPPING,
    SUCCEEDED,
    HyperparameterTuningJob,
    Model,
    ModelVersion,
    TrainingPipeline,
    Trial,
    pipeline_state,
)
from trainhub.tuning.spec import (
    TUNING_TASK,
    DocumentError,
    ParsedTuningJob,
    data_environment,
    parse_pipeline,
    parse_tuning_job,
    study_of,
    with_environment,
)

CODE_CANCELLED = job_services.CODE_CANCELLED
CODE_ABORTED = job_services.CODE_ABORTED
CODE_FAILED_PRECONDITION = 9
_TRIAL_STATE_BY_JOB_STATE = {states.QUEUED: REQUESTED, states.PENDING: REQUESTED, states.RUNNING: ACTIVE,
                             states.CANCELLING: STOPPING}


def _new_id() -> str:
    # The same shape as CustomJob ids: 18 random decimal digits.
    return str(secrets.randbelow(9 * 10**17) + 10**17)


def _parse(parse, body: Any):
    try:
        return parse(body)
    except DocumentError as exc:
        raise invalid_argument(exc.violations) from exc


def _check_trial_jobs(*, project: Project, location: str, parsed: ParsedTuningJob) -> None:
    """Refuse at creation what job_submit would refuse for every trial (quota, persistent resource)."""
    sample = parsed.trial_job_body(parsed.document["displayName"], [])
    try:
        job_services.job_submission_check(project=project, location=location, body=sample)
    except ApiError as error:
        error.violations = [FieldViolation(v.field.replace("jobSpec", "trialJobSpec", 1), v.description)
                            for v in error.violations]
        raise


# Tuning jobs ---------------------------------------------------------------------------------------


def tuning_job_create(*, project: Project, location: str, user: AbstractBaseUser | None, body: Any,
                      now: dt.datetime | None = None) -> HyperparameterTuningJob:
    """Validate a HyperparameterTuningJob and start its first trials at once."""
    location_check(location)
    parsed = _parse(parse_tuning_job, body)
    return _tuning_job_start(project=project, location=location, user=user, parsed=parsed, now=now or timezone.now())


def _tuning_job_start(*, project: Project, location: str, user: AbstractBaseUser | None, parsed: ParsedTuningJob,
                      now: dt.datetime) -> HyperparameterTuningJob:
    _check_trial_jobs(project=project, location=location, parsed=parsed)
    document = parsed.document
    with transaction.atomic():
        job = HyperparameterTuningJob.objects.create(
            project=project, location=location, job_id=_new_id(), display_name=document["displayName"],
            spec=document, seed=secrets.randbelow(2**31),
            failure_limit=document["maxFailedTrialCount"] or search.default_max_failed_trials(
                document["maxTrialCount"]),
            created_by=user if user is not None and user.is_authenticated else None,
            create_time=now, update_time=now,
        )
        study_advance(tuning_job=job, now=now)
    job.refresh_from_db()
    return job


def _transition(job: HyperparameterTuningJob | TrainingPipeline, target: str, now: dt.datetime,
                error: dict | None = None) -> None:
    """Move a tuning job (JobState) or a pipeline (PipelineState, the same machine renamed)."""
    as_job_state = "JOB_STATE_" + job.short_state, "JOB_STATE_" + target.split("_STATE_", 1)[1]
    if as_job_state[0] == as_job_state[1]:
        return
    if as_job_state[1] == states.SUCCEEDED and as_job_state[0] in states.WAITING:
        # What it followed ran and finished between two looks: it was RUNNING meanwhile.
        _transition(job, target.replace("SUCCEEDED", "RUNNING"), now)
        as_job_state = states.RUNNING, states.SUCCEEDED
    states.check_transition(*as_job_state)
    job.state = target
    job.update_time = now
    if as_job_state[1] == states.RUNNING and job.start_time is None:
        job.start_time = now
    if as_job_state[1] in states.TERMINAL:
        job.end_time = now
    if error is not None:
        job.error = error
    job.save(update_fields=["state", "update_time", "start_time", "end_time", "error"])


def _render_measurement(measurement: search.Measurement) -> dict[str, Any]:
    return {"stepCount": str(measurement.step_count),
            "elapsedDuration": format_duration(round(measurement.elapsed_seconds, 3)),
            "metrics": [{"metricId": key, "value": value} for key, value in measurement.metrics.items()]}


def _trial_sync(trial: Trial, study: search.Study, now: dt.datetime) -> None:
    """Bring a live trial up to date with its CustomJob; a finished job finalises it."""
    job = trial.custom_job
    if trial.is_final:
        return
    if job is None:
        trial.state, trial.end_time = INFEASIBLE, now
        trial.infeasible_reason = "The trial's CustomJob was deleted."
    elif job.state not in states.TERMINAL:
        trial.state = _TRIAL_STATE_BY_JOB_STATE[job.state]
    else:
        started = (job.start_time or trial.start_time).timestamp()
        measurements = search.measurements_from_reports(job.hp_metrics, [m.metric_id for m in study.metrics], started)
        final = search.final_measurement(measurements, study)
        trial.measurements = [_render_measurement(m) for m in measurements]
        trial.final_measurement = _render_measurement(final) if final else None
        trial.objective = final.metrics[study.primary.metric_id] if final else None
        trial.end_time = job.end_time or now
        if job.state == states.SUCCEEDED and final is not None:
            trial.state = SUCCEEDED
        else:
            trial.state = INFEASIBLE
            trial.infeasible_reason = (job.error or {}).get("message") or (
                f"The trial's job ended {job.short_state} without reporting metric {study.primary.metric_id!r} "
                "through the hypertune file ($CLOUD_ML_HP_METRIC_FILE).")
    trial.save(update_fields=["state", "measurements", "final_measurement", "objective", "end_time",
                              "infeasible_reason"])


def _launch_trials(job: HyperparameterTuningJob, parsed: ParsedTuningJob, trials: list[Trial],
                   now: dt.datetime) -> list[Trial]:
    """Fill the free parallel slots with new trials; returns those created (possibly INFEASIBLE
    at once when their job could not be submitted)."""
    live = sum(1 for trial in trials if not trial.is_final)
    document = parsed.document
    slots = min(document["parallelTrialCount"] - live, document["maxTrialCount"] - len(trials))
    created = []
    for _ in range(max(0, slots)):
        history = [search.PastTrial({p["parameterId"]: p["value"] for p in t.parameters}, t.objective, t.is_final)
                   for t in trials]
        params = search.suggest(parsed.study, history, seed=job.seed)
        if params is None:
            break
        number = len(trials) + 1
        trial = Trial(tuning_job=job, number=number, parameters=search.parameters_list(parsed.study, params),
                      start_time=now)
        body = parsed.trial_job_body(f"{job.display_name}-trial-{number}", search.parameter_args(trial.parameters))
        try:
            trial.custom_job = job_services.job_submit(
                project=job.project, location=job.location, user=job.created_by, body=body, now=now,
                owner=job.owner_key, trial_id=trial.trial_id)
        except ApiError as error:
            trial.state, trial.end_time, trial.infeasible_reason = INFEASIBLE, now, error.message
        trial.save()
        trials.append(trial)
        created.append(trial)
    return created


def _failure_message(job: HyperparameterTuningJob, failed: list[Trial]) -> str:
    last = failed[-1]
    return (f"{len(failed)} trials failed, which reaches the study's limit of {job.failure_limit} failed trials "
            f"(maxFailedTrialCount). Trial {last.trial_id}: {last.infeasible_reason}")


def _stop_live_trials(trials: list[Trial], now: dt.datetime) -> None:
    for trial in trials:
        if not trial.is_final and trial.custom_job is not None:
            job_services.job_cancel(job=trial.custom_job, now=now)


def study_advance(*, tuning_job: HyperparameterTuningJob, now: dt.datetime) -> None:
    """Sync the trials with their jobs, then fail, finish, or launch trials into free slots."""
    with transaction.atomic():
        # of=self: PostgreSQL cannot lock the nullable side (created_by) of the join.
        job = (HyperparameterTuningJob.objects.select_for_update(of=("self",))
               .select_related("project", "created_by").get(pk=tuning_job.pk))
        parsed = study_of(job.spec)
        trials = list(job.trials.select_related("custom_job").order_by("number"))
        for trial in trials:
            _trial_sync(trial, parsed.study, now)
        if not job.is_terminal:
            _study_decide(job, parsed, trials, now)
    _pipelines_follow(job, now)


def _study_decide(job: HyperparameterTuningJob, parsed: ParsedTuningJob, trials: list[Trial],
                  now: dt.datetime) -> None:
    while True:
        live = [trial for trial in trials if not trial.is_final]
        failed = [trial for trial in trials if trial.state == INFEASIBLE]
        if job.state == states.CANCELLING:
            if not live:
                _transition(job, states.CANCELLED, now, {"code": CODE_CANCELLED, "message": "CANCELED"})
            return
        if len(failed) >= job.failure_limit:
            _stop_live_trials(trials, now)
            _transition(job, states.FAILED, now, {"code": CODE_ABORTED, "message": _failure_message(job, failed)})
            return
        created = _launch_trials(job, parsed, trials, now)
        # Trials whose job could not even be submitted are failures already: decide again.
        if not created or any(not trial.is_final for trial in created):
            break
    live = [trial for trial in trials if not trial.is_final]
    if live:
        # RUNNING from the first trial that started (or already ended); PENDING while all wait.
        _transition(job, states.PENDING if all(t.state == REQUESTED for t in trials) else states.RUNNING, now)
    elif any(trial.state == SUCCEEDED for trial in trials):
        _transition(job, states.SUCCEEDED, now)
    else:
        _transition(job, states.FAILED, now, {"code": CODE_ABORTED,
                                             "message": "No trial succeeded: " + "; ".join(
                                                 f"trial {t.trial_id}: {t.infeasible_reason}" for t in trials[-3:])})


def tuning_job_cancel(*, tuning_job: HyperparameterTuningJob, now: dt.datetime | None = None) -> None:
    """Vertex cancel: stop every live trial; the job is CANCELLED once none is left running.
    A finished job is left as it is."""
    now = now or timezone.now()
    with transaction.atomic():
        job = HyperparameterTuningJob.objects.select_for_update().get(pk=tuning_job.pk)
        if job.is_terminal or job.state == states.CANCELLING:
            return
        _transition(job, states.CANCELLING, now)
        _stop_live_trials(list(job.trials.select_related("custom_job")), now)
    study_advance(tuning_job=job, now=now)


def _refuse_unless_finished(resource: HyperparameterTuningJob | TrainingPipeline, kind: str) -> None:
    if not resource.is_terminal:
        raise ApiError(400, f"{kind} {resource.resource_name} is in state {resource.state} and cannot be deleted; "
                            "cancel it first.", "FAILED_PRECONDITION")


def tuning_job_delete(*, tuning_job: HyperparameterTuningJob) -> None:
    """Delete a finished tuning job and its trials (their CustomJobs stay, as jobs of their own)."""
    _refuse_unless_finished(tuning_job, "HyperparameterTuningJob")
    tuning_job.delete()


def owned_job_changed(*, job_pk: int, now: dt.datetime) -> None:
    """A CustomJob submitted by a tuning job or a pipeline changed state: let its owner react."""
    owner = CustomJob.objects.filter(pk=job_pk).values_list("owner", flat=True).first() or ""
    kind, _, pk = owner.partition("/")
    if kind == "hyperparameterTuningJobs":
        tuning_job = HyperparameterTuningJob.objects.filter(pk=pk).first()
        if tuning_job is not None:
            study_advance(tuning_job=tuning_job, now=now)
    elif kind == "trainingPipelines":
        pipeline = TrainingPipeline.objects.filter(pk=pk).first()
        if pipeline is not None:
            pipeline_follow(pipeline=pipeline, now=now)


def live_work_advance(*, now: dt.datetime) -> int:
    """The beat's safety net: advance every unfinished study and pipeline (a lost signal or task
    costs at most one sweep interval). Returns how many were looked at."""
    studies = list(HyperparameterTuningJob.objects.exclude(state__in=states.TERMINAL))
    for tuning_job in studies:
        study_advance(tuning_job=tuning_job, now=now)
    pipelines = list(TrainingPipeline.objects.exclude(state__in=[pipeline_state(s) for s in states.TERMINAL]))
    for pipeline in pipelines:
        pipeline_follow(pipeline=pipeline, now=now)
    return len(studies) + len(pipelines)


# Training pipelines ------------------------------------------------------------------------------------


def _model_lookup(*, project: Project, location: str, name: str) -> Model | None:
    model_id = name.rsplit("/", 1)[1]
    if name != f"projects/{project.project_id}/locations/{location}/models/{model_id}":
        return None
    return Model.objects.filter(project=project, location=location, model_id=model_id).first()


def pipeline_create(*, project: Project, location: str, user: AbstractBaseUser | None, body: Any,
                    now: dt.datetime | None = None) -> TrainingPipeline:
    """Validate a TrainingPipeline and submit the CustomJob or tuning job it runs."""
    location_check(location)
    parsed = _parse(parse_pipeline, body)
    document = parsed.document
    now = now or timezone.now()
    if document.get("parentModel") and _model_lookup(project=project, location=location,
                                                     name=document["parentModel"]) is None:
        raise invalid_argument([FieldViolation("parentModel", f"model {document['parentModel']} was not found in "
                                                              f"projects/{project.project_id}/locations/{location}")])
    if document.get("modelId") and not document.get("parentModel") and Model.objects.filter(
            project=project, location=location, model_id=document["modelId"]).exists():
        raise ApiError(409, f"Model {document['modelId']!r} already exists; set parentModel to add a version.",
                       "ALREADY_EXISTS")
    with transaction.atomic():
        pipeline = TrainingPipeline.objects.create(
            project=project, location=location, pipeline_id=_new_id(), display_name=document["displayName"],
            spec=document, created_by=user if user is not None and user.is_authenticated else None,
            create_time=now, update_time=now)
        env = []
        if "inputDataConfig" in document:
            export = f"dataset-{document['inputDataConfig']['datasetId']}-{now.strftime('%Y-%m-%dT%H:%M:%S.%fZ')}"
            env = data_environment(document["inputDataConfig"], export_name=export)
        if parsed.tuning is not None:
            tuning_document = {**parsed.tuning.document,
                               "trialJobSpec": with_environment(parsed.tuning.document["trialJobSpec"], env)}
            pipeline.tuning_job = _tuning_job_start(project=project, location=location, user=user,
                                                    parsed=ParsedTuningJob(tuning_document, parsed.tuning.study),
                                                    now=now)
        else:
            pipeline.custom_job = job_services.job_submit(
                project=project, location=location, user=user, now=now, owner=pipeline.owner_key,
                body={"displayName": document["displayName"], "labels": document["labels"],
                      "jobSpec": with_environment(document["trainingTaskInputs"], env)})
        pipeline.save(update_fields=["tuning_job", "custom_job"])
        pipeline_follow(pipeline=pipeline, now=now)
    pipeline.refresh_from_db()
    return pipeline


def _pipelines_follow(tuning_job: HyperparameterTuningJob, now: dt.datetime) -> None:
    for pipeline in TrainingPipeline.objects.filter(tuning_job=tuning_job).exclude(
            state__in=[pipeline_state(s) for s in states.TERMINAL]):
        pipeline_follow(pipeline=pipeline, now=now)


def pipeline_follow(*, pipeline: TrainingPipeline, now: dt.datetime) -> None:
    """Mirror the state of the job the pipeline runs; on success register its model first."""
    with transaction.atomic():
        pipeline = TrainingPipeline.objects.select_for_update(of=("self",)).select_related(
            "project", "custom_job", "tuning_job").get(pk=pipeline.pk)
        if pipeline.is_terminal:
            return
        source = pipeline.tuning_job if pipeline.spec["trainingTaskDefinition"] == TUNING_TASK else pipeline.custom_job
        if source is None:
            _transition(pipeline, "PIPELINE_STATE_FAILED", now,
                        {"code": CODE_FAILED_PRECONDITION, "message": "The pipeline's training job was deleted."})
            return
        if source.state != states.SUCCEEDED:
            _transition(pipeline, pipeline_state(source.state), now, source.error if source.is_terminal else None)
            return
        if "modelToUpload" in pipeline.spec:
            try:
                _model_register(pipeline, now)
            except _UploadFailed as failure:
                _transition(pipeline, "PIPELINE_STATE_FAILED", now,
                            {"code": CODE_FAILED_PRECONDITION, "message": str(failure)})
                return
        _transition(pipeline, "PIPELINE_STATE_SUCCEEDED", now)


class _UploadFailed(Exception):
    pass


def _producing_job(pipeline: TrainingPipeline) -> tuple[CustomJob, dict[str, float]]:
    """The job whose model is uploaded (the best trial's, for a tuning task) and its metrics."""
    if pipeline.tuning_job is None:
        return pipeline.custom_job, {}
    study = study_of(pipeline.tuning_job.spec).study
    order = "-objective" if study.primary.maximize else "objective"
    best = (pipeline.tuning_job.trials.filter(state=SUCCEEDED, custom_job__isnull=False)
            .select_related("custom_job").order_by(order, "number").first())
    if best is None:
        raise _UploadFailed("No trial succeeded, so there is no model to upload.")
    metrics = {m["metricId"]: m["value"] for m in best.final_measurement["metrics"]}
    return best.custom_job, metrics


def _model_register(pipeline: TrainingPipeline, now: dt.datetime) -> ModelVersion:
    spec = pipeline.spec
    upload = spec["modelToUpload"]
    job, metrics = _producing_job(pipeline)
    base = (job.spec["jobSpec"].get("baseOutputDirectory") or {}).get("outputUriPrefix")
    model_dir = f"{base}{job.trial_id + '/' if job.trial_id else ''}model/" if base else None
    artifacts = job.model_artifacts or {}
    uri = upload.get("artifactUri") or model_dir
    if uri is None:
        raise _UploadFailed("modelToUpload has no artifactUri and the training job has no baseOutputDirectory, "
                            "so there is no AIP_MODEL_DIR to take the model from.")
    if "artifactUri" not in upload and not artifacts.get("files"):
        raise _UploadFailed(f"No model artefacts were found under AIP_MODEL_DIR ({uri}; on node "
                            f"{artifacts.get('host', 'unknown')} at {artifacts.get('path', 'unknown')}): the "
                            "training code must save its model there.")
    if spec.get("parentModel"):
        model = _model_lookup(project=pipeline.project, location=pipeline.location, name=spec["parentModel"])
        if model is None:
            raise _UploadFailed(f"The parent model {spec['parentModel']} no longer exists.")
    else:
        model, _ = Model.objects.get_or_create(
            project=pipeline.project, location=pipeline.location, model_id=spec.get("modelId") or _new_id(),
            defaults={"display_name": upload["displayName"], "description": upload.get("description", ""),
                      "labels": upload.get("labels", {}), "create_time": now, "update_time": now})
    model = Model.objects.select_for_update().get(pk=model.pk)
    model.update_time = now
    model.save(update_fields=["update_time"])
    latest = model.versions.aggregate(latest=Max("version"))["latest"] or 0
    from_agent = "artifactUri" not in upload or upload["artifactUri"] == model_dir
    return ModelVersion.objects.create(
        model=model, version=latest + 1, artifact_uri=uri,
        host=artifacts.get("host", "") if from_agent else "", path=artifacts.get("path", "") if from_agent else "",
        files=artifacts.get("files", []) if from_agent else [], metrics=metrics,
        container_spec=upload.get("containerSpec"), pipeline=pipeline, custom_job=job, create_time=now)


def pipeline_cancel(*, pipeline: TrainingPipeline, now: dt.datetime | None = None) -> None:
    """Cancel the job the pipeline runs; the pipeline follows it to CANCELLED."""
    now = now or timezone.now()
    if pipeline.is_terminal:
        return
    if pipeline.tuning_job is not None:
        tuning_job_cancel(tuning_job=pipeline.tuning_job, now=now)
    elif pipeline.custom_job is not None:
        job_services.job_cancel(job=pipeline.custom_job, now=now)
    pipeline_follow(pipeline=pipeline, now=now)


def pipeline_delete(*, pipeline: TrainingPipeline) -> None:
    _refuse_unless_finished(pipeline, "TrainingPipeline")
    pipeline.delete()
