import logging

from django.http import HttpRequest, HttpResponse

from trainhub.common.errors import ApiError, error_response
from trainhub.common.parsers import NUL, holds_nul

logger = logging.getLogger(__name__)


class ApiErrorMiddleware:
    """Under /v1/, an unexpected exception answers 500 INTERNAL in Google's error shape.

    The traceback goes to the log, never to the client. 404s for unknown API paths get the same
    JSON shape instead of Django's HTML page. A NUL character in the path or the query string is
    refused with a 400 before any view (PostgreSQL text cannot hold one; parsers.JsonParser refuses
    them in bodies).
    """

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if request.path.startswith("/v1/") and (NUL in request.path or any(
                holds_nul(key) or holds_nul(values) for key, values in request.GET.lists())):
            return error_response(ApiError(400, "Request contains an invalid argument: the path and query "
                                                "parameters may not contain NUL characters (%00).",
                                           "INVALID_ARGUMENT"))
        response = self.get_response(request)
        if request.path.startswith("/v1/") and response.status_code == 404 and "json" not in response.get("Content-Type", ""):
            return error_response(ApiError(404, f"Method or resource not found: {request.path}"))
        return response

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if not request.path.startswith("/v1/"):
            return None
        logger.exception("Unhandled API error on %s %s", request.method, request.path)
        return error_response(ApiError(500, "Internal error encountered."))
