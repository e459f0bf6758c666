"""PUT/DELETE /v1/projects/{project}/registryCredentials/{registry}: administrators set how a
project's replicas log in to a container registry; GET lists them (never the passwords)."""

from __future__ import annotations

from django.utils import timezone
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from trainhub.common.errors import ApiError, FieldViolation, invalid_argument
from trainhub.iam.models import Project, RegistryCredential
from trainhub.iam.selectors import project_get_for_user, project_not_found
from trainhub.iam.services import registry_credential_delete, registry_credential_set

MAX_FIELD = 255
#: Any member may know the project exists; only platform administrators manage its credentials.
PROJECT_SEEN = "aiplatform.customJobs.get"


def _project(request: Request, project: str) -> Project:
    if not request.user.is_staff:
        project_get_for_user(user=request.user, project_id=project, permission=PROJECT_SEEN)  # 404 to strangers
        raise ApiError(403, "Registry credentials are set by platform administrators.")
    found = Project.objects.filter(project_id=project).first()
    if found is None:
        raise project_not_found(project)
    return found


def _document(credential: RegistryCredential) -> dict:
    return {"registry": credential.registry, "username": credential.username, "updatedBy": credential.updated_by,
            "updateTime": credential.updated_at.isoformat().replace("+00:00", "Z")}


class RegistryCredentials(APIView):
    schema = None

    def get(self, request: Request, project: str) -> Response:
        credentials = _project(request, project).registry_credentials.order_by("registry")
        return Response({"registryCredentials": [_document(credential) for credential in credentials]})


class RegistryCredentialDetail(APIView):
    schema = None

    def put(self, request: Request, project: str, registry: str) -> Response:
        found = _project(request, project)
        body = request.data if isinstance(request.data, dict) else {}
        problems = [FieldViolation(name, f"required, a string of at most {MAX_FIELD} characters")
                    for name in ("username", "password")
                    if not isinstance(body.get(name), str) or not body[name] or len(body[name]) > MAX_FIELD]
        if len(registry) > 253 or "/" in registry:
            problems.append(FieldViolation("registry", "a registry host[:port], at most 253 characters"))
        if problems:
            raise invalid_argument(problems)
        credential = registry_credential_set(project=found, registry=registry, username=body["username"],
                                             password=body["password"], actor=request.user.get_username(),
                                             now=timezone.now())
        return Response(_document(credential))

    def delete(self, request: Request, project: str, registry: str) -> Response:
        if not registry_credential_delete(project=_project(request, project), registry=registry):
            raise ApiError(404, f"Project {project!r} has no credential for registry {registry!r}.")
        return Response({})
