"""salloc: an allocation without a batch script, whose command runs where salloc runs (the user's
machine), with ``srun`` launching steps on the allocation's nodes (fixtures/22.05/salloc).

- The job is an ordinary job of the queue (scontrol's BatchFlag=0, JobName ``interactive`` unless
  -J): it pends and starts like a batch job, its nodes run the prolog, then wait for srun's steps.
- salloc keeps it alive: every call of its owner's salloc (``allocation_keep_alive``) stamps
  ``salloc_seen``; an allocation whose salloc has not called for InactiveLimit seconds (trainhub's
  keep-alive timeout when InactiveLimit is 0) ends at the next scheduler pass
  (lifecycle.allocations_abandoned) as slurmctld ends it at InactiveLimit: a running
  one TIMEOUT (reason InactiveLimit), a pending one CANCELLED. Slurm 22.05 with InactiveLimit=0
  keeps a killed salloc's allocation until its time limit (fixtures/22.05/salloc/squeue-13-killed);
  trainhub never lets a vanished salloc hold nodes.
- srun inside salloc's command authenticates with the run's step credential, which only the job's
  owner obtains (``allocation_step_credential``).
- When the command exits, salloc relinquishes the allocation (``allocation_relinquish``): the job
  ends COMPLETED on 0:0, FAILED with the command's exit code otherwise; a pending one (Ctrl-C, SIGTERM
  while salloc waits) is cancelled, and so is srun's own allocation whose step two Ctrl-C aborted.

Everything here is the owner's alone: another user, an administrator included, gets 404 as for a job
that does not exist (only the owner's salloc has a command to run).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import replace

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction

from trainhub.common.errors import ApiError
from trainhub.slurm.models import JobNode, JobState, NodePhase, SlurmCluster, SlurmJob
from trainhub.slurm.services import lifecycle
from trainhub.slurm.services.jobs import SUBMIT_FAILED, Submission, job_cancel, job_submit
from trainhub.slurm.services.steps import step_credential

#: salloc's words where sbatch says "Batch job submission failed" (slurm:src/salloc/salloc.c).
ALLOCATE_FAILED = "salloc: error: Job submit/allocate failed: "


def allocation_submit(*, cluster: SlurmCluster, user: AbstractBaseUser, submission: Submission, is_admin: bool,
                      now: dt.datetime) -> SlurmJob:
    """Queue salloc's job (``submission``: its arguments, allocation=True, where salloc runs): sbatch's
    options, parsing and validation, no batch script; errors in salloc's words."""
    try:
        return job_submit(cluster=cluster, user=user, is_admin=is_admin, now=now, submission=submission)
    except ApiError as exc:
        message = exc.message.replace(SUBMIT_FAILED, ALLOCATE_FAILED).replace("sbatch: ", "salloc: ")
        raise replace(exc, message=message) from None


def _owned(job: SlurmJob, actor: AbstractBaseUser) -> SlurmJob:
    if not job.interactive or job.user_name != actor.get_username():
        raise ApiError(404, f"Allocation {job.job_id} does not exist (salloc's allocations are their owner's).")
    return job


def allocation_hosts(job: SlurmJob) -> list[tuple[str, int]] | None:
    """The current run's nodes in node-list order with the job's CPUs on each, once salloc may run
    its command (running, with the prolog done on every node); None before (one query)."""
    if job.state != JobState.RUNNING:
        return None
    rows = list(JobNode.objects.filter(job=job, run_index=job.restart_count).order_by("node__name")
                .values_list("node__name", "cpus", "phase"))
    if not rows or any(phase != NodePhase.RUNNING for _, _, phase in rows):
        return None
    return [(name, cpus) for name, cpus, _ in rows]


def allocation_keep_alive(*, job: SlurmJob, actor: AbstractBaseUser, now: dt.datetime) -> SlurmJob:
    """salloc is alive: stamp it on a job that is still pending or running; the job as it is now."""
    job = _owned(job, actor)
    SlurmJob.objects.filter(pk=job.pk, state__in=[JobState.PENDING, JobState.RUNNING]).update(salloc_seen=now)
    return SlurmJob.objects.select_related("cluster").get(pk=job.pk)


def allocation_step_credential(*, job: SlurmJob, actor: AbstractBaseUser) -> str:
    """The credential srun inside salloc's command uses: the current run's, once it is ready."""
    job = _owned(job, actor)
    if allocation_hosts(job) is None:
        raise ApiError(400, f"srun: error: Unable to create step for job {job.job_id}: "
                            "Job/step already completing or completed" if job.state != JobState.PENDING
                       else f"Allocation {job.job_id} is not ready yet.", "FAILED_PRECONDITION")
    return step_credential(job_pk=job.pk, run_index=job.restart_count)


def allocation_relinquish(*, job: SlurmJob, actor: AbstractBaseUser, exit_code: int, signal: int,
                          now: dt.datetime, cancelled: bool = False, launch_failed: bool = False) -> SlurmJob:
    """salloc's command exited (or salloc was interrupted while it waited): the allocation ends.
    ``cancelled``: srun outside an allocation whose step two Ctrl-C aborted: CANCELLED by the
    actor, 0:0 (srun.c: slurm_complete_job with NO_VAL; fixtures/22.05/srun-abort/sacct-p.txt).
    ``launch_failed``: srun outside an allocation whose step was refused (lifecycle.job_launch_failed;
    the exit code and signal are then Slurm's, not the ones given)."""
    job = _owned(job, actor)
    if job.state == JobState.PENDING:
        return job_cancel(job=job, actor=actor, is_admin=False, now=now)
    with transaction.atomic():
        job = SlurmJob.objects.select_for_update().select_related("cluster").get(pk=job.pk)
        if job.state == JobState.RUNNING and not job.ending_state and launch_failed:
            lifecycle.job_launch_failed(job=job, now=now)
        elif job.state == JobState.RUNNING and not job.ending_state:
            lifecycle.job_allocation_ended(job=job, exit_code=exit_code, signal=signal, now=now,
                                           cancelled_by=actor.get_username() if cancelled else "")
        elif job.state != JobState.RUNNING and not (job.exit_code or job.exit_signal):
            # srun completing its job that ended under the step (time limit): slurmctld's job_complete
            # keeps the code of a finished job whose own is 0 for scontrol show job, not for accounting
            # (fixtures/22.05/srun-timeout: scontrol's ExitCode=0:15, sacct's 0:0).
            job.exit_code, job.exit_signal = exit_code, signal
            job.save(update_fields=["exit_code", "exit_signal"])
    return job
