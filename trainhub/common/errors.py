"""Google API error bodies: {"error": {"code", "message", "status", "details"}}.

Every API failure leaves trainhub in this shape, including DRF's own exceptions and
unexpected errors (see middleware.ApiErrorMiddleware), so clients never see an HTML page or a
stack trace.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import Http404, JsonResponse
from rest_framework import exceptions as drf_exceptions
from rest_framework.response import Response

from trainhub.common.status import BAD_REQUEST_TYPE, STATUS_BY_HTTP


@dataclass(frozen=True)
class FieldViolation:
    field: str
    description: str

    def as_dict(self) -> dict[str, str]:
        return {"field": self.field, "description": self.description}


@dataclass
class ApiError(Exception):
    """An error a service raises for the API and the browser to report as written."""

    http_status: int
    message: str
    status: str = ""
    violations: list[FieldViolation] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.status:
            self.status = STATUS_BY_HTTP.get(self.http_status, "UNKNOWN")
        super().__init__(self.message)

    def body(self) -> dict:
        details = []
        if self.violations:
            details.append(
                {"@type": BAD_REQUEST_TYPE, "fieldViolations": [v.as_dict() for v in self.violations]}
            )
        return {"error": {"code": self.http_status, "message": self.message, "status": self.status, "details": details}}


#: What every 401 says (the user API, the agent API and its long poll alike).
UNAUTHENTICATED_MESSAGE = "Request is missing required authentication credential. Send 'Authorization: Bearer <token>'."


def invalid_argument(violations: list[FieldViolation], message: str | None = None) -> ApiError:
    if message is None:
        message = "Request contains an invalid argument: " + "; ".join(
            f"{v.field}: {v.description}" for v in violations
        )
    return ApiError(400, message, "INVALID_ARGUMENT", list(violations))


def error_response(error: ApiError) -> JsonResponse:
    return JsonResponse(error.body(), status=error.http_status)


def google_exception_handler(exc: Exception, context: dict) -> Response | None:
    """DRF exception handler: every exception becomes a Google error body."""
    if isinstance(exc, ApiError):
        return Response(exc.body(), status=exc.http_status)
    if isinstance(exc, Http404):
        error = ApiError(404, str(exc) or "The requested resource was not found.")
    elif isinstance(exc, drf_exceptions.NotAuthenticated | drf_exceptions.AuthenticationFailed):
        error = ApiError(401, UNAUTHENTICATED_MESSAGE)
    elif isinstance(exc, drf_exceptions.PermissionDenied):
        error = ApiError(403, str(exc.detail))
    elif isinstance(exc, RequestDataTooBig):
        # What Google's front ends answer to an oversized request body.
        error = ApiError(400, f"Request payload size exceeds the limit: {settings.DATA_UPLOAD_MAX_MEMORY_SIZE} bytes.",
                         "INVALID_ARGUMENT")
    elif isinstance(exc, drf_exceptions.ParseError):
        error = ApiError(400, f"Invalid JSON payload received. {exc.detail}")
    elif isinstance(exc, drf_exceptions.UnsupportedMediaType):
        error = ApiError(400, f"Invalid request: {exc.detail} Send 'Content-Type: application/json'.")
    elif isinstance(exc, drf_exceptions.MethodNotAllowed):
        error = ApiError(405, str(exc.detail))
    elif isinstance(exc, drf_exceptions.Throttled):
        error = ApiError(429, str(exc.detail))
    elif isinstance(exc, drf_exceptions.APIException):
        error = ApiError(exc.status_code, str(exc.detail))
    else:
        return None
    response = Response(error.body(), status=error.http_status)
    if isinstance(exc, drf_exceptions.NotAuthenticated | drf_exceptions.AuthenticationFailed):
        response["WWW-Authenticate"] = 'Bearer realm="trainhub"'
    return response
