"""JSON schemas of the HyperparameterTuningJob and TrainingPipeline requests (Vertex AI v1) for
/api/schema/.

They follow tuning.spec and tuning.search: the names and shapes they accept (camelCase shown;
the parsers also take snake_case), enums by name or number, int64 as number or string. The
parsers stay the judge (feasible spaces, log scales, fractions summing to at most 1, ...).
"""

from __future__ import annotations

from trainhub.common.openapi import Schema, enum, int64, obj
from trainhub.jobs.openapi import JOB_SPEC, LABELS
from trainhub.tuning import search, spec

#: Tuning jobs, pipelines and models are documented in vertex-api.md; the schema names only their shape.
RESOURCE: Schema = {"type": "object", "description": "A Vertex AI v1 resource in its JSON wire format."}

_NUMBERS: Schema = {"type": "array", "items": {"type": "number"}}
PARAMETER = obj({
    "parameterId": {"type": "string", "minLength": 1},
    "doubleValueSpec": obj({"minValue": {"type": "number"}, "maxValue": {"type": "number"}}),
    "integerValueSpec": obj({"minValue": int64(), "maxValue": int64()}),
    "categoricalValueSpec": obj({"values": {"type": "array", "items": {"type": "string"}}}),
    "discreteValueSpec": obj({"values": _NUMBERS}),
    "scaleType": enum(list(search.SCALES.values())),
    "conditionalParameterSpecs": {"type": "array", "items": {"type": "object"}},
}, required=("parameterId",))
STUDY_SPEC = obj({
    "metrics": {"type": "array", "items": obj({"metricId": {"type": "string"},
                                               "goal": enum(list(search.GOALS.values()))},
                                              required=("metricId", "goal"))},
    "parameters": {"type": "array", "items": PARAMETER},
    "algorithm": enum(list(search.ALGORITHMS.values())),
    "measurementSelectionType": {"type": "string"},
}, required=("metrics", "parameters"))
TUNING_INPUTS = {
    "studySpec": STUDY_SPEC,
    "maxTrialCount": int64(minimum=1, maximum=spec.MAX_TRIALS),
    "parallelTrialCount": int64(minimum=1, maximum=spec.MAX_TRIALS),
    "maxFailedTrialCount": int64(minimum=0, maximum=spec.MAX_TRIALS),
    "trialJobSpec": JOB_SPEC,
}
_EXAMPLE_JOB_SPEC = {"workerPoolSpecs": [{"machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": 1,
                                          "containerSpec": {"imageUri": "python:3.11", "command": ["true"]}}]}
TUNING_JOB_REQUEST: Schema = {**obj({
    "displayName": {"type": "string", "minLength": 1},
    **TUNING_INPUTS,
    "labels": LABELS,
}, required=("displayName", "studySpec", "maxTrialCount", "parallelTrialCount", "trialJobSpec"), extra=True),
    "example": {"displayName": "sweep", "maxTrialCount": 2, "parallelTrialCount": 1,
                "studySpec": {"metrics": [{"metricId": "score", "goal": "MAXIMIZE"}], "algorithm": "GRID_SEARCH",
                              "parameters": [{"parameterId": "lr", "discreteValueSpec": {"values": [0.1, 0.01]}}]},
                "trialJobSpec": _EXAMPLE_JOB_SPEC}}
PIPELINE_REQUEST: Schema = {**obj({
    "displayName": {"type": "string", "minLength": 1},
    "trainingTaskDefinition": {"type": "string", "enum": [spec.CUSTOM_TASK, spec.TUNING_TASK]},
    "trainingTaskInputs": {"anyOf": [JOB_SPEC, obj(TUNING_INPUTS)],
                           "description": "A CustomJobSpec for the custom task, a tuning job's fields for the "
                                          "tuning task."},
    "inputDataConfig": obj({
        "datasetId": {"type": "string"},
        "fractionSplit": obj({key: {"type": "number", "minimum": 0, "maximum": 1} for key in spec.DEFAULT_FRACTIONS}),
        "gcsDestination": obj({"outputUriPrefix": {"type": "string"}}, required=("outputUriPrefix",)),
    }, required=("datasetId",), extra=True),
    "modelToUpload": obj({"displayName": {"type": "string"}, "description": {"type": "string"},
                          "artifactUri": {"type": "string"}, "containerSpec": {"type": "object"}, "labels": LABELS},
                         required=("displayName",)),
    "modelId": {"type": "string"},
    "parentModel": {"type": "string"},
    "labels": LABELS,
}, required=("displayName", "trainingTaskDefinition", "trainingTaskInputs"), extra=True),
    "example": {"displayName": "train", "trainingTaskDefinition": spec.CUSTOM_TASK,
                "trainingTaskInputs": _EXAMPLE_JOB_SPEC, "modelToUpload": {"displayName": "model"}}}
