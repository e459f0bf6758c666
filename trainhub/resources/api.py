"""Vertex AI v1 REST: /v1/projects/{project}/locations/{location}/persistentResources[...] and
their long-running operations."""

from __future__ import annotations

from django.utils import timezone
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from trainhub.common.openapi import PROJECT_ERRORS, responses
from trainhub.iam.selectors import project_get_for_user
from trainhub.jobs.api import int_query_param
from trainhub.resources import openapi, selectors, services
from trainhub.resources.render import render_operation, render_persistent_resource

GET = "aiplatform.persistentResources.get"
LIST = "aiplatform.persistentResources.list"
CREATE = "aiplatform.persistentResources.create"
UPDATE = "aiplatform.persistentResources.update"
DELETE = "aiplatform.persistentResources.delete"


def _query(request: Request, camel: str, snake: str) -> str | None:
    """A query parameter by its camelCase or snake_case name (Google clients send either)."""
    return request.query_params.get(camel, request.query_params.get(snake))


def _operation_response(operation) -> Response:
    return Response(render_operation(operation, timezone.now()))


class PersistentResourceCollection(APIView):
    @extend_schema(operation_id="persistentResources.list", parameters=[
        OpenApiParameter("pageSize", int), OpenApiParameter("pageToken", str)],
        responses=responses(openapi.PERSISTENT_RESOURCE_LIST, PROJECT_ERRORS))
    def get(self, request: Request, project: str, location: str) -> Response:
        project_obj = project_get_for_user(user=request.user, project_id=project, permission=LIST)
        resources, next_token = selectors.resources_list(
            project=project_obj, location=location, page_size=int_query_param(request, "pageSize", maximum=10**6),
            page_token=_query(request, "pageToken", "page_token") or "")
        now = timezone.now()
        usage = selectors.pool_usage(resources=resources, now=now)
        body: dict = {"persistentResources": [render_persistent_resource(r, usage, now) for r in resources]}
        if next_token:
            body["nextPageToken"] = next_token
        return Response(body)

    @extend_schema(operation_id="persistentResources.create",
                   request={"application/json": openapi.PERSISTENT_RESOURCE_REQUEST},
                   responses=responses(openapi.OPERATION, PROJECT_ERRORS + (409, 429)),
                   parameters=[OpenApiParameter("persistentResourceId", str, required=True, examples=[
                       OpenApiExample("id", value="my-persistent-resource")])])
    def post(self, request: Request, project: str, location: str) -> Response:
        project_obj = project_get_for_user(user=request.user, project_id=project, permission=CREATE)
        operation = services.persistent_resource_create(
            project=project_obj, location=location, user=request.user, body=request.data,
            resource_id=_query(request, "persistentResourceId", "persistent_resource_id"))
        return _operation_response(operation)


class PersistentResourceDetail(APIView):
    def _resource(self, request: Request, project: str, location: str, resource_id: str, permission: str):
        return selectors.resource_get_for_user(user=request.user, project_id=project, location=location,
                                               resource_id=resource_id, permission=permission)

    @extend_schema(operation_id="persistentResources.get",
                   responses=responses(openapi.PERSISTENT_RESOURCE, PROJECT_ERRORS))
    def get(self, request: Request, project: str, location: str, resource_id: str) -> Response:
        resource = self._resource(request, project, location, resource_id, GET)
        now = timezone.now()
        return Response(render_persistent_resource(resource, selectors.pool_usage(resources=[resource], now=now), now))

    @extend_schema(operation_id="persistentResources.patch",
                   request={"application/json": openapi.PERSISTENT_RESOURCE_REQUEST},
                   responses=responses(openapi.OPERATION, PROJECT_ERRORS + (429,)),
                   parameters=[OpenApiParameter("updateMask", str, required=True, examples=[
                       OpenApiExample("resize", value="resourcePools.replicaCount")])])
    def patch(self, request: Request, project: str, location: str, resource_id: str) -> Response:
        resource = self._resource(request, project, location, resource_id, UPDATE)
        operation = services.persistent_resource_update(
            resource=resource, update_mask=_query(request, "updateMask", "update_mask"), body=request.data)
        return _operation_response(operation)

    @extend_schema(operation_id="persistentResources.delete", responses=responses(openapi.OPERATION, PROJECT_ERRORS))
    def delete(self, request: Request, project: str, location: str, resource_id: str) -> Response:
        resource = self._resource(request, project, location, resource_id, DELETE)
        return _operation_response(services.persistent_resource_delete(resource=resource))


class PersistentResourceReboot(APIView):
    @extend_schema(operation_id="persistentResources.reboot", request={"application/json": {"type": "object"}},
                   responses=responses(openapi.OPERATION, PROJECT_ERRORS))
    def post(self, request: Request, project: str, location: str, resource_id: str) -> Response:
        resource = selectors.resource_get_for_user(user=request.user, project_id=project, location=location,
                                                   resource_id=resource_id, permission=UPDATE)
        return _operation_response(services.persistent_resource_reboot(resource=resource))


def _operation_get(request: Request, project: str, location: str, operation_id: str,
                   resource_id: str | None = None) -> Response:
    operation = selectors.operation_get_for_user(user=request.user, project_id=project, location=location,
                                                 operation_id=operation_id, resource_id=resource_id, permission=GET)
    return _operation_response(operation)


class ResourceOperationDetail(APIView):
    """GET an operation by the name it was returned with: …/persistentResources/ID/operations/OP."""

    @extend_schema(operation_id="persistentResources.operations.get",
                   responses=responses(openapi.OPERATION, PROJECT_ERRORS))
    def get(self, request: Request, project: str, location: str, resource_id: str, operation_id: str) -> Response:
        return _operation_get(request, project, location, operation_id, resource_id)


class LocationOperationDetail(APIView):
    """GET an operation as projects/P/locations/L/operations/OP (what `gcloud ai operations
    describe` asks for)."""

    @extend_schema(operation_id="operations.get", responses=responses(openapi.OPERATION, PROJECT_ERRORS))
    def get(self, request: Request, project: str, location: str, operation_id: str) -> Response:
        return _operation_get(request, project, location, operation_id)
