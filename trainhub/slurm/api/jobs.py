"""Slurm jobs: sbatch (POST), list, get, scancel / scontrol hold / release / requeue / update nice, log;
salloc's allocations (create, keep alive, step credential, relinquish)."""

from __future__ import annotations

import posixpath

from django.utils import timezone
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from trainhub.common.errors import FieldViolation, invalid_argument
from trainhub.common.wire import WireError, camelize, format_timestamp, parse_int
from trainhub.slurm import selectors
from trainhub.slurm.api.clusters import cluster_for
from trainhub.slurm.api.schema import ACTION, BODY, ERRORS, NICE, SUBMISSION, responses
from trainhub.slurm.models import JobState, SlurmJob
from trainhub.slurm.render import render_job, render_run
from trainhub.slurm.services import allocations
from trainhub.slurm.services import jobs as services

GET = "aiplatform.slurmJobs.get"
LIST = "aiplatform.slurmJobs.list"
CREATE = "aiplatform.slurmJobs.create"
CANCEL = "aiplatform.slurmJobs.cancel"
UPDATE = "aiplatform.slurmJobs.update"
SUBMIT_FIELDS = ("sbatchArgs", "script", "scriptPath", "scriptArgs", "allocNode", "allocSid", "submitDir")
ALLOCATE_FIELDS = ("sallocArgs", "allocNode", "allocSid", "submitDir")


def _strings(value, field: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise invalid_argument([FieldViolation(field, "must be a list of strings")])
    return tuple(value)


def submission_from(body) -> services.Submission:
    """{"sbatchArgs": ["-p", "a4", ...], "script": "#!/bin/bash ...", "scriptPath": "/home/me/job.sh",
    "scriptArgs": [...]} (or snake_case); scriptPath, the script's file as sbatch found it, only with script."""
    if not isinstance(body, dict):
        raise invalid_argument([FieldViolation("body", "must be a JSON object")])
    body = camelize(body)
    unknown = [key for key in body if key not in SUBMIT_FIELDS]
    if unknown:
        raise invalid_argument([FieldViolation(key, "unknown field; expected " + ", ".join(SUBMIT_FIELDS))
                                for key in unknown])
    script = body.get("script")
    if script is not None and not isinstance(script, str):
        raise invalid_argument([FieldViolation("script", "must be the text of a batch script")])
    path = body.get("scriptPath", "")
    # its file name names a job without -J: no longer than a job name (and a file name, NAME_MAX 255)
    if not isinstance(path, str) or len(path) > SlurmJob._meta.get_field("script_path").max_length or (
            len(posixpath.basename(path)) > SlurmJob._meta.get_field("name").max_length) or (
            path and script is None):
        raise invalid_argument([FieldViolation("scriptPath", "must be the path of the script file sent as script")])
    return services.Submission(argv=_strings(body.get("sbatchArgs"), "sbatchArgs"), script=script,
                               script_args=_strings(body.get("scriptArgs"), "scriptArgs"), script_path=path,
                               **_alloc_place(body))


def _alloc_place(body: dict) -> dict:
    """``allocNode`` (a host name), ``allocSid`` (a session id) and ``submitDir`` (an absolute path):
    where sbatch or salloc ran."""
    node, sid, directory = body.get("allocNode", ""), body.get("allocSid", 0), body.get("submitDir", "")
    violations = ([FieldViolation("allocNode", "must be a host name")] if not isinstance(node, str) else []) + (
        [FieldViolation("allocSid", "must be a session id")]
        if isinstance(sid, bool) or not isinstance(sid, int) or not 0 <= sid < 2**31 else []) + (
        [FieldViolation("submitDir", "must be an absolute path (sbatch's working directory)")]
        if not isinstance(directory, str) or (directory and not directory.startswith("/")) else [])
    if violations:
        raise invalid_argument(violations)
    return {"alloc_node": node, "alloc_sid": sid, "submit_dir": directory}


def _job_for(request: Request, project: str, location: str, cluster: str, slurm_job_id: str, permission: str):
    return selectors.job_get_for_user(user=request.user, project_id=project, location=location, cluster_id=cluster,
                                      job_id=slurm_job_id, permission=permission)


def _detail(job, slurm_job_id: str) -> dict:
    # scontrol's BatchHost: where the batch script runs, or an allocation's first node
    running = job.state == JobState.RUNNING
    batch_host = next((node.node.name for node in selectors.job_nodes(job=job)), None) if running else None
    return {**render_job(job, task_id=selectors.pending_task(job, slurm_job_id)),
            **({"batchHost": batch_host} if batch_host else {}),
            "runs": [render_run(run) for run in selectors.job_runs(job=job)],
            "events": [{"time": format_timestamp(e.time), "message": e.message}
                       for e in selectors.job_events(job=job)]}


class SlurmJobCollection(APIView):
    @extend_schema(operation_id="slurmJobs.list", parameters=[
        OpenApiParameter("state", str), OpenApiParameter("user", str), OpenApiParameter("partition", str),
        OpenApiParameter("pageSize", int), OpenApiParameter("pageToken", str)], responses=responses(BODY, ERRORS))
    def get(self, request: Request, project: str, location: str, cluster: str) -> Response:
        cluster_obj = cluster_for(request, project, location, cluster, LIST)
        params = request.query_params
        try:
            size = parse_int(params.get("pageSize") or 100, minimum=1, maximum=1000)
            after = parse_int(params.get("pageToken") or 0, minimum=0)
        except WireError as exc:
            raise invalid_argument([FieldViolation("pageSize/pageToken", str(exc))]) from exc
        jobs = selectors.jobs_page(cluster=cluster_obj, state=params.get("state", ""), user=params.get("user", ""),
                                   partition=params.get("partition", ""), after=after, size=size + 1)
        body: dict = {"jobs": [render_job(job) for job in jobs[:size]]}
        if len(jobs) > size:
            body["nextPageToken"] = str(jobs[size - 1].job_id)
        return Response(body)

    @extend_schema(operation_id="slurmJobs.create", request={"application/json": SUBMISSION}, responses=responses(BODY, ERRORS))
    def post(self, request: Request, project: str, location: str, cluster: str) -> Response:
        cluster_obj = cluster_for(request, project, location, cluster, CREATE)
        submission = submission_from(request.data)
        job = services.job_submit(cluster=cluster_obj, user=request.user, submission=submission,
                                  is_admin=selectors.is_cluster_admin(user=request.user, cluster=cluster_obj))
        body = {"jobId": job.job_id, "message": services.submitted_message(job, submission), "job": render_job(job)}
        if submission.warnings:  # the CLI prints them on stderr after sbatch's name
            body["warnings"] = submission.warnings
        if job.pk is None:  # --test-only: nothing was queued; sbatch prints its estimate on stderr
            body["stderr"] = services.will_run_message(job)
        notice = selectors.simulated_notice(cluster=cluster_obj)
        if notice:
            body["notice"] = notice  # the CLI prints it on stderr: stdout stays sbatch's own
        return Response(body)


class SlurmJobDetail(APIView):
    @extend_schema(operation_id="slurmJobs.get", responses=responses(BODY, ERRORS))
    def get(self, request: Request, project: str, location: str, cluster: str, slurm_job_id: str) -> Response:
        return Response(_detail(_job_for(request, project, location, cluster, slurm_job_id, GET), slurm_job_id))


def _action(service, permission: str, operation: str):
    class JobAction(APIView):
        @extend_schema(operation_id=f"slurmJobs.{operation}", request={"application/json": ACTION}, responses=responses(BODY, ERRORS))
        def post(self, request: Request, project: str, location: str, cluster: str, slurm_job_id: str) -> Response:
            job = _job_for(request, project, location, cluster, slurm_job_id, permission)
            job = service(job=job, actor=request.user,
                          is_admin=selectors.is_cluster_admin(user=request.user, cluster=job.cluster))
            return Response(render_job(job))

    JobAction.__name__ = f"SlurmJob{operation.capitalize()}"
    return JobAction


class SlurmJobCancel(APIView):
    """scancel N, or scancel A_T for one task of array A (one still pending is taken out of the array's record)."""

    @extend_schema(operation_id="slurmJobs.cancel", request={"application/json": ACTION}, responses=responses(BODY, ERRORS))
    def post(self, request: Request, project: str, location: str, cluster: str, slurm_job_id: str) -> Response:
        job = _job_for(request, project, location, cluster, slurm_job_id, CANCEL)
        job = services.job_cancel(job=job, actor=request.user, task_id=selectors.pending_task(job, slurm_job_id),
                                  is_admin=selectors.is_cluster_admin(user=request.user, cluster=job.cluster))
        return Response(render_job(job))
SlurmJobHold = _action(services.job_hold, UPDATE, "hold")
SlurmJobRelease = _action(services.job_release, UPDATE, "release")
SlurmJobRequeue = _action(services.job_requeue_by_user, UPDATE, "requeue")


class SlurmJobUpdate(APIView):
    """scontrol update jobid=N nice=V: {"nice": V}."""

    @extend_schema(operation_id="slurmJobs.update", request={"application/json": NICE}, responses=responses(BODY, ERRORS))
    def post(self, request: Request, project: str, location: str, cluster: str, slurm_job_id: str) -> Response:
        job = _job_for(request, project, location, cluster, slurm_job_id, UPDATE)
        data = request.data if isinstance(request.data, dict) else {}
        if set(data) != {"nice"}:
            raise invalid_argument([FieldViolation("nice", "is the field scontrol update sets here")])
        try:
            nice = parse_int(data["nice"], minimum=-2147483645, maximum=2147483645)
        except WireError as exc:
            raise invalid_argument([FieldViolation("nice", str(exc))]) from exc
        job = services.job_set_nice(job=job, nice=nice, actor=request.user,
                                    is_admin=selectors.is_cluster_admin(user=request.user, cluster=job.cluster))
        return Response(render_job(job))


class SlurmJobLog(APIView):
    @extend_schema(operation_id="slurmJobs.log", parameters=[OpenApiParameter("after", int)], responses=responses(BODY, ERRORS))
    def get(self, request: Request, project: str, location: str, cluster: str, slurm_job_id: str) -> Response:
        job = _job_for(request, project, location, cluster, slurm_job_id, GET)
        try:
            after = parse_int(request.query_params.get("after") or 0, minimum=0)
        except WireError as exc:
            raise invalid_argument([FieldViolation("after", str(exc))]) from exc
        lines = selectors.job_log(job=job, after=after)
        return Response({"entries": [{"id": line.pk, "time": format_timestamp(line.time), "node": line.node_name,
                                      "stream": line.stream, "text": line.text} for line in lines],
                         "nextAfter": lines[-1].pk if lines else after, "state": job.state})


class SlurmAllocationCollection(APIView):
    """salloc: {"sallocArgs": ["-N", "2", ...]} -> {jobId, job[, warnings]}; the job pends like any other."""

    @extend_schema(operation_id="slurmJobs.allocate", request={"application/json": BODY}, responses=responses(BODY, ERRORS))
    def post(self, request: Request, project: str, location: str, cluster: str) -> Response:
        cluster_obj = cluster_for(request, project, location, cluster, CREATE)
        body = request.data if isinstance(request.data, dict) else {}
        unknown = [key for key in body if key not in ALLOCATE_FIELDS]
        if unknown:
            raise invalid_argument([FieldViolation(key, "unknown field; expected " + ", ".join(ALLOCATE_FIELDS))
                                    for key in unknown])
        submission = services.Submission(argv=tuple(_strings(body.get("sallocArgs"), "sallocArgs")), allocation=True,
                                         **_alloc_place(body))
        job = allocations.allocation_submit(
            cluster=cluster_obj, user=request.user, submission=submission,
            is_admin=selectors.is_cluster_admin(user=request.user, cluster=cluster_obj), now=timezone.now())
        answer = {"jobId": job.job_id, "job": render_job(job)}
        if submission.warnings:
            answer["warnings"] = submission.warnings
        return Response(answer)


class SlurmAllocationKeepAlive(APIView):
    """salloc is alive (every few seconds while it waits and while its command runs) -> {job, ready}."""

    @extend_schema(operation_id="slurmJobs.keepAlive", request={"application/json": ACTION}, responses=responses(BODY, ERRORS))
    def post(self, request: Request, project: str, location: str, cluster: str, slurm_job_id: str) -> Response:
        job = allocations.allocation_keep_alive(job=_job_for(request, project, location, cluster, slurm_job_id, CREATE),
                                                actor=request.user, now=timezone.now())
        hosts = allocations.allocation_hosts(job)
        return Response({"job": render_job(job), "ready": hosts is not None, "clusterName": job.cluster.cluster_id,
                         "hosts": [name for name, _ in hosts or ()], "cpusPerNode": [cpus for _, cpus in hosts or ()]})


class SlurmAllocationStepCredential(APIView):
    """The step credential srun inside salloc's command uses -> {credential}; the owner's only."""

    @extend_schema(operation_id="slurmJobs.stepCredential", request={"application/json": ACTION}, responses=responses(BODY, ERRORS))
    def post(self, request: Request, project: str, location: str, cluster: str, slurm_job_id: str) -> Response:
        job = _job_for(request, project, location, cluster, slurm_job_id, CREATE)
        return Response({"credential": allocations.allocation_step_credential(job=job, actor=request.user)})


class SlurmAllocationRelinquish(APIView):
    """salloc's command exited: {"exitCode": C, "signal": S} ends the allocation; with "cancelled":
    true (srun whose step two Ctrl-C aborted) it ends CANCELLED by its user, with "launchFailed": true
    (srun whose step was refused) FAILED with JobLaunchFailure."""

    @extend_schema(operation_id="slurmJobs.relinquish", request={"application/json": ACTION}, responses=responses(BODY, ERRORS))
    def post(self, request: Request, project: str, location: str, cluster: str, slurm_job_id: str) -> Response:
        job = _job_for(request, project, location, cluster, slurm_job_id, CREATE)
        data = request.data if isinstance(request.data, dict) else {}
        try:
            exit_code = parse_int(data.get("exitCode", 0), minimum=0, maximum=255)
            signal = parse_int(data.get("signal", 0), minimum=0, maximum=64)
        except WireError as exc:
            raise invalid_argument([FieldViolation("exitCode/signal", str(exc))]) from exc
        flags = {name: data.get(name, False) for name in ("cancelled", "launchFailed")}
        for name, value in flags.items():
            if not isinstance(value, bool):
                raise invalid_argument([FieldViolation(name, "must be true or false")])
        job = allocations.allocation_relinquish(job=job, actor=request.user, exit_code=exit_code, signal=signal,
                                                now=timezone.now(), cancelled=flags["cancelled"],
                                                launch_failed=flags["launchFailed"])
        return Response(render_job(job))
