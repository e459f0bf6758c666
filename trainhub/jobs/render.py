"""CustomJob -> Vertex AI v1 JSON. Extension data lives under `trainhubStatus`, which Google's
clients ignore (their REST transports parse with ignore_unknown_fields)."""

from __future__ import annotations

from typing import Any

from django.utils import timezone

from trainhub.common.wire import format_timestamp
from trainhub.jobs import states
from trainhub.jobs.costs import job_cost, render_cost
from trainhub.jobs.models import CustomJob, LogLine, Replica, current_replicas
from trainhub.jobs.spec import render_job_spec
from trainhub.scheduling.working_memory import WaitExplanation


def render_replica(replica: Replica) -> dict[str, Any]:
    return {
        "taskName": replica.task_name,
        "node": replica.node.name if replica.node else None,
        "gpuIndices": replica.gpu_indices,
        "state": replica.state,
        "exitCode": replica.exit_code,
        "restartCount": replica.restart,
        "logLines": replica.log_lines,
        "startTime": format_timestamp(replica.started_at),
        "endTime": format_timestamp(replica.ended_at),
    }


def render_custom_job(job: CustomJob, wait: WaitExplanation | None = None, *,
                      replicas: list[Replica] | None = None) -> dict[str, Any]:
    """``wait``: the job's explanation from the last scheduler pass (waiting jobs only);
    ``replicas``: those of its current attempt when the caller knows them (read otherwise), the
    latest restart of each task (see models.current_replicas)."""
    wait = wait if wait is not None and not job.is_terminal else WaitExplanation.empty()
    body: dict[str, Any] = {
        "name": job.resource_name,
        "displayName": job.display_name,
        "jobSpec": render_job_spec(job.spec["jobSpec"]),
        "state": job.state,
        "createTime": format_timestamp(job.create_time),
        "updateTime": format_timestamp(job.update_time),
    }
    if job.start_time:
        body["startTime"] = format_timestamp(job.start_time)
    if job.end_time:
        body["endTime"] = format_timestamp(job.end_time)
    if job.error and job.state in (states.FAILED, states.CANCELLED):
        body["error"] = job.error
    if job.labels:
        body["labels"] = job.labels
    if job.spec.get("encryptionSpec"):
        body["encryptionSpec"] = job.spec["encryptionSpec"]
    if replicas is None:
        replicas = current_replicas(job.replicas.all(), job.restart_count)
    body["trainhubStatus"] = {
        "strategy": job.strategy,
        "waitReasons": wait.reasons,
        "restartCount": job.restart_count,
        "retryCount": job.retry_count,
        "workerRestartCount": sum(r.restart for r in replicas),
        "queuePosition": wait.position,
        "estimatedStartTime": wait.estimated_start,
        "flexStartDeadline": format_timestamp(job.flex_start_deadline),
        "replicas": [render_replica(r) for r in replicas],
        "cost": render_cost(job_cost(job, timezone.now())),
    }
    return body


def render_log_line(line: LogLine) -> dict[str, Any]:
    return {"id": line.pk, "taskName": line.replica.task_name, "stream": line.stream,
            "time": format_timestamp(line.time), "text": line.text}


def render_delete_operation(job_name: str, operation_id: str) -> dict[str, Any]:
    return {
        "name": f"{job_name.rsplit('/customJobs/', 1)[0]}/operations/{operation_id}",
        "metadata": {"@type": "type.googleapis.com/google.cloud.aiplatform.v1.DeleteOperationMetadata",
                     "genericMetadata": {}},
        "done": True,
        "response": {"@type": "type.googleapis.com/google.protobuf.Empty"},
    }
