from django.contrib.auth import authenticate
from drf_spectacular.utils import extend_schema
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from trainhub.common.errors import ApiError, FieldViolation, invalid_argument
from trainhub.common.openapi import AUTHENTICATED_ERRORS, obj, responses
from trainhub.iam.selectors import memberships_for_user
from trainhub.iam.services import api_token_rotate
from trainhub.iam.throttle import (
    blocked_message,
    client_address,
    login_attempt_start,
    login_succeeded,
)


class TokenObtain(APIView):
    """Exchange a username and password for a new API token (used by `trainhub auth login`).

    Only digests are stored, so the current token cannot be handed out again: signing in issues a
    new one and the previous one stops working."""

    permission_classes = [AllowAny]
    authentication_classes: list = []
    throttle_classes: list = []  # failed sign-ins are throttled per account and address (iam.throttle)

    @extend_schema(operation_id="auth.token",
                   request={"application/json": obj({"username": {"type": "string"}, "password": {"type": "string"}},
                                                    required=("username", "password"))},
                   responses=responses(obj({"token": {"type": "string"}, "username": {"type": "string"}},
                                           required=("token", "username")), (400, 401, 429)))
    def post(self, request: Request) -> Response:
        data = request.data if isinstance(request.data, dict) else {}
        missing = [FieldViolation(name, "is required") for name in ("username", "password")
                   if not isinstance(data.get(name), str) or not data.get(name)]
        if missing:
            raise invalid_argument(missing)
        who = {"username": data["username"], "address": client_address(request)}
        wait = login_attempt_start(**who)
        if wait:
            raise ApiError(429, blocked_message(wait), "RESOURCE_EXHAUSTED")
        user = authenticate(request, username=data["username"], password=data["password"])
        if user is None:  # already counted as a failure by login_attempt_start
            raise ApiError(401, "Invalid username or password.")
        login_succeeded(**who)
        return Response({"token": api_token_rotate(user=user).key, "username": user.get_username()})


class Me(APIView):
    @extend_schema(operation_id="auth.me", responses=responses(obj({
        "username": {"type": "string"},
        "projects": {"type": "array", "items": obj({"projectId": {"type": "string"}, "role": {"type": "string"}})},
    }, required=("username", "projects")), AUTHENTICATED_ERRORS))
    def get(self, request: Request) -> Response:
        return Response({
            "username": request.user.get_username(),
            "projects": [{"projectId": m.project.project_id, "role": m.role} for m in memberships_for_user(user=request.user)],
        })
