"""The environment and argument list of one replica, as Vertex AI sets them up. Pure Python.

- CLUSTER_SPEC on every replica: {"cluster": {"workerpool0": ["host:2222"], ...}, "environment":
  "cloud", "task": {"type": "workerpoolN", "index": i, "trial": ...}, "job": {...}}.
- TF_CONFIG only for multi-replica jobs: pools mapped to chief / worker / ps; evaluators are
  never listed in its cluster.
- MASTER_ADDR / MASTER_PORT / WORLD_SIZE / RANK only for multi-replica jobs, counting nodes of
  workerpool0 and workerpool1 (Vertex starts one process per VM): RANK 0 for the primary and
  1 + index for workerpool1.
- CUDA_VISIBLE_DEVICES from the allocated GPU indices; AIP_MODEL_DIR, AIP_CHECKPOINT_DIR and
  AIP_TENSORBOARD_LOG_DIR under baseOutputDirectory (under <base>/<trial id>/ for a tuning trial);
  CLOUD_ML_JOB_ID, CLOUD_ML_PROJECT_ID.
- Tuning trials: CLOUD_ML_TRIAL_ID, and CLOUD_ML_HP_METRIC_FILE naming a file in the replica's own
  working directory (cloudml-hypertune's default, /tmp/hypertune/output.metrics, would be shared
  by every trial on the node).
- Nodes have no Cloud Storage: with a ``storage_root``, gs://BUCKET/PATH becomes
  <storage_root>/BUCKET/PATH, as Vertex mounts buckets at /gcs/BUCKET; file:///PATH becomes /PATH.
- $(VAR) in command, args and env values expands from earlier variables; $$(VAR) escapes.
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass
from typing import Any

CLUSTER_PORT = 2222
MASTER_PORT = 29500
TF_ROLES = {0: "chief", 1: "worker", 2: "ps", 3: "evaluator"}
_REFERENCE = re.compile(r"\$\$\(([A-Za-z_][A-Za-z0-9_]*)\)|\$\(([A-Za-z_][A-Za-z0-9_]*)\)")


@dataclass(frozen=True)
class ReplicaContext:
    job_id: str
    project_number: int
    spec: dict[str, Any]
    pool_index: int
    replica_index: int
    #: pool index -> hostnames of that pool's replicas, in replica order
    hosts: dict[int, list[str]]
    gpu_indices: list[int]
    trial_id: str | None = None
    #: The replica's working directory on the node (holds a trial's metric file).
    work_dir: str | None = None
    #: Where the node keeps Cloud Storage buckets; None leaves gs:// URIs as written.
    storage_root: str | None = None
    #: The job's rendezvous ports, allocated at placement (MASTER_PORT; CLUSTER_SPEC/TF_CONFIG).
    master_port: int = MASTER_PORT
    cluster_port: int = CLUSTER_PORT


METRIC_FILE = "hypertune/output.metrics"


def metric_file_path(work_dir: str) -> str:
    """The cloudml-hypertune file of the replica running in ``work_dir``."""
    return f"{work_dir.rstrip('/')}/{METRIC_FILE}"


def local_output_uri(uri: str, storage_root: str | None) -> str:
    """Where an output URI lives on the node (see the module docstring); a trailing / is kept."""
    if uri.startswith("file://"):
        return uri[len("file://"):]
    if uri.startswith("gs://") and storage_root is not None:
        return f"{storage_root.rstrip('/')}/{uri[len('gs://'):]}"
    return uri


def expand(text: str, variables: dict[str, str]) -> str:
    def substitute(match: re.Match) -> str:
        if match.group(1) is not None:
            return f"$({match.group(1)})"
        return variables.get(match.group(2), match.group(0))

    return _REFERENCE.sub(substitute, text)


def _cluster(ctx: ReplicaContext) -> dict[str, list[str]]:
    return {f"workerpool{index}": [f"{host}:{ctx.cluster_port}" for host in hosts]
            for index, hosts in sorted(ctx.hosts.items())}


def _task_spec(ctx: ReplicaContext) -> dict[str, Any]:
    pool = ctx.spec["jobSpec"]["workerPoolSpecs"][ctx.pool_index]
    python = pool.get("pythonPackageSpec") or {}
    return {"python_module": python.get("pythonModule", ""), "package_uris": python.get("packageUris", []),
            "job_args": (pool.get("containerSpec") or python).get("args", [])}


def cluster_spec(ctx: ReplicaContext) -> dict[str, Any]:
    task: dict[str, Any] = {"type": f"workerpool{ctx.pool_index}", "index": ctx.replica_index}
    if ctx.trial_id is not None:
        task["trial"] = ctx.trial_id
    return {"cluster": _cluster(ctx), "environment": "cloud", "task": task, "job": _task_spec(ctx)}


def tf_config(ctx: ReplicaContext) -> dict[str, Any]:
    cluster = {TF_ROLES[index]: [f"{host}:{ctx.cluster_port}" for host in hosts]
               for index, hosts in sorted(ctx.hosts.items()) if index != 3}
    task: dict[str, Any] = {"type": TF_ROLES[ctx.pool_index], "index": ctx.replica_index, "cloud": ctx.job_id}
    if ctx.trial_id is not None:
        task["trial"] = ctx.trial_id
    return {"cluster": cluster, "environment": "cloud", "job": _task_spec(ctx), "task": task}


def replica_environment(ctx: ReplicaContext) -> dict[str, str]:
    """Service-defined variables, then the pool's own env (which may reference them)."""
    env: dict[str, str] = {
        "CLUSTER_SPEC": json.dumps(cluster_spec(ctx)),
        "CLOUD_ML_JOB_ID": ctx.job_id,
        "CLOUD_ML_PROJECT_ID": str(ctx.project_number),
        "CUDA_VISIBLE_DEVICES": ",".join(str(i) for i in ctx.gpu_indices),
    }
    if ctx.trial_id is not None:
        env["CLOUD_ML_TRIAL_ID"] = ctx.trial_id
        if ctx.work_dir is not None:
            env["CLOUD_ML_HP_METRIC_FILE"] = metric_file_path(ctx.work_dir)
    base = (ctx.spec["jobSpec"].get("baseOutputDirectory") or {}).get("outputUriPrefix")
    if base:
        base = local_output_uri(base, ctx.storage_root)
        if ctx.trial_id is not None:
            base = f"{base}{ctx.trial_id}/"
        env["AIP_MODEL_DIR"] = f"{base}model/"
        env["AIP_CHECKPOINT_DIR"] = f"{base}checkpoints/"
        env["AIP_TENSORBOARD_LOG_DIR"] = f"{base}logs/"
    replica_total = sum(len(hosts) for hosts in ctx.hosts.values())
    if replica_total > 1:
        env["TF_CONFIG"] = json.dumps(tf_config(ctx))
        env["MASTER_ADDR"] = ctx.hosts[0][0]
        env["MASTER_PORT"] = str(ctx.master_port)
        env["WORLD_SIZE"] = str(1 + len(ctx.hosts.get(1, [])))
        if ctx.pool_index in (0, 1):
            env["RANK"] = str(0 if ctx.pool_index == 0 else 1 + ctx.replica_index)
    pool = ctx.spec["jobSpec"]["workerPoolSpecs"][ctx.pool_index]
    task = pool.get("containerSpec") or pool.get("pythonPackageSpec") or {}
    for item in task.get("env", []):
        env[item["name"]] = expand(item["value"], env)
    return env


class NotRunnable(ValueError):
    """The replica's task cannot be run by the subprocess executor; the message says why."""


def replica_argv(ctx: ReplicaContext, env: dict[str, str]) -> list[str]:
    """The argument list to execute (never a shell string)."""
    pool = ctx.spec["jobSpec"]["workerPoolSpecs"][ctx.pool_index]
    if "containerSpec" in pool:
        container = pool["containerSpec"]
        if not container.get("command"):
            raise NotRunnable(
                f"containerSpec.command is empty: the subprocess executor runs command + args on the node "
                f"and does not pull {container['imageUri']!r}, so it cannot use the image's ENTRYPOINT."
            )
        argv = container["command"] + container.get("args", [])
    else:
        python = pool["pythonPackageSpec"]
        argv = [sys.executable, "-m", python["pythonModule"], *python.get("args", [])]
    return [expand(item, env) for item in argv]
