"""trainhub extension: a cheap scheduler status served from the Redis snapshot of the last pass."""

from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from trainhub.common.live import live_version
from trainhub.common.openapi import AUTHENTICATED_ERRORS, obj, responses
from trainhub.scheduling.selectors import scheduler_snapshot


class SchedulerStatus(APIView):
    @extend_schema(operation_id="scheduler.status", responses=responses(obj({
        "version": {"type": "string", "description": "Changes whenever a job event or a pass happened: live pages "
                                                     "refresh their fragments when it moves."},
        "lastPass": {"type": "object", "additionalProperties": {"type": "string"}},
        "pendingJobs": {"type": "integer"}, "freeNodes": {"type": "integer"},
    }, required=("version", "lastPass", "pendingJobs", "freeNodes")), AUTHENTICATED_ERRORS))
    def get(self, request: Request) -> Response:
        snapshot = scheduler_snapshot()
        last_pass = snapshot.get("lastPass", {})
        return Response({
            "version": live_version(last_pass.get("time", "")),
            "lastPass": last_pass,
            "pendingJobs": snapshot.get("pendingJobs", 0),
            "freeNodes": snapshot.get("freeNodes", 0),
        })
