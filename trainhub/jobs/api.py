"""Vertex AI v1 REST: /v1/projects/{project}/locations/{location}/customJobs[...]."""

from __future__ import annotations

import secrets

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from trainhub.common.errors import FieldViolation, invalid_argument
from trainhub.common.openapi import PROJECT_ERRORS, responses
from trainhub.common.wire import WireError, parse_int
from trainhub.iam.selectors import project_get_for_user
from trainhub.jobs import openapi, selectors, services
from trainhub.jobs.render import (
    render_custom_job,
    render_delete_operation,
    render_log_line,
)
from trainhub.scheduling.selectors import wait_explanation, wait_explanations


def int_query_param(request: Request, name: str, *, default: int = 0, maximum: int | None = None) -> int:
    """A non-negative integer query parameter (``pageSize``...); 400 INVALID_ARGUMENT naming it otherwise."""
    raw = request.query_params.get(name)
    if raw in (None, ""):
        return default
    try:
        return parse_int(raw, minimum=0, maximum=maximum)
    except WireError as exc:
        raise invalid_argument([FieldViolation(name, str(exc))]) from exc


class CustomJobCollection(APIView):
    @extend_schema(operation_id="customJobs.list", parameters=[
        OpenApiParameter("filter", str, description='AIP-160 subset, e.g. state="JOB_STATE_RUNNING"'),
        OpenApiParameter("pageSize", int), OpenApiParameter("pageToken", str)],
        responses=responses(openapi.CUSTOM_JOB_LIST, PROJECT_ERRORS))
    def get(self, request: Request, project: str, location: str) -> Response:
        project_obj = project_get_for_user(user=request.user, project_id=project, permission="aiplatform.customJobs.list")
        jobs, next_token = selectors.jobs_list(
            project=project_obj, location=location,
            filter_expression=request.query_params.get("filter", ""),
            page_size=int_query_param(request, "pageSize", maximum=10**6),
            page_token=request.query_params.get("pageToken", ""),
        )
        waits = wait_explanations(job_pks=[job.pk for job in jobs if not job.is_terminal])
        body: dict = {"customJobs": [render_custom_job(job, waits.get(job.pk)) for job in jobs]}
        if next_token:
            body["nextPageToken"] = next_token
        return Response(body)

    @extend_schema(operation_id="customJobs.create", request={"application/json": openapi.CUSTOM_JOB_REQUEST},
                   responses=responses(openapi.CUSTOM_JOB, PROJECT_ERRORS + (429,)))
    def post(self, request: Request, project: str, location: str) -> Response:
        project_obj = project_get_for_user(user=request.user, project_id=project,
                                           permission="aiplatform.customJobs.create")
        job = services.job_submit(project=project_obj, location=location, user=request.user, body=request.data)
        return Response(render_custom_job(job, replicas=[]))  # just created: nothing placed yet


class CustomJobDetail(APIView):
    @extend_schema(operation_id="customJobs.get", responses=responses(openapi.CUSTOM_JOB, PROJECT_ERRORS))
    def get(self, request: Request, project: str, location: str, job_id: str) -> Response:
        job = selectors.job_get_for_user(user=request.user, project_id=project, location=location, job_id=job_id,
                                         permission="aiplatform.customJobs.get")
        return Response(render_custom_job(job, wait_explanation(job_pk=job.pk)))

    @extend_schema(operation_id="customJobs.delete", responses=responses(openapi.DELETE_OPERATION, PROJECT_ERRORS))
    def delete(self, request: Request, project: str, location: str, job_id: str) -> Response:
        job = selectors.job_get_for_user(user=request.user, project_id=project, location=location, job_id=job_id,
                                         permission="aiplatform.customJobs.delete")
        name = job.resource_name
        services.job_delete(job=job)
        return Response(render_delete_operation(name, str(secrets.randbelow(10**18))))


class CustomJobCancel(APIView):
    @extend_schema(operation_id="customJobs.cancel", request={"application/json": {"type": "object"}},
                   responses=responses({"type": "object"}, PROJECT_ERRORS))
    def post(self, request: Request, project: str, location: str, job_id: str) -> Response:
        job = selectors.job_get_for_user(user=request.user, project_id=project, location=location, job_id=job_id,
                                         permission="aiplatform.customJobs.cancel")
        services.job_cancel(job=job)
        return Response({})


class CustomJobLogs(APIView):
    """trainhub extension: the job's replica output, after a given line id (for stream-logs)."""

    @extend_schema(operation_id="customJobs.logs", parameters=[
        OpenApiParameter("after", int), OpenApiParameter("taskName", str), OpenApiParameter("limit", int)],
        responses=responses(openapi.LOG_ENTRIES, PROJECT_ERRORS))
    def get(self, request: Request, project: str, location: str, job_id: str) -> Response:
        job = selectors.job_get_for_user(user=request.user, project_id=project, location=location, job_id=job_id,
                                         permission="aiplatform.customJobs.get")
        after = int_query_param(request, "after")
        lines = selectors.job_logs(job=job, after=after, task_name=request.query_params.get("taskName", ""),
                                   limit=int_query_param(request, "limit", default=1000, maximum=10000) or 1000)
        return Response({
            "entries": [render_log_line(line) for line in lines],
            "nextAfter": lines[-1].pk if lines else after,
            "jobState": job.state,
        })
