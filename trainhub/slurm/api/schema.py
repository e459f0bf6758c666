"""What /api/schema/ says of the Slurm endpoints: the request bodies and report flags each takes,
JSON objects out, and Google's error body for every refusal (409 when a cluster id is taken).

The bodies whose parsers also take snake_case names (as Google's REST APIs do: a cluster, scripts,
an sbatch) allow other properties; the parsers name any they do not know."""

from drf_spectacular.utils import OpenApiParameter

from trainhub.common.openapi import PROJECT_ERRORS, int64, obj, responses

BODY = {"type": "object", "description": "A trainhub Slurm resource or report in JSON; see the README's Slurm table."}
ERRORS = PROJECT_ERRORS + (409,)

STRINGS = {"type": "array", "items": {"type": "string"}}
#: slurm.conf keys to values; null unsets a key (in an edit).
CONFIG = {"type": "object", "additionalProperties": {"type": "string", "nullable": True},
          "example": {"PriorityWeightAge": "2000"}}
SCRIPTS = {**STRINGS, "description": "Bash scripts, each run in turn as root on every node of a job."}
PARTITION = obj({"id": {"type": "string", "example": "a4"}, "nodePoolIds": STRINGS, "config": CONFIG},
                required=("id", "nodePoolIds"), extra=True)
CLUSTER = obj({
    "displayName": {"type": "string"},
    "orchestratorSpec": obj({"slurmSpec": obj({
        "partitions": {"type": "array", "items": PARTITION},
        "defaultPartitionId": {"type": "string"},
        "loginNodePoolId": {"type": "string"},
        "homeDirectoryStorage": {"type": "string"},
        "config": CONFIG,
        "prologBashScripts": SCRIPTS,
        "epilogBashScripts": SCRIPTS,
    }, required=("partitions",), extra=True)}, required=("slurmSpec",), extra=True),
}, required=("orchestratorSpec",), extra=True)
UPDATE_CONFIG = obj({"config": CONFIG}, required=("config",))
#: A partition edit: its PartitionName= options (replacing the old ones) and/or its node pools.
UPDATE_PARTITION = obj({"config": {"type": "object", "additionalProperties": {"type": "string"},
                                   "example": {"PriorityTier": "2", "MaxTime": "1-00:00:00"}},
                        "nodePoolIds": STRINGS})
UPDATE_NODE = obj({"availableFeatures": {"type": "string", "example": "a100,ib"},
                   "activeFeatures": {"type": "string", "example": "a100,ib"},
                   "realMemory": {**int64(), "nullable": True, "example": 16000},
                   "weight": {**int64(), "nullable": True, "example": 10}})
UPDATE_SCRIPTS = obj({"prologBashScripts": SCRIPTS, "epilogBashScripts": SCRIPTS}, extra=True)
SACCTMGR = obj({"command": {"anyOf": [{"type": "string", "example": "sacctmgr show assoc"}, STRINGS]}},
               required=("command",))
SUBMISSION = obj({"sbatchArgs": {**STRINGS, "example": ["--gres=gpu:8", "-p", "a4"]},
                  "script": {"type": "string", "example": "#!/bin/bash\nsrun python train.py\n"},
                  "scriptPath": {"type": "string", "example": "/home/me/train.sh"},
                  "scriptArgs": STRINGS}, extra=True)
NICE = obj({"nice": int64()}, required=("nice",))
#: A job action (scancel, scontrol hold/release/requeue) takes no fields.
ACTION = {"type": "object"}

PAGE = [OpenApiParameter("pageSize", int), OpenApiParameter("pageToken", str)]
#: Each report's flags by their long names: booleans, comma lists, sacct's times.
REPORT_PARAMETERS = {
    "squeue": [*PAGE, *(OpenApiParameter(name, str) for name in ("user", "partition", "states", "jobs", "format",
                                                                  "outputFormat")),
               *(OpenApiParameter(name, bool) for name in ("long", "start", "array", "steps"))],
    "sprio": [*PAGE, *(OpenApiParameter(name, str) for name in ("user", "partition", "jobs")),
              *(OpenApiParameter(name, bool) for name in ("long", "weights", "norm"))],
    "sshare": [*PAGE, *(OpenApiParameter(name, str) for name in ("accounts", "users")),
               *(OpenApiParameter(name, bool) for name in ("long", "all"))],
    "sacct": [*PAGE, *(OpenApiParameter(name, str) for name in ("jobs", "user", "state", "format", "starttime",
                                                                  "endtime")),
              *(OpenApiParameter(name, bool) for name in ("allusers", "duplicates", "brief", "allocations",
                                                          "parsable"))],
    "sinfo": [*PAGE, OpenApiParameter("partition", str),
              *(OpenApiParameter(name, bool) for name in ("nodes", "long", "summarize", "reasons"))],
    "steps": [*PAGE, OpenApiParameter("step", str)],
    "scontrolJobs": [*PAGE, OpenApiParameter("job", str), OpenApiParameter("oneliner", bool)],
    "scontrolPartitions": [*PAGE, OpenApiParameter("partition", str), OpenApiParameter("oneliner", bool)],
    "scontrolNodes": [*PAGE, OpenApiParameter("node", str), OpenApiParameter("oneliner", bool)],
}

__all__ = ["ACTION", "BODY", "CLUSTER", "ERRORS", "NICE", "REPORT_PARAMETERS", "SACCTMGR", "SUBMISSION",
           "UPDATE_CONFIG", "UPDATE_NODE", "UPDATE_PARTITION", "UPDATE_SCRIPTS", "responses"]
