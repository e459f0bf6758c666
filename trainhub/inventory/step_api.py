"""The agent API's job-step part: ``srun`` creates a step and follows it; node agents report the
tasks they run for it.

- srun (inside a batch script) authenticates with the run's step credential, which the batch
  host's agent put in the script's environment (TRAINHUB_STEP_CREDENTIAL): it may create and read
  steps of that run of that job and nothing else; it stops working when the run ends.
- A node agent reports a task's output and its node's task exits with its node credential,
  confined like every agent call to the steps placed on its own node (404 alike otherwise).
"""

from __future__ import annotations

import base64
import binascii

from rest_framework import authentication, exceptions, permissions
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from trainhub.agent.srun import MAX_HOSTFILE_ENTRIES, parse_distribution
from trainhub.common.errors import ApiError, FieldViolation, invalid_argument
from trainhub.inventory.agent_api import AgentView, _append, _field, _moment
from trainhub.slurm.models import JobStep, StepNode
from trainhub.slurm.selectors import kill_wait, step_layout, step_output, steps_ended
from trainhub.slurm.services import steps as step_services
from trainhub.slurm.steps import (NODES_BUSY, UNSPECIFIED_ERROR, ArbitraryCountDiffers, StepRefused, StepRequest,
                                  arbitrary_hosts)

SIGINT, SIGTERM = 2, 15

MAX_ARGS = 4096
#: The most bytes one srun --pty input carries (srun reads its terminal in pieces of this size): its
#: document reaches the supervisor's FIFO in one write of less than PIPE_BUF (4096) bytes.
MAX_INPUT_BYTES = 2048
MAX_ENVIRONMENT_CHARS = 1 << 20
OUTPUT_LINES = 1000


class StepPrincipal:
    """request.user for srun: one run of one job, never staff, member of no project."""

    is_authenticated = True
    is_active = True
    is_staff = False
    is_superuser = False

    def __init__(self, job, run_index: int):
        self.job = job
        self.run_index = run_index


class StepCredentialAuthentication(authentication.BaseAuthentication):
    def authenticate(self, request):
        header = authentication.get_authorization_header(request).decode("latin-1").strip()
        scheme, _, raw = header.partition(" ")
        if not header or scheme.lower() != "bearer" or not raw.strip():
            return None
        # A GET reads the run's steps (srun following one its job's end cancelled); the rest needs the run.
        found = step_services.step_credential_job(raw.strip(), ended_too=request.method == "GET")
        if found is None:
            raise exceptions.AuthenticationFailed("Invalid step credential: srun runs only inside a running "
                                                  "job's batch script.")
        return StepPrincipal(*found), found

    def authenticate_header(self, request):
        return 'Bearer realm="trainhub-srun"'


class IsStepCredential(permissions.BasePermission):
    message = "Only srun inside a running job may call this endpoint."

    def has_permission(self, request, view) -> bool:
        return isinstance(request.user, StepPrincipal)


class SrunView(APIView):
    authentication_classes = [StepCredentialAuthentication]
    permission_classes = [IsStepCredential]
    schema = None


def _count(body: dict, name: str) -> int | None:
    value = _field(body, name, int, required=False)
    if value is not None and not 1 <= value <= 1_000_000:
        raise invalid_argument([FieldViolation(name, "a whole number from 1")])
    return value


class Steps(SrunView):
    """POST {argv, environment, nodes?, maxNodes? (-N MIN-MAX: nodes is MIN), tasks?, tasksPerNode?,
    gpusPerNode?, exact?, overlap?, distribution?, hosts? (-m arbitrary: SLURM_HOSTFILE's entries, host lists expanded here: steps.arbitrary_hosts),
    repeats? (how many times each of hosts comes in a row; 1 each without it),
    inAllocation? (srun did not make the job: its tasks see srun's default SLURM_DISTRIBUTION), label?,
    pty?: {rows, cols}, srunHost?, srunPid?} -> {stepId, jobId, nodeList, numTasks, killWait, layout:
    [[node, [task, ...]], ...]}; while other
    steps hold what it needs, 202 {jobId, retry: true, reason, stepsEnded} and srun asks again."""

    def post(self, request: Request) -> Response:
        body = request.data if isinstance(request.data, dict) else {}
        argv = _field(body, "argv", list)
        if not argv or len(argv) > MAX_ARGS or not all(isinstance(item, str) and item for item in argv):
            raise invalid_argument([FieldViolation("argv", f"1 to {MAX_ARGS} non-empty strings")])
        environment = _field(body, "environment", dict, required=False, default={})
        if (not all(isinstance(value, str) for value in environment.values())
                or sum(len(key) + len(value) for key, value in environment.items()) > MAX_ENVIRONMENT_CHARS):
            raise invalid_argument([FieldViolation("environment", "names to strings, at most 1 MiB in all")])
        gpus = _field(body, "gpusPerNode", int, required=False)
        if gpus is not None and gpus < 0:
            raise invalid_argument([FieldViolation("gpusPerNode", "a whole number from 0")])
        distribution = _field(body, "distribution", str, required=False, default="")
        try:
            kind, plane_size = parse_distribution(distribution) if distribution else (None, 1)
        except ValueError:
            raise invalid_argument([FieldViolation("distribution", "block, cyclic, plane=N or arbitrary")]) from None
        hosts = _field(body, "hosts", list, required=False, default=[])
        if not all(isinstance(host, str) and host for host in hosts) or len(hosts) > MAX_HOSTFILE_ENTRIES:
            raise invalid_argument([FieldViolation("hosts", f"at most {MAX_HOSTFILE_ENTRIES} node names")])
        repeats = _field(body, "repeats", list, required=False, default=[1] * len(hosts))
        if len(repeats) != len(hosts) or not all(isinstance(times, int) and not isinstance(times, bool)
                                                 and times >= 1 for times in repeats):
            raise invalid_argument([FieldViolation("repeats", "how many times each of hosts comes in a row, from 1")])
        tasks, nodes, max_nodes = _count(body, "tasks"), _count(body, "nodes"), _count(body, "maxNodes")
        if max_nodes is not None and (nodes is None or max_nodes < nodes):
            raise invalid_argument([FieldViolation("maxNodes", "-N MIN-MAX's MAX: with nodes, and not below it")])
        principal = request.user
        in_allocation = bool(body.get("inAllocation"))
        if kind == "arbitrary":
            step_nodes = min(max_nodes or nodes or principal.job.num_nodes, principal.job.num_nodes)
            try:
                hosts, tasks = arbitrary_hosts(list(zip(hosts, repeats, strict=True)), tasks, step_nodes)
            except ArbitraryCountDiffers as exc:
                if in_allocation:
                    raise ApiError(400, str(exc), "FAILED_PRECONDITION") from None
                raise _refused(principal, StepRefused(UNSPECIFIED_ERROR)) from None
            except ValueError as exc:
                raise ApiError(400, str(exc), "FAILED_PRECONDITION") from None
        wanted = StepRequest(nodes=nodes, max_nodes=max_nodes, tasks=tasks,
                             tasks_per_node=_count(body, "tasksPerNode"), gpus_per_node=gpus,
                             exact=bool(body.get("exact")), overlap=bool(body.get("overlap")),
                             distribution=kind, plane_size=plane_size, hosts=tuple(hosts),
                             in_allocation=in_allocation)
        srun_host = _field(body, "srunHost", str, required=False, default="")
        srun_pid = _field(body, "srunPid", int, required=False, default=0)
        if srun_pid < 0:
            raise invalid_argument([FieldViolation("srunPid", "a whole number from 0")])
        pty = _field(body, "pty", dict, required=False)
        if pty is not None:
            pty = _window_size(pty, "pty")
        try:
            step = step_services.step_create(job=principal.job, run_index=principal.run_index, argv=argv,
                                             environment=environment, request=wanted,
                                             label=bool(body.get("label")), now=_moment(body),
                                             srun_host=srun_host, srun_pid=srun_pid, pty=pty)
        except StepRefused as exc:
            raise _refused(principal, exc) from None
        if step is None:
            return Response({"jobId": principal.job.job_id, "retry": True, "reason": NODES_BUSY,
                             "stepsEnded": steps_ended(job=principal.job, run_index=principal.run_index)},
                            status=202)
        return Response({"stepId": step.step_id, "jobId": principal.job.job_id, "nodeList": step.node_list,
                         "numTasks": step.num_tasks, "killWait": kill_wait(job=principal.job),
                         "layout": step_layout(step=step)})


def _refused(principal: StepPrincipal, exc: StepRefused) -> ApiError:
    """srun's lines for a step slurmctld refuses: the detail, where there is one, then ``Unable to
    create step for job N: REASON``."""
    reason = f"Unable to create step for job {principal.job.job_id}: {exc}"
    return ApiError(400, f"{exc.detail}\n{reason}" if exc.detail else reason, "FAILED_PRECONDITION")


def _window_size(body: dict, name: str) -> dict[str, int]:
    size = {key: body.get(key) for key in ("rows", "cols")}
    if not all(isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= 65535
               for value in size.values()):
        raise invalid_argument([FieldViolation(name, "rows and cols, whole numbers from 0 to 65535")])
    return size


def _step_of(principal: StepPrincipal, step_id: int) -> JobStep:
    step = JobStep.objects.filter(job=principal.job, run_index=principal.run_index, step_id=step_id).first()
    if step is None:
        raise ApiError(404, f"Step {principal.job.job_id}.{step_id} does not exist.")
    return step


class Step(SrunView):
    """GET ?after=<line> -> {state, exitCode, signal, lines: [[task, stream, text]], next, failed}."""

    def get(self, request: Request, step_id: int) -> Response:
        step = _step_of(request.user, step_id)
        after = request.query_params.get("after", "0")
        if not after.isdigit():
            raise invalid_argument([FieldViolation("after", "the id of the last line read, from 0")])
        return Response(step_output(step=step, after=int(after), limit=OUTPUT_LINES))


class StepCancel(SrunView):
    """POST {signal?}: srun was interrupted; the step's tasks are stopped on every node, ``signal``
    (SIGINT or SIGTERM, the default) first."""

    def post(self, request: Request, step_id: int) -> Response:
        body = request.data if isinstance(request.data, dict) else {}
        signum = _field(body, "signal", int, required=False, default=SIGTERM)
        if signum not in (SIGINT, SIGTERM):
            raise invalid_argument([FieldViolation("signal", f"{SIGINT} (SIGINT) or {SIGTERM} (SIGTERM)")])
        step_services.step_cancel(step=_step_of(request.user, step_id), now=_moment(body), signum=signum)
        return Response({})


class StepInputView(SrunView):
    """POST {data: base64} (bytes typed, at most MAX_INPUT_BYTES) or {rows, cols} (the window's new
    size): srun --pty's input for task 0's terminal -> {accepted}; false while the step's input
    buffer is full (srun sends it again)."""

    def post(self, request: Request, step_id: int) -> Response:
        step = _step_of(request.user, step_id)
        body = request.data if isinstance(request.data, dict) else {}
        if "data" in body:
            data = _field(body, "data", str)
            try:
                size = len(base64.b64decode(data, validate=True))
            except (binascii.Error, ValueError):
                size = -1
            if not 0 < size <= MAX_INPUT_BYTES:
                raise invalid_argument([FieldViolation("data", f"base64 of 1 to {MAX_INPUT_BYTES} bytes")])
            accepted = step_services.step_input_add(step=step, data=data)
        else:
            accepted = step_services.step_input_add(step=step, **_window_size(body, "rows"))
        return Response({"accepted": accepted})


def _step_node_of(node, step_node_id: int) -> StepNode:
    """A step's tasks on ``node``; 404 alike for another node's and a missing one."""
    found = StepNode.objects.filter(pk=step_node_id, job_node__node_id=node.pk).select_related("step").first()
    if found is None:
        raise ApiError(404, f"Step tasks {step_node_id} are not on node {node.name}.")
    return found


class TaskLogs(AgentView):
    """POST {first, lines: [[stream, time, text]]}: task ``task``'s lines ``first..``; 409 {expected} on a gap."""

    def post(self, request: Request, step_node_id: int, task: int) -> Response:
        step_node = _step_node_of(self.node(request), step_node_id)
        if task not in step_node.task_ids:
            raise ApiError(404, f"Task {task} is not on node {self.node(request).name}.")
        return _append(f"step:{step_node.pk}:{task}", request.data, lambda lines: step_services.step_log_append(
            step_node=step_node, task=task, lines=lines))


class TasksExited(AgentView):
    """POST {exits: [[task, exitCode, signal]]}: these tasks of the step on this node have ended (every
    one so far; the node has finished once all of its tasks are there)."""

    def post(self, request: Request, step_node_id: int) -> Response:
        step_node = _step_node_of(self.node(request), step_node_id)
        body = request.data if isinstance(request.data, dict) else {}
        exits = _field(body, "exits", list)
        tasks = [item[0] for item in exits if isinstance(item, list) and item]
        if (not exits or len(set(tasks)) != len(exits) or not set(tasks) <= set(step_node.task_ids)
                or not all(len(item) == 3 and all(isinstance(v, int) and not isinstance(v, bool) for v in item)
                           for item in exits)):
            raise invalid_argument([FieldViolation("exits", "[task, exit code, signal] for tasks of the node, "
                                                            "each once")])
        step_services.step_tasks_exited(step_node=step_node, exits=[tuple(item) for item in exits],
                                        now=_moment(body))
        return Response({})


class TaskInputDelivered(AgentView):
    """POST {through: id}: this node wrote srun --pty's inputs up to ``through`` to task 0's terminal."""

    def post(self, request: Request, step_node_id: int) -> Response:
        step_node = _step_node_of(self.node(request), step_node_id)
        body = request.data if isinstance(request.data, dict) else {}
        step_services.step_input_delivered(step_node=step_node, through=_field(body, "through", int))
        return Response({})
