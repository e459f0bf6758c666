"""JSON schemas of the CustomJob REST resource (Vertex AI v1) for /api/schema/.

The request schema follows jobs.spec: the names and shapes it accepts (camelCase shown; the
parser also takes snake_case), enums by name or number, int64 as number or string. The parser
stays the judge - it also checks machine/accelerator pairs, FLEX_START rules and limits.
"""

from __future__ import annotations

from trainhub.catalog.machines import ACCELERATOR_TYPES, MACHINE_TYPES
from trainhub.common.openapi import DURATION, TIMESTAMP, Schema, enum, int64, obj
from trainhub.jobs import spec, states

_STRINGS: Schema = {"type": "array", "items": {"type": "string"}}
_ENV: Schema = {"type": "array", "maxItems": spec.MAX_ENV_VARS, "items": obj(
    {"name": {"type": "string", "pattern": "^[A-Za-z_][A-Za-z0-9_]*$"}, "value": {"type": "string"}},
    required=("name",))}

MACHINE_SPEC = obj({
    "machineType": {"type": "string", "enum": sorted(MACHINE_TYPES)},
    "acceleratorType": enum(list(ACCELERATOR_TYPES.values())),
    "acceleratorCount": int64(minimum=0),
}, required=("machineType",))

WORKER_POOL_SPEC = obj({
    "machineSpec": MACHINE_SPEC,
    "replicaCount": int64(minimum=1, maximum=spec.MAX_REPLICAS_PER_POOL),
    "diskSpec": obj({"bootDiskType": {"type": "string", "enum": list(spec.DISK_TYPES)},
                     "bootDiskSizeGb": int64(minimum=100, maximum=64000)}),
    "containerSpec": obj({"imageUri": {"type": "string", "minLength": 1}, "command": _STRINGS, "args": _STRINGS,
                          "env": _ENV}, required=("imageUri",)),
    "pythonPackageSpec": obj({"executorImageUri": {"type": "string", "minLength": 1},
                              "packageUris": {**_STRINGS, "minItems": 1}, "pythonModule": {"type": "string"},
                              "args": _STRINGS, "env": _ENV},
                             required=("executorImageUri", "packageUris", "pythonModule")),
}, required=("machineSpec",))

SCHEDULING = obj({
    "timeout": DURATION,
    "maxWaitDuration": {**DURATION, "description": "FLEX_START only: \"0s\" waits forever; unset waits one day."},
    "strategy": enum(list(spec.STRATEGIES.values())),
    "restartJobOnWorkerRestart": {"type": "boolean"},
    "disableRetries": {"type": "boolean"},
})

JOB_SPEC = obj({
    "workerPoolSpecs": {"type": "array", "minItems": 1, "maxItems": spec.MAX_WORKER_POOLS,
                        "items": {"anyOf": [WORKER_POOL_SPEC, obj({})]},
                        "description": "Pool 0 (the primary) has replicaCount 1; later pools may be {}."},
    "scheduling": SCHEDULING,
    "baseOutputDirectory": obj({"outputUriPrefix": {"type": "string"}}, required=("outputUriPrefix",)),
    "serviceAccount": {"type": "string"},
    "network": {"type": "string"},
    "enableWebAccess": {"type": "boolean"},
    "enableDashboardAccess": {"type": "boolean"},
}, required=("workerPoolSpecs",))

LABELS: Schema = {"type": "object", "additionalProperties": {"type": "string"}, "maxProperties": 64}

CUSTOM_JOB_REQUEST = {**obj({
    "displayName": {"type": "string", "minLength": 1, "maxLength": spec.MAX_DISPLAY_NAME},
    "jobSpec": JOB_SPEC,
    "labels": LABELS,
}, required=("displayName", "jobSpec")), "example": {
    "displayName": "MyDwsJob",
    "jobSpec": {
        "workerPoolSpecs": [{
            "machineSpec": {"machineType": "a2-highgpu-1g", "acceleratorType": "NVIDIA_TESLA_A100",
                            "acceleratorCount": 1},
            "replicaCount": 1,
            "containerSpec": {"imageUri": "python:3.11", "command": ["python3"], "args": ["-c", "print(1)"]},
        }],
        "scheduling": {"maxWaitDuration": "1800s", "strategy": "FLEX_START"},
    },
}}

CUSTOM_JOB = obj({
    "name": {"type": "string", "example": "projects/demo/locations/us-central1/customJobs/123456789012345678"},
    "displayName": {"type": "string"},
    "jobSpec": {"type": "object"},
    "state": {"type": "string", "enum": list(states.JOB_STATES.values())},
    "createTime": TIMESTAMP, "updateTime": TIMESTAMP, "startTime": TIMESTAMP, "endTime": TIMESTAMP,
    "error": obj({"code": {"type": "integer"}, "message": {"type": "string"}}, extra=True),
    "labels": LABELS,
    "trainhubStatus": {"type": "object", "description": "trainhub extension: strategy, why it waits, its queue "
                                                        "position, estimated start, replicas and cost."},
}, required=("name", "displayName", "jobSpec", "state", "createTime", "updateTime"), extra=True)

CUSTOM_JOB_LIST = obj({"customJobs": {"type": "array", "items": CUSTOM_JOB}, "nextPageToken": {"type": "string"}},
                      required=("customJobs",))

DELETE_OPERATION = obj({"name": {"type": "string"}, "done": {"type": "boolean"}, "metadata": {"type": "object"},
                        "response": {"type": "object"}}, required=("name", "done"), extra=True)

LOG_ENTRIES = obj({
    "entries": {"type": "array", "items": obj({
        "id": {"type": "integer"}, "taskName": {"type": "string"}, "stream": {"type": "string"},
        "time": TIMESTAMP, "text": {"type": "string"}}, required=("id", "taskName", "stream", "time", "text"))},
    "nextAfter": {"type": "integer"},
    "jobState": {"type": "string", "enum": list(states.JOB_STATES.values())},
}, required=("entries", "nextAfter", "jobState"))
