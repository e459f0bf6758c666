"""The agent API: how node agents join, heart-beat, learn what to run and report what ran.

Every call but ``join`` authenticates with the node's credential and is confined to that node:
a replica or Slurm job step placed on any other node answers 404, exactly as one that does not
exist (Kubernetes' NodeRestriction). Reports are idempotent - a resend after a lost answer changes
nothing twice - so an agent can retry every call after a network error.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from itertools import groupby
from operator import itemgetter
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from trainhub.common.errors import ApiError, FieldViolation, invalid_argument
from trainhub.common.redis import get_redis
from trainhub.inventory import services
from trainhub.inventory.agent_auth import IsNodeAgent, NodeCredentialAuthentication
from trainhub.inventory.assignments import node_assignments_of
from trainhub.inventory.wake import node_wake_value
from trainhub.jobs import services as job_services
from trainhub.jobs.models import Replica
from trainhub.slurm.models import JobNode
from trainhub.slurm.services import lifecycle

#: Seconds between an agent's assignment polls and heartbeats, told to it at join.
POLL_SECONDS = 1.0
HEARTBEAT_SECONDS = 10.0
MAX_LINES_PER_CHUNK = 5000
MAX_LINE_CHARS = 65536
#: ``pty``: what srun --pty's task 0 printed on its terminal, base64 chunks (trainhub.agent.supervisor).
_STREAMS = {"stdout", "stderr", "prolog", "epilog", "pty"}


def _field(body: dict, name: str, kind: type | tuple[type, ...], *, required: bool = True, default: Any = None) -> Any:
    value = body.get(name, default)
    if value is None and not required:
        return default
    if isinstance(value, bool) and bool not in (kind if isinstance(kind, tuple) else (kind,)):
        value = None
    if not isinstance(value, kind):
        raise invalid_argument([FieldViolation(name, f"required, of type {getattr(kind, '__name__', kind)}")])
    return value


def _moment(body: dict) -> dt.datetime:
    """The agent's time of the event (its clock; the server's when it sent none)."""
    value = body.get("time")
    if value is None:
        return timezone.now()
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise invalid_argument([FieldViolation("time", "seconds since the epoch")])
    try:
        return dt.datetime.fromtimestamp(value, dt.UTC)
    except (OverflowError, OSError, ValueError):
        raise invalid_argument([FieldViolation("time", "seconds since the epoch")]) from None


def _facts(body: dict) -> dict | None:
    facts = body.get("facts")
    if facts is None:
        return None
    if not isinstance(facts, dict) or not isinstance(facts.get("gpus", []), list):
        raise invalid_argument([FieldViolation("facts", "an object; facts.gpus a list")])
    return facts


def _lines(body: dict) -> list[tuple[str, dt.datetime, str]]:
    raw = _field(body, "lines", list)
    if len(raw) > MAX_LINES_PER_CHUNK:
        raise invalid_argument([FieldViolation("lines", f"at most {MAX_LINES_PER_CHUNK} lines a chunk")])
    lines = []
    for index, item in enumerate(raw):
        if (not isinstance(item, list) or len(item) != 3 or item[0] not in _STREAMS
                or not isinstance(item[2], str) or isinstance(item[1], bool) or not isinstance(item[1], (int, float))):
            raise invalid_argument([FieldViolation(f"lines[{index}]", "[stream, epoch seconds, text]")])
        lines.append((item[0], _moment({"time": item[1]}), item[2][:MAX_LINE_CHARS]))
    return lines


class AgentView(APIView):
    authentication_classes = [NodeCredentialAuthentication]
    permission_classes = [IsNodeAgent]
    schema = None  # the agent API is for trainhub-agent, not in the user API's OpenAPI document

    def node(self, request: Request):
        return request.user.node


#: What an agent-chosen credential must look like: as long and random as one trainhub makes.
_CHOSEN_CREDENTIAL = re.compile(re.escape(services.NODE_CREDENTIAL_PREFIX) + r"[A-Za-z0-9_-]{43,128}")


class Join(APIView):
    """POST {token, name, facts, credential?} -> {node, credential, pollSeconds, heartbeatSeconds}."""

    authentication_classes: list = []
    permission_classes: list = []
    schema = None

    def post(self, request: Request) -> Response:
        body = request.data if isinstance(request.data, dict) else {}
        token = _field(body, "token", str)
        name = _field(body, "name", str)
        if not (1 <= len(name) <= 63) or not all(c.isalnum() or c in "-_" for c in name):
            raise invalid_argument([FieldViolation("name", "1-63 letters, digits, '-' or '_'")])
        facts = _facts(body) or {}
        chosen = _field(body, "credential", str, required=False, default="")
        if chosen and not _CHOSEN_CREDENTIAL.fullmatch(chosen):
            raise invalid_argument([FieldViolation(
                "credential", f"{services.NODE_CREDENTIAL_PREFIX} followed by 43-128 URL-safe base64 characters")])
        try:
            node, credential = services.node_join(raw_token=token, name=name, facts=facts, now=timezone.now(),
                                                  credential=chosen)
        except services.JoinRefused as exc:
            raise ApiError(exc.status, str(exc)) from None
        return Response({"node": node.name, "pool": node.pool.name, "credential": credential,
                         "pollSeconds": POLL_SECONDS, "heartbeatSeconds": HEARTBEAT_SECONDS})


class Heartbeat(AgentView):
    """POST {running: [replica id], facts?} -> {node, state, stateReason}."""

    def post(self, request: Request) -> Response:
        body = request.data if isinstance(request.data, dict) else {}
        running = _field(body, "running", list, required=False, default=[])
        if not all(isinstance(pk, int) and not isinstance(pk, bool) for pk in running):
            raise invalid_argument([FieldViolation("running", "a list of replica ids")])
        state, reason = services.node_agent_report(node=self.node(request), now=_moment(body), running=running,
                                                   facts=_facts(body))
        return Response({"node": self.node(request).name, "state": state, "stateReason": reason})


def long_poll_link() -> dict[str, str]:
    """The header that tells agents where to long-poll their assignments (none when no long-poll
    process is deployed: agents then poll this endpoint conditionally)."""
    url = settings.TRAINHUB_AGENT_LONG_POLL_URL
    return {"Link": f'<{url.rstrip("/")}/agent/v1/assignments>; rel="long-poll"'} if url else {}


def _assignments_answer(node, if_none_match: str = "") -> Response:
    """The node's assignments with their ETag, or 304 when ``if_none_match`` is that ETag."""
    # Read before the database: a change committed after this read bumps the counter again.
    headers = {"ETag": f'"{node_wake_value(get_redis(), node.pk)}"', **long_poll_link()}
    if if_none_match == headers["ETag"]:
        return Response(status=304, headers=headers)
    return Response(node_assignments_of(node.pk), headers=headers)


class Assignments(AgentView):
    """GET -> what the node must run; 304 while nothing changed since the ETag it sends."""

    def get(self, request: Request) -> Response:
        return _assignments_answer(self.node(request), request.headers.get("If-None-Match", ""))


def _on_node(model, node, pk: int, what: str, *related: str):
    """The ``model`` row ``pk`` (with its ``related`` rows) if it is on ``node``; 404 alike for
    another node's and a missing one."""
    found = model.objects.filter(pk=pk, node_id=node.pk).select_related(*related).first()
    if found is None:
        raise ApiError(404, f"{what} {pk} is not on node {node.name}.")
    return found


def _replica_of(node, replica_id: int) -> Replica:
    # The replica's row alone: the job services lock and read the job themselves (its spec is large).
    return _on_node(Replica, node, replica_id, "Replica")


class ReplicaStarted(AgentView):
    def post(self, request: Request, replica_id: int) -> Response:
        replica = _replica_of(self.node(request), replica_id)
        job_services.replica_started(replica=replica, now=_moment(request.data))
        return Response({})


class ReplicaLogs(AgentView):
    """POST {first, lines: [[stream, time, text]]}: lines ``first..``; 409 {expected} on a gap."""

    def post(self, request: Request, replica_id: int) -> Response:
        replica = _replica_of(self.node(request), replica_id)
        return _append(f"replica:{replica.pk}", request.data,
                       lambda lines: job_services.replica_logs_append(replica=replica, lines=lines))


class ReplicaExited(AgentView):
    """POST {exitCode|null, lostReason?, startError?, outputs?: {hpMetrics, modelArtifacts}} -> the
    node's assignments with their ETag, as GET /assignments answers them.

    An exit always changes what the node runs (the replica leaves its list), and the agent would
    otherwise fetch the whole list right after: at 1,000 agents those fetches were the long poll's
    slowest answers. The answer is read after the exit committed, so it already leaves the replica out.
    """

    def post(self, request: Request, replica_id: int) -> Response:
        replica = _replica_of(self.node(request), replica_id)
        body = request.data if isinstance(request.data, dict) else {}
        exit_code = _field(body, "exitCode", int, required=False)
        lost = _field(body, "lostReason", str, required=False, default="")[:500]
        start_error = _field(body, "startError", str, required=False, default="")[:2000]
        outputs = _field(body, "outputs", dict, required=False)
        if outputs and replica.state != "EXITED":
            artifacts = _field(outputs, "modelArtifacts", dict, required=False, default={})
            job_services.job_outputs_record(
                job=replica.job, hp_metrics=_field(outputs, "hpMetrics", list, required=False, default=[]),
                model_artifacts={**artifacts, "host": replica.node.hostname} if artifacts else {})
        job_services.replica_exited(replica=replica, exit_code=exit_code, now=_moment(body), lost_reason=lost,
                                    start_error=start_error)
        return _assignments_answer(self.node(request))


def _append(key: str, data: Any, store) -> Response:
    body = data if isinstance(data, dict) else {}
    first = _field(body, "first", int)
    if first < 0:
        raise invalid_argument([FieldViolation("first", "the sequence number of the chunk's first line, from 0")])
    lines = _lines(body)
    with transaction.atomic():
        try:
            overlap = services.log_chunk_accept(key=key, first=first, count=len(lines))
        except services.LogGap as exc:
            return Response({"error": {"code": 409, "message": str(exc), "status": "ABORTED"},
                             "expected": exc.expected}, status=409)
        store(lines[overlap:])
    return Response({"next": first + len(lines)})


def _job_node_of(node, job_node_id: int) -> JobNode:
    return _on_node(JobNode, node, job_node_id, "Slurm job step", "job", "node")


class SlurmLogs(AgentView):
    """POST {first, lines}: prolog and epilog lines, or with ``?part=batch`` the batch script's
    (numbered apart: its supervisor's log counts its own lines)."""

    def post(self, request: Request, job_node_id: int) -> Response:
        job_node = _job_node_of(self.node(request), job_node_id)
        key = f"slurm:{job_node.pk}" + (":batch" if request.query_params.get("part") == "batch" else "")
        return _append(key, request.data, lambda lines: [
            lifecycle.job_log_append(job_node=job_node, stream=stream, lines=[(time, text) for _, time, text in run])
            for stream, run in groupby(lines, key=itemgetter(0))])


class SlurmReport(AgentView):
    """POST .../slurm/<id>/<event>: prolog, batch, epilog (finished with exitCode; a batch script that
    could not be started: launchFailed) or lost."""

    def post(self, request: Request, job_node_id: int, event: str) -> Response:
        if event not in ("prolog", "batch", "epilog", "lost"):
            raise ApiError(404, f"Unknown Slurm step report {event!r}: prolog, batch, epilog or lost.")
        job_node = _job_node_of(self.node(request), job_node_id)
        body = request.data if isinstance(request.data, dict) else {}
        now = _moment(body)
        if event == "lost":
            lifecycle.job_node_lost(job_node=job_node, now=now, reason=_field(body, "reason", str)[:200])
            return Response({})
        if event == "batch" and _field(body, "launchFailed", bool, required=False, default=False):
            lifecycle.job_batch_launch_failed(job_node=job_node, now=now)
            return Response({})
        exit_code = _field(body, "exitCode", int)
        if event == "prolog":
            lifecycle.job_node_prolog_finished(job_node=job_node, exit_code=exit_code, now=now)
        elif event == "epilog":
            lifecycle.job_node_epilog_finished(job_node=job_node, exit_code=exit_code, now=now)
        else:
            lifecycle.job_batch_finished(job_node=job_node, exit_code=exit_code, now=now,
                                         signal=_field(body, "signal", int, required=False, default=0),
                                         max_rss_kb=_field(body, "maxRssKb", int, required=False))
        return Response({})
