"""Vertex AI v1 REST for .../hyperparameterTuningJobs, .../trainingPipelines and .../models.

Tuning jobs and pipelines share one shape (create, get, list, cancel, delete), so one set of views
serves both, configured by a Collection; models are read-only (pipelines register them).
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from typing import Any, Callable

from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from trainhub.common.errors import ApiError
from trainhub.iam.selectors import project_get_for_user
from trainhub.common.openapi import PROJECT_ERRORS, responses
from trainhub.jobs.api import int_query_param
from trainhub.jobs.render import render_delete_operation
from trainhub.tuning import selectors, services
from trainhub.tuning.openapi import PIPELINE_REQUEST, RESOURCE, TUNING_JOB_REQUEST
from trainhub.tuning.models import HyperparameterTuningJob, Model, TrainingPipeline
from trainhub.tuning.render import render_model, render_model_version, render_pipeline, render_tuning_job


@dataclass(frozen=True)
class Collection:
    kind: type
    key: str
    #: The URL parameter naming one resource of this collection.
    id_param: str
    permission_prefix: str
    render: Callable[[Any], dict]
    create: Callable[..., Any] | None = None
    cancel: Callable[..., None] | None = None
    delete: Callable[..., None] | None = None
    #: The body its create takes, for /api/schema/ (models are not created here).
    request: dict = field(default_factory=lambda: RESOURCE)

    def permission(self, verb: str) -> str:
        return f"{self.permission_prefix}.{verb}"


TUNING_JOBS = Collection(HyperparameterTuningJob, "hyperparameterTuningJobs", "tuning_job_id", "aiplatform.hyperparameterTuningJobs",
                         render_tuning_job, services.tuning_job_create,
                         lambda obj: services.tuning_job_cancel(tuning_job=obj),
                         lambda obj: services.tuning_job_delete(tuning_job=obj), TUNING_JOB_REQUEST)
PIPELINES = Collection(TrainingPipeline, "trainingPipelines", "pipeline_id", "aiplatform.trainingPipelines", render_pipeline,
                       services.pipeline_create,
                       lambda obj: services.pipeline_cancel(pipeline=obj),
                       lambda obj: services.pipeline_delete(pipeline=obj), PIPELINE_REQUEST)
MODELS = Collection(Model, "models", "model_id", "aiplatform.models", render_model)


def _get(collection: Collection, request: Request, project: str, location: str, ids: dict[str, str], verb: str):
    return selectors.resource_get_for_user(kind=collection.kind, user=request.user, project_id=project,
                                           location=location, resource_id=ids[collection.id_param],
                                           permission=collection.permission(verb))


class ResourceCollection(APIView):
    collection: Collection

    @extend_schema(parameters=[OpenApiParameter("pageSize", int), OpenApiParameter("pageToken", str)],
                   responses=responses(RESOURCE, PROJECT_ERRORS))
    def get(self, request: Request, project: str, location: str) -> Response:
        project_obj = project_get_for_user(user=request.user, project_id=project,
                                           permission=self.collection.permission("list"))
        rows, next_token = selectors.resources_list(
            kind=self.collection.kind, projects=[project_obj], location=location,
            page_size=int_query_param(request, "pageSize", maximum=10**6), page_token=request.query_params.get("pageToken", ""))
        body: dict = {self.collection.key: [self.collection.render(row) for row in rows]}
        if next_token:
            body["nextPageToken"] = next_token
        return Response(body)

    @extend_schema(responses=responses(RESOURCE, PROJECT_ERRORS + (405, 409)))
    def post(self, request: Request, project: str, location: str) -> Response:
        if self.collection.create is None:
            raise ApiError(405, f"{self.collection.key} are created by training pipelines, not directly.")
        project_obj = project_get_for_user(user=request.user, project_id=project,
                                           permission=self.collection.permission("create"))
        created = self.collection.create(project=project_obj, location=location, user=request.user, body=request.data)
        return Response(self.collection.render(created))


class ResourceDetail(APIView):
    collection: Collection

    @extend_schema(responses=responses(RESOURCE, PROJECT_ERRORS))
    def get(self, request: Request, project: str, location: str, **ids: str) -> Response:
        return Response(self.collection.render(_get(self.collection, request, project, location, ids, "get")))

    @extend_schema(responses=responses(RESOURCE, PROJECT_ERRORS + (405,)))
    def delete(self, request: Request, project: str, location: str, **ids: str) -> Response:
        if self.collection.delete is None:
            raise ApiError(405, f"Deleting {self.collection.key} is not supported.")
        found = _get(self.collection, request, project, location, ids, "delete")
        name = found.resource_name
        self.collection.delete(found)
        return Response(render_delete_operation(name, str(secrets.randbelow(10**18))))


class ResourceCancel(APIView):
    collection: Collection

    @extend_schema(request={"application/json": RESOURCE}, responses=responses(RESOURCE, PROJECT_ERRORS))
    def post(self, request: Request, project: str, location: str, **ids: str) -> Response:
        self.collection.cancel(_get(self.collection, request, project, location, ids, "cancel"))
        return Response({})


class ModelVersions(APIView):
    """models.listVersions: every version of a model, oldest first."""

    @extend_schema(operation_id="models.listVersions", responses=responses(RESOURCE, PROJECT_ERRORS))
    def get(self, request: Request, project: str, location: str, **ids: str) -> Response:
        model = _get(MODELS, request, project, location, ids, "get")
        versions = list(model.versions.all())
        return Response({"models": [render_model_version(v, latest=v is versions[-1]) for v in versions]})


def views_for(collection: Collection) -> tuple[Any, Any, Any]:
    """The collection, detail and cancel views of one resource type, named in /api/schema/ as
    Vertex names their methods (``hyperparameterTuningJobs.create``, ...)."""
    key = collection.key
    schemas = {
        ResourceCollection: {"get": extend_schema(operation_id=f"{key}.list"),
                             "post": extend_schema(operation_id=f"{key}.create",
                                                   request={"application/json": collection.request})},
        ResourceDetail: {"get": extend_schema(operation_id=f"{key}.get"),
                         "delete": extend_schema(operation_id=f"{key}.delete")},
        ResourceCancel: {"post": extend_schema(operation_id=f"{key}.cancel")},
    }
    return tuple(extend_schema_view(**methods)(type(f"{collection.kind.__name__}{base.__name__}", (base,),
                                                     {"collection": collection})).as_view()
                 for base, methods in schemas.items())
