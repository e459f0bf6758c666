"""trainhub extension: a cheap scheduler status served from the Redis snapshot of the last pass."""

from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from trainhub.common.openapi import AUTHENTICATED_ERRORS, obj, responses
from trainhub.scheduling.selectors import scheduler_snapshot


class SchedulerStatus(APIView):
    @extend_schema(operation_id="scheduler.status", responses=responses(obj({
        "lastPass": {"type": "object", "additionalProperties": {"type": "string"}},
        "pendingJobs": {"type": "integer"}, "freeNodes": {"type": "integer"},
    }, required=("lastPass", "pendingJobs", "freeNodes")), AUTHENTICATED_ERRORS))
    def get(self, request: Request) -> Response:
        snapshot = scheduler_snapshot()
        return Response({
            "lastPass": snapshot.get("lastPass", {}),
            "pendingJobs": snapshot.get("pendingJobs", 0),
            "freeNodes": snapshot.get("freeNodes", 0),
        })
