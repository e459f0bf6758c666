"""Parse and validate a HyperparameterTuningJob and a TrainingPipeline document (Vertex AI v1
wire format) into canonical camelCase documents. Pure Python, no Django.

HyperparameterTuningJob (shared/reference/vertex-api.md section 6): displayName (required, at
most 128 characters), studySpec (see tuning.search), maxTrialCount and parallelTrialCount
(required, at least 1), maxFailedTrialCount (0 = the service decides, see
search.default_max_failed_trials), trialJobSpec (a CustomJobSpec, validated exactly as a
CustomJob's jobSpec), labels. Output-only fields sent back (name, state, trials, ...) are ignored.

TrainingPipeline (section 7): displayName, trainingTaskDefinition (the custom task or the
hyperparameter tuning task schema URI), trainingTaskInputs shaped like a CustomJobSpec or like
{studySpec, maxTrialCount, parallelTrialCount, maxFailedTrialCount, trialJobSpec},
inputDataConfig (datasetId, fractionSplit whose fractions are each in [0, 1] and sum to at most
1 - default 0.8/0.1/0.1 -, gcsDestination), modelToUpload {displayName, description,
artifactUri, containerSpec, labels}, modelId, parentModel, labels.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Callable

from trainhub.common.errors import FieldViolation
from trainhub.common.wire import camelize, parse_int
from trainhub.jobs.spec import Checker, SpecError, parse_custom_job, parse_labels
from trainhub.tuning.search import Study, StudySpecError, parse_study_spec

MAX_TRIALS = 10_000
_TUNING_FIELDS = {"displayName", "studySpec", "maxTrialCount", "parallelTrialCount", "maxFailedTrialCount",
                  "trialJobSpec", "labels", "encryptionSpec"}
_OUTPUT_ONLY = {"name", "trials", "state", "createTime", "startTime", "endTime", "updateTime", "error",
                "satisfiesPzs", "satisfiesPzi", "trainhubStatus"}

CUSTOM_TASK = "gs://google-cloud-aiplatform/schema/trainingjob/definition/custom_task_1.0.0.yaml"
TUNING_TASK = "gs://google-cloud-aiplatform/schema/trainingjob/definition/hyperparameter_tuning_task_1.0.0.yaml"
_PIPELINE_FIELDS = {"displayName", "trainingTaskDefinition", "trainingTaskInputs", "inputDataConfig",
                    "modelToUpload", "modelId", "parentModel", "labels", "encryptionSpec"}
_PIPELINE_OUTPUT_ONLY = {"name", "state", "error", "createTime", "startTime", "endTime", "updateTime",
                         "trainingTaskMetadata", "trainhubStatus"}
_UNSUPPORTED_SPLITS = ("filterSplit", "predefinedSplit", "timestampSplit", "stratifiedSplit")
_INPUT_DATA_FIELDS = {"datasetId", "fractionSplit", "gcsDestination", "bigqueryDestination", "annotationsFilter",
                      "annotationSchemaUri", "savedQueryId", "persistMlUseAssignment", *_UNSUPPORTED_SPLITS}
#: A registered model's serving container, kept as given: capped like the rest of a stored document.
MAX_MODEL_CONTAINER_SPEC = 16_384
_MODEL_FIELDS = {"displayName", "description", "artifactUri", "containerSpec", "labels"}
DEFAULT_FRACTIONS = {"trainingFraction": 0.8, "validationFraction": 0.1, "testFraction": 0.1}
_MODEL_ID = re.compile(r"^[a-z_][a-z0-9_-]{0,62}$")
_MODEL_NAME = re.compile(r"^projects/[^/]+/locations/[^/]+/models/[^/@]+$")


class DocumentError(Exception):
    def __init__(self, violations: list[FieldViolation]):
        super().__init__("; ".join(f"{v.field}: {v.description}" for v in violations))
        self.violations = violations


@dataclass(frozen=True)
class ParsedTuningJob:
    document: dict[str, Any]
    study: Study

    def trial_job_body(self, display_name: str, parameters: list[str]) -> dict[str, Any]:
        """The CustomJob of one trial: trialJobSpec with ``parameters`` (``--id=value`` flags)
        appended to the args of every worker pool."""
        job_spec = each_task(self.document["trialJobSpec"],
                             lambda task: {**task, "args": [*task.get("args", []), *parameters]})
        return {"displayName": display_name, "labels": self.document["labels"], "jobSpec": job_spec}


def each_task(job_spec: dict[str, Any], change: Callable[[dict[str, Any]], dict[str, Any]]) -> dict[str, Any]:
    """``job_spec`` with ``change`` applied to the containerSpec / pythonPackageSpec of every pool."""
    pools = []
    for pool in job_spec["workerPoolSpecs"]:
        if pool:
            key = "containerSpec" if "containerSpec" in pool else "pythonPackageSpec"
            pool = {**pool, key: change(pool[key])}
        pools.append(pool)
    return {**job_spec, "workerPoolSpecs": pools}


def _moved(violations: list[FieldViolation], old: str, new: str) -> list[FieldViolation]:
    return [FieldViolation(new + v.field[len(old):] if v.field.startswith(old) else v.field, v.description)
            for v in violations]


def _check_custom_job_spec(check: Checker, body: dict[str, Any], path: str) -> dict[str, Any] | None:
    """A CustomJobSpec checked by the CustomJob parser; its violations reported under ``path``."""
    try:
        return parse_custom_job(body).document
    except SpecError as exc:
        check.violations += _moved(exc.violations, "jobSpec", path)
        return None


def _count(check: Checker, value: Any, path: str, *, minimum: int, required: bool) -> int:
    if value is None:
        if required:
            check.add(path, "is required")
        return 0
    return check.wire(parse_int, value, path, minimum=minimum, maximum=MAX_TRIALS) or 0


def _parse_tuning(check: Checker, job: dict[str, Any], prefix: str = "") -> ParsedTuningJob | None:
    study = None
    try:
        study, canonical_study = parse_study_spec(job.get("studySpec"))
    except StudySpecError as exc:
        check.violations += _moved(exc.violations, "studySpec", f"{prefix}studySpec")
    counts = {key: _count(check, job.get(key), f"{prefix}{key}", minimum=1, required=True)
              for key in ("maxTrialCount", "parallelTrialCount")}
    counts["maxFailedTrialCount"] = _count(check, job.get("maxFailedTrialCount"), f"{prefix}maxFailedTrialCount",
                                           minimum=0, required=False)
    spec = job.get("trialJobSpec")
    if spec is None:
        check.add(f"{prefix}trialJobSpec", "is required")
    custom_job = _check_custom_job_spec(
        check, {key: job[key] for key in ("displayName", "labels", "encryptionSpec") if key in job} | {"jobSpec": spec},
        f"{prefix}trialJobSpec") if spec is not None else None
    if check.violations or study is None or custom_job is None:
        return None
    document = {"displayName": custom_job["displayName"], "studySpec": canonical_study, **counts,
                "trialJobSpec": custom_job["jobSpec"], "labels": custom_job["labels"]}
    if "encryptionSpec" in custom_job:
        document["encryptionSpec"] = custom_job["encryptionSpec"]
    return ParsedTuningJob(document, study)


def _top_level(check: Checker, body: Any, allowed: set[str], kind: str) -> dict[str, Any]:
    """The request body with camelCase keys, its unknown fields recorded as violations."""
    document = camelize(body, verbatim_maps=frozenset({"labels"})) if isinstance(body, dict) else body
    resource = check.mapping(document, "", allowed)
    if resource is None:
        raise DocumentError(check.violations or [FieldViolation(kind, "must be a JSON object")])
    return resource


def parse_tuning_job(body: Any) -> ParsedTuningJob:
    """Validate a HyperparameterTuningJob body; raise DocumentError with every violation."""
    check = Checker()
    job = _top_level(check, body, _TUNING_FIELDS | _OUTPUT_ONLY, "hyperparameterTuningJob")
    parsed = _parse_tuning(check, job)
    if parsed is None:
        raise DocumentError(check.violations)
    return parsed


def study_of(document: dict[str, Any]) -> ParsedTuningJob:
    """A stored canonical tuning document back as a ParsedTuningJob (it was valid when stored)."""
    return ParsedTuningJob(document, parse_study_spec(document["studySpec"])[0])


@dataclass(frozen=True)
class ParsedPipeline:
    document: dict[str, Any]
    #: The tuning job to run for a hyperparameter tuning task; None for a custom task.
    tuning: ParsedTuningJob | None


def _parse_fractions(check: Checker, value: Any) -> dict[str, float]:
    split = check.mapping(value, "inputDataConfig.fractionSplit", set(DEFAULT_FRACTIONS), required=False)
    if split is None:
        return dict(DEFAULT_FRACTIONS)
    fractions = {}
    for key in DEFAULT_FRACTIONS:
        raw = split.get(key, 0)
        if isinstance(raw, bool) or not isinstance(raw, (int, float)) or not 0 <= raw <= 1:
            check.add(f"inputDataConfig.fractionSplit.{key}", f"must be a number between 0 and 1, got {raw!r}")
            continue
        fractions[key] = float(raw)
    if len(fractions) == len(DEFAULT_FRACTIONS) and sum(fractions.values()) > 1 + 1e-9:
        check.add("inputDataConfig.fractionSplit", f"the fractions must sum to at most 1, got "
                                                   f"{sum(fractions.values()):g}")
    return fractions


def _parse_input_data(check: Checker, value: Any) -> dict[str, Any] | None:
    config = check.mapping(value, "inputDataConfig", _INPUT_DATA_FIELDS, required=False)
    if config is None:
        return None
    dataset = check.string(config.get("datasetId"), "inputDataConfig.datasetId", required=True, max_length=128)
    for key in (*_UNSUPPORTED_SPLITS, "bigqueryDestination"):
        if config.get(key) is not None:
            check.add(f"inputDataConfig.{key}", "is not supported by trainhub; use fractionSplit and gcsDestination")
    fractions = _parse_fractions(check, config.get("fractionSplit"))
    destination = check.mapping(config.get("gcsDestination"), "inputDataConfig.gcsDestination", {"outputUriPrefix"})
    prefix = check.string((destination or {}).get("outputUriPrefix"), "inputDataConfig.gcsDestination.outputUriPrefix",
                          required=destination is not None, max_length=1024)
    if not dataset or not prefix:
        return None
    return {"datasetId": dataset, "fractionSplit": fractions,
            "gcsDestination": {"outputUriPrefix": prefix if prefix.endswith("/") else prefix + "/"}}


def _parse_model(check: Checker, value: Any) -> dict[str, Any] | None:
    model = check.mapping(value, "modelToUpload", _MODEL_FIELDS, required=False)
    if model is None:
        return None
    canonical = {"displayName": check.string(model.get("displayName"), "modelToUpload.displayName",
                                             required=True, max_length=128)}
    for key in ("description", "artifactUri"):
        text = check.string(model.get(key), f"modelToUpload.{key}", max_length=2048)
        if text:
            canonical[key] = text
    labels = parse_labels(check, model.get("labels"), "modelToUpload.labels")
    if labels:
        canonical["labels"] = labels
    container = model.get("containerSpec")
    if container:
        if not isinstance(container, dict):
            check.add("modelToUpload.containerSpec", "must be an object")
        elif len(json.dumps(container)) > MAX_MODEL_CONTAINER_SPEC:
            check.add("modelToUpload.containerSpec", f"must be at most {MAX_MODEL_CONTAINER_SPEC} characters as JSON")
        else:
            canonical["containerSpec"] = container
    return canonical


def parse_pipeline(body: Any) -> ParsedPipeline:
    """Validate a TrainingPipeline body; raise DocumentError with every violation."""
    check = Checker()
    pipeline = _top_level(check, body, _PIPELINE_FIELDS | _PIPELINE_OUTPUT_ONLY, "trainingPipeline")
    definition = check.string(pipeline.get("trainingTaskDefinition"), "trainingTaskDefinition", required=True)
    if definition and definition not in (CUSTOM_TASK, TUNING_TASK):
        check.add("trainingTaskDefinition", f"must be {CUSTOM_TASK} or {TUNING_TASK}")
    inputs = check.mapping(pipeline.get("trainingTaskInputs"), "trainingTaskInputs", _TUNING_FIELDS) \
        if definition == TUNING_TASK else pipeline.get("trainingTaskInputs")
    shared = {key: pipeline[key] for key in ("displayName", "labels") if key in pipeline}
    tuning = canonical_inputs = labels = None
    if inputs is None:
        check.add("trainingTaskInputs", "is required")
    elif definition == TUNING_TASK:
        tuning = _parse_tuning(check, {**inputs, **shared}, prefix="trainingTaskInputs.")
        if tuning is not None:
            labels = tuning.document["labels"]
            canonical_inputs = {key: tuning.document[key] for key in ("studySpec", "maxTrialCount",
                                "parallelTrialCount", "maxFailedTrialCount", "trialJobSpec")}
    elif definition == CUSTOM_TASK:
        custom_job = _check_custom_job_spec(check, {**shared, "jobSpec": inputs}, "trainingTaskInputs")
        if custom_job is not None:
            labels, canonical_inputs = custom_job["labels"], custom_job["jobSpec"]
    input_data = _parse_input_data(check, pipeline.get("inputDataConfig"))
    model = _parse_model(check, pipeline.get("modelToUpload"))
    model_id = check.string(pipeline.get("modelId"), "modelId", max_length=63)
    if model_id and not _MODEL_ID.match(model_id):
        check.add("modelId", "must be at most 63 lowercase letters, digits, '_' or '-', not starting with a "
                             "digit or '-'")
    parent = check.string(pipeline.get("parentModel"), "parentModel", max_length=512)
    if parent and not _MODEL_NAME.match(parent):
        check.add("parentModel", "must be projects/PROJECT/locations/LOCATION/models/MODEL")
    if (model_id or parent) and model is None:
        check.add("modelToUpload", "is required when modelId or parentModel is set")
    if check.violations or canonical_inputs is None:
        raise DocumentError(check.violations)
    canonical = {"displayName": shared["displayName"], "trainingTaskDefinition": definition,
                 "trainingTaskInputs": canonical_inputs, "labels": labels}
    for key, value in (("inputDataConfig", input_data), ("modelToUpload", model), ("modelId", model_id),
                       ("parentModel", parent)):
        if value:
            canonical[key] = value
    return ParsedPipeline(canonical, tuning)


def data_environment(input_data: dict[str, Any], *, export_name: str) -> list[dict[str, str]]:
    """The variables Vertex sets for a pipeline's inputDataConfig with a gcsDestination: where the
    training, validation and test splits are (AIP_DATA_FORMAT jsonl and one wildcard URI each,
    under ``<outputUriPrefix><export_name>/``)."""
    base = f"{input_data['gcsDestination']['outputUriPrefix']}{export_name}/"
    return [{"name": "AIP_DATA_FORMAT", "value": "jsonl"},
            {"name": "AIP_TRAINING_DATA_URI", "value": f"{base}training-*.jsonl"},
            {"name": "AIP_VALIDATION_DATA_URI", "value": f"{base}validation-*.jsonl"},
            {"name": "AIP_TEST_DATA_URI", "value": f"{base}test-*.jsonl"}]


def with_environment(job_spec: dict[str, Any], env: list[dict[str, str]]) -> dict[str, Any]:
    """``job_spec`` with ``env`` put before each pool's own variables, so the pool's win."""
    return each_task(job_spec, lambda task: {**task, "env": [*env, *task.get("env", [])]})
