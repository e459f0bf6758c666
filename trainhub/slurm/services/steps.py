"""Job steps: ``srun`` inside a batch script creates one, the agents of its nodes run its tasks and
report their exits, and the step ends when every node has (slurmctld's step records).

- ``srun`` authenticates with the run's step credential (``step_credential``), which the batch
  host's agent hands the batch script; it is good for that run of that job only, as Slurm's job
  credential is, and stops working when the run ends - but for reading the run's steps, so that
  srun follows a step the job's end cancelled until its nodes report its tasks stopped.
- Step ids count from 0 within a run; the step's record (sacct's ``JOBID.N``) ends COMPLETED when
  every task exited 0, FAILED with the highest task exit code otherwise, CANCELLED 0:15 when
  the job ended (cancel, time limit, requeue) while the step ran or srun was interrupted.
"""

from __future__ import annotations

import datetime as dt
import posixpath
from collections.abc import Iterable

from django.db import transaction
from django.utils.crypto import constant_time_compare, salted_hmac

from trainhub.inventory.wake import nodes_wake
from trainhub.slurm.hostlist import compress
from trainhub.slurm.jobenv import task_room
from trainhub.slurm.models import (JobNode, JobState, JobStep, NodePhase, PendingStep, SlurmJob, StepInput,
                                   StepLogLine, StepNode)
from trainhub.slurm.steps import (NodeShare, StepRefused, StepRequest, default_distribution, layout,
                                  node_step_status, place, tres_per)

_SALT = "trainhub.slurm.step-credential"
#: srun's reason when the job is no longer running (slurm_strerror(ESLURM_ALREADY_DONE)).
ALREADY_DONE = "Job/step already completing or completed"
SIGTERM = 15
#: srun --pty's input waiting for task 0's agent, per step, before srun must wait (a bounded buffer).
MAX_PENDING_INPUT = 256


def step_credential(*, job_pk: int, run_index: int) -> str:
    """The credential of one run of one job: ``<job pk>.<run>.<HMAC under SECRET_KEY>``."""
    subject = f"{job_pk}.{run_index}"
    return f"{subject}.{salted_hmac(_SALT, subject, algorithm='sha256').hexdigest()}"


def step_credential_job(credential: str, *, ended_too: bool = False) -> tuple[SlurmJob, int] | None:
    """The job and run a step credential stands for, while that run is the job's running one
    (``ended_too``: or its last one, ended: only to read its steps)."""
    job_pk, _, rest = credential.partition(".")
    run_index, _, _ = rest.partition(".")
    if not (job_pk.isdigit() and run_index.isdigit()):
        return None
    if not constant_time_compare(credential, step_credential(job_pk=int(job_pk), run_index=int(run_index))):
        return None
    job = SlurmJob.objects.select_related("cluster").filter(pk=int(job_pk)).first()
    if job is None or job.restart_count != int(run_index) or (job.state != JobState.RUNNING and not ended_too):
        return None
    return job, int(run_index)


def _shares(job: SlurmJob, run_index: int, job_nodes: list[JobNode]) -> list[NodeShare]:
    """The allocation's nodes with what the run's running, non-overlapping steps hold there (until
    the whole step ends, as slurmctld frees a step's resources when it completes)."""
    held: dict[int, tuple[int, set[int]]] = {node.pk: (0, set()) for node in job_nodes}
    running = StepNode.objects.filter(step__job=job, step__run_index=run_index, step__state=JobState.RUNNING,
                                      step__overlap=False)
    for job_node_id, cpus, gpus in running.values_list("job_node_id", "cpus", "gpu_indices"):
        total, taken = held[job_node_id]
        held[job_node_id] = (total + cpus, taken | set(gpus))
    return [NodeShare(cpus=node.cpus, gpus=tuple(node.gpu_indices), held_cpus=held[node.pk][0],
                      held_gpus=frozenset(held[node.pk][1])) for node in job_nodes]


@transaction.atomic
def step_create(*, job: SlurmJob, run_index: int, argv: list[str], environment: dict[str, str],
                request: StepRequest, label: bool, now: dt.datetime, srun_host: str = "",
                srun_pid: int = 0, pty: dict[str, int] | None = None) -> JobStep | None:
    """Lay the step out over the run's nodes and hand each node its tasks; None while the CPUs or
    GPUs it needs are held by other running steps (srun retries; the wait is recorded as a
    PendingStep for scontrol show step). ``pty`` ({"rows", "cols"}): srun --pty, task 0 on a
    terminal of that size. Raises StepRefused."""
    job = SlurmJob.objects.select_for_update().get(pk=job.pk)
    if job.state != JobState.RUNNING or job.restart_count != run_index:
        raise StepRefused(ALREADY_DONE)
    job_nodes = list(JobNode.objects.filter(job=job, run_index=run_index, phase=NodePhase.RUNNING)
                     .select_related("node").order_by("node__name"))
    if not job_nodes:
        raise StepRefused(ALREADY_DONE)
    parts = layout(request, allocation_gpus=[tuple(node.gpu_indices) for node in job_nodes], job_tasks=job.num_tasks,
                   task_room=task_room([node.cpus for node in job_nodes], job.cpus_per_task),
                   allocation_names=[node.node.name for node in job_nodes])
    placements = place(request, parts, _shares(job, run_index, job_nodes), cpus_per_task=job.cpus_per_task)
    chosen = [job_nodes[part.allocation_index] for part in parts]
    num_tasks = sum(len(part.task_ids) for part in parts)
    waiting = {"job": job, "run_index": run_index, "srun_host": srun_host[:255], "srun_pid": srun_pid}
    if placements is None:
        PendingStep.objects.update_or_create(**waiting, defaults={
            "node_list": compress(node.node.name for node in chosen), "num_nodes": len(chosen),
            "num_tasks": num_tasks, "cpus": num_tasks * job.cpus_per_task, "seen": now})
        return None
    PendingStep.objects.filter(**waiting).delete()
    if request.in_allocation and request.distribution is None:
        environment = {**environment, "SLURM_DISTRIBUTION": default_distribution(num_tasks, len(chosen))}
    step_id = JobStep.objects.filter(job=job, run_index=run_index).count()
    tres_per_step, tres_per_node = tres_per(request, tasks=num_tasks, cpus_per_task=job.cpus_per_task,
                                            job_gpus_per_node=job.gpus_per_node)
    step = JobStep.objects.create(
        job=job, run_index=run_index, step_id=step_id, name=posixpath.basename(argv[0])[:255], argv=argv,
        environment=environment, num_tasks=num_tasks, node_list=compress(node.node.name for node in chosen),
        label=label, overlap=request.overlap, pty=pty, srun_host=srun_host[:255], srun_pid=srun_pid,
        tres_per_step=tres_per_step, tres_per_node=tres_per_node, distribution=request.distribution or "",
        start_time=now)
    StepNode.objects.bulk_create([
        StepNode(step=step, job_node=node, node_index=index, task_ids=list(part.task_ids),
                 gpu_indices=list(placement.gpu_indices), cpus=placement.cpus)
        for index, (node, part, placement) in enumerate(zip(chosen, parts, placements))])
    nodes_wake(node.node_id for node in chosen)
    return step


def _close(step: JobStep, state: str, now: dt.datetime, *, exit_code: int, signal: int) -> None:
    step.state = state
    step.end_time = now
    step.exit_code = exit_code
    step.exit_signal = signal
    step.save(update_fields=["state", "end_time", "exit_code", "exit_signal"])


#: The stream of a step's log line that says a task exited (its text: ``CODE SIGNAL``): srun prints
#: ``srun: error: NODE: task N: Exited with exit code C`` as it reads it, after the task's own lines.
EXIT_STREAM = "exit"


@transaction.atomic
def step_tasks_exited(*, step_node: StepNode, exits: list[tuple[int, int, int]], now: dt.datetime) -> None:
    """Some of a node's tasks of a step ended (``exits``: task, exit code, signal; all of them so far):
    a failed one's exit becomes a line of the step's log the first time it is reported, after its own
    lines, so srun says a task failed as it fails, not once the whole step ended (slurmstepd sends
    srun a task's exit as it exits; fixtures/22.05/srun-range/out-3.txt: task 0's ``Exited with exit
    code 3`` before task 1's line 3 s later); with every task there the node has finished
    (step_node_finished)."""
    node = StepNode.objects.select_for_update().select_related("step__job").get(pk=step_node.pk)
    if node.exits is not None:
        return
    job = node.step.job
    # Stopped (srun interrupted, the job ending), srun says the exits once the step ended, after its
    # own lines for the stop (fixtures/22.05/srun-details/scancel-8.err).
    stopping = (node.stop_requested or node.step.state != JobState.RUNNING or job.state != JobState.RUNNING
                or job.ending_state)
    if not stopping:
        said = set(StepLogLine.objects.filter(step_id=node.step_id, stream=EXIT_STREAM, task__in=node.task_ids)
                   .values_list("task", flat=True))
        StepLogLine.objects.bulk_create([
            StepLogLine(step_id=node.step_id, task=task, stream=EXIT_STREAM, time=now, text=f"{code} {signal}")
            for task, code, signal in sorted(exits) if (code or signal) and task not in said])
    if {task for task, _, _ in exits} == set(node.task_ids):
        step_node_finished(step_node=node, exits=exits, now=now)


@transaction.atomic
def step_node_finished(*, step_node: StepNode, exits: list[tuple[int, int, int]], now: dt.datetime) -> None:
    """A node's tasks of a step all ended (``exits``: task, exit code, signal). When the last node
    of the step reports, the step ends with the worst of its nodes' statuses (steps.node_step_status):
    the highest code, then the highest signal.
    A step srun stopped, or whose job is being stopped (its tasks got SIGTERM at a time limit:
    fixtures/22.05/srun-timeout/sacct-p.txt, step 1.0 CANCELLED 0:15), ends CANCELLED unless a task
    exited with a code of its own (a task that traps srun's SIGINT and exits 9: FAILED 9:0,
    fixtures/22.05/srun-details/sacct-p.txt, step 6.0)."""
    step = JobStep.objects.select_for_update().get(pk=step_node.step_id)
    node = StepNode.objects.select_for_update().get(pk=step_node.pk)
    if node.exits is not None:
        return
    node.exits = [list(item) for item in exits]
    node.save(update_fields=["exits"])
    if step.state != JobState.RUNNING or StepNode.objects.filter(step=step, exits__isnull=True).exists():
        return
    statuses = [node_step_status(reported, task_ids)
                for reported, task_ids in StepNode.objects.filter(step=step).values_list("exits", "task_ids")]
    exit_code = max((code for code, _ in statuses), default=0)
    signal = max((sig for _, sig in statuses), default=0)
    state = JobState.COMPLETED if exit_code == signal == 0 else JobState.FAILED
    stopping = SlurmJob.objects.filter(pk=step.job_id).exclude(ending_state="").exists()
    if exit_code == 0 and (stopping or StepNode.objects.filter(step=step, stop_requested=True).exists()):
        state = JobState.CANCELLED
    _close(step, state, now, exit_code=exit_code, signal=signal)


@transaction.atomic
def step_cancel(*, step: JobStep, now: dt.datetime, signum: int = SIGTERM) -> None:
    """srun was interrupted: every node stops the step's tasks (``signum``: SIGTERM, or SIGINT after
    srun's second Ctrl-C; SIGKILL after the grace period); the step ends CANCELLED when they have
    all been reported."""
    step = JobStep.objects.select_for_update().get(pk=step.pk)
    if step.state != JobState.RUNNING:
        return
    parts = StepNode.objects.filter(step=step, exits__isnull=True)
    nodes_wake(parts.values_list("job_node__node_id", flat=True))
    parts.update(stop_requested=True, stop_signal=signum)


def steps_cancel(*, job: SlurmJob, run_index: int, now: dt.datetime) -> None:
    """The run ended under its steps (cancel, time limit, requeue): those still running end
    CANCELLED 0:15, as slurmctld records a step it signalled; their agents kill the tasks when
    the node moves on to its epilog."""
    for step in JobStep.objects.select_for_update().filter(job=job, run_index=run_index, state=JobState.RUNNING):
        _close(step, JobState.CANCELLED, now, exit_code=0, signal=SIGTERM)


def step_input_add(*, step: JobStep, data: str = "", rows: int | None = None, cols: int | None = None) -> bool:
    """srun --pty sent bytes typed (``data``, base64) or a new window size to task 0's terminal:
    kept for its agent, which is woken to deliver it. False while MAX_PENDING_INPUT inputs wait
    (srun sends it again later); a step that has ended takes and drops it."""
    if step.pty is None or step.state != JobState.RUNNING:
        return True
    if StepInput.objects.filter(step=step).count() >= MAX_PENDING_INPUT:
        return False
    StepInput.objects.create(step=step, data=data, rows=rows, cols=cols)
    nodes_wake(StepNode.objects.filter(step=step, node_index=0).values_list("job_node__node_id", flat=True))
    return True


def step_input_delivered(*, step_node: StepNode, through: int) -> None:
    """Task 0's agent wrote the step's inputs up to id ``through`` to its terminal."""
    StepInput.objects.filter(step_id=step_node.step_id, id__lte=through).delete()


def step_log_append(*, step_node: StepNode, task: int, lines: Iterable[tuple[str, dt.datetime, str]]) -> int:
    rows = [StepLogLine(step_id=step_node.step_id, task=task, stream=stream, time=time, text=text[:65536])
            for stream, time, text in lines]
    if rows:
        StepLogLine.objects.bulk_create(rows)
    return len(rows)
