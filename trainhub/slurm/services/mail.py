"""Job mail (sbatch --mail-type): an outbox row in the transaction of each transition, sent after commit.

Why an outbox rather than only ``on_commit(task.delay)``: the row is committed with the transition, so a
mail is never lost when the broker or the worker is down at that moment; ``job_mail_flush`` (beat, every
minute) sends whatever is still QUEUED, and the unique (job, run, kind) makes each mail once.

The transitions (mail types and subjects: trainhub.slurm.mail): ``mail_job_started`` (BEGIN),
``mail_job_ended`` (END / FAIL, and an array's summary), ``mail_job_requeued`` (REQUEUE; a preempted
job's when it is requeued, once its GraceTime is over),
``mail_invalid_dependency`` (INVALID_DEPEND) and ``mail_time_limits`` (TIME_LIMIT_50/80/90 and
TIME_LIMIT, at every scheduler pass). STAGE_OUT is never sent: slurmctld mails it only after a burst
buffer's stage-out, and trainhub has no burst buffer plugin (22.05 sent none for a plain job asking
--mail-type=STAGE_OUT, fixtures/22.05/release).
Without a mail server (settings.TRAINHUB_MAIL_ENABLED false) a mail is kept UNSENT, the job's timeline
says so and the worker logs one warning.
"""

from __future__ import annotations

import datetime as dt
import logging

from django.conf import settings
from django.core.mail import send_mail
from django.db import IntegrityError, transaction

from trainhub.common.enqueue import enqueue_after_commit
from trainhub.slurm import mail
from trainhub.slurm.models import JobEvent, JobMail, JobState, SlurmJob

logger = logging.getLogger(__name__)
_warned_unconfigured = False
NO_SERVER = "no mail server configured (EMAIL_HOST)"
NO_ADDRESS = "no address: no --mail-user and the submitting user has no e-mail"


def _event(job: SlurmJob, now: dt.datetime, message: str) -> None:
    JobEvent.objects.create(job=job, time=now, message=message)


def _recipient(job: SlurmJob) -> str:
    """--mail-user, else the submitting user's e-mail (Slurm's default is the submitting user)."""
    if job.mail_user:
        return job.mail_user
    return job.submitted_by.email if job.submitted_by_id else ""


def _seconds(start: dt.datetime | None, end: dt.datetime | None) -> int:
    return max(0, int((end - start).total_seconds())) if start and end else 0


def _summarised(job: SlurmJob, types: frozenset[str]) -> bool:
    """An array task whose array mails as a whole (no ARRAY_TASKS)."""
    return job.array_job_id is not None and "ARRAY_TASKS" not in types


def _mail_job(job: SlurmJob) -> mail.MailJob:
    task = job.array_task_id if job.array_job_id is not None else None
    return mail.MailJob(job.job_id, job.name, job.array_job_id if task is not None else None, task)


def _queue(job: SlurmJob, kind: str, subject: str, now: dt.datetime, run_index: int | None = None) -> None:
    """Write the outbox row (once per job, run and kind) and send it after commit."""
    recipient = _recipient(job)
    try:
        with transaction.atomic():
            row = JobMail.objects.create(
                job=job, run_index=job.restart_count if run_index is None else run_index, kind=kind,
                recipient=recipient, subject=subject, created=now,
                status=JobMail.Status.QUEUED if recipient else JobMail.Status.UNSENT,
                error="" if recipient else NO_ADDRESS)
    except IntegrityError:
        return  # already queued (a TIME_LIMIT mail at an earlier pass, the array's summary BEGIN)
    if not recipient:
        _event(job, now, f"Mail not sent ({NO_ADDRESS}): {subject}")
    else:
        enqueue_after_commit("trainhub.slurm.tasks.job_mail_send", row.pk)


def mail_job_started(*, job: SlurmJob, now: dt.datetime) -> None:
    """BEGIN: the job (or, for an array mailing as a whole, its first task) started."""
    types = mail.wanted(job.mail_type)
    if "BEGIN" not in types:
        return
    if _summarised(job, types):
        array = SlurmJob.objects.get(cluster_id=job.cluster_id, job_id=job.array_job_id)
        _queue(array, "BEGIN", mail.summary_subject("BEGIN", array_job_id=array.job_id, name=array.name), now,
               run_index=0)
        return
    _queue(job, "BEGIN", mail.subject("BEGIN", _mail_job(job), queued_seconds=_seconds(job.submit_time, now)), now)


def mail_job_ended(*, job: SlurmJob, now: dt.datetime) -> None:
    """END or FAIL (one at most) for a job that ended in ``job.state``; an array mailing as a whole
    mails once, when its last task has ended."""
    types = mail.wanted(job.mail_type)
    if not types & {"END", "FAIL"}:
        return
    if _summarised(job, types):
        _mail_array_ended(job, types, now)
        return
    kind = mail.end_type(types, job.state)
    if kind:
        _queue(job, kind, mail.subject(kind, _mail_job(job), run_seconds=_seconds(job.start_time, now),
                                       state=job.state, exit_code=job.exit_code or 0), now)


def _mail_array_ended(job: SlurmJob, types: frozenset[str], now: dt.datetime) -> None:
    members = SlurmJob.objects.filter(cluster_id=job.cluster_id, array_job_id=job.array_job_id)
    array = members.filter(job_id=job.array_job_id).first()
    if array is None or array.array_pending or members.filter(state__in=[JobState.PENDING, JobState.RUNNING]).exists():
        return
    ends = [(state, code or 0) for state, code in members.values_list("state", "exit_code")]
    ended = all(state in (JobState.COMPLETED, JobState.CANCELLED) for state, _ in ends)
    kind = mail.end_type(types, JobState.COMPLETED if ended else JobState.FAILED)
    if kind:
        _queue(array, kind, mail.summary_subject(kind, array_job_id=array.job_id, name=array.name, ends=ends), now,
               run_index=0)


def mail_job_requeued(*, job: SlurmJob, now: dt.datetime) -> None:
    """REQUEUE, before the job's run fields are reset. A preempted job is requeued, and mailed, once
    its GraceTime is over (services.lifecycle.job_preempt), as 22.05 does (fixtures/22.05/mail: mails.txt
    and trap-REQUEUE-*.txt, the Requeued mail at the victims' kill, not when they were chosen)."""
    if "REQUEUE" in mail.wanted(job.mail_type):
        _queue(job, "REQUEUE", mail.subject("REQUEUE", _mail_job(job), run_seconds=_seconds(job.start_time, now)),
               now)


def mail_invalid_dependency(*, job: SlurmJob, now: dt.datetime) -> None:
    """INVALID_DEPEND: the job's dependency can never be satisfied now (DependencyNeverSatisfied),
    whether at submission or when a job it waits on fails; 22.05 mails it also without
    kill_invalid_depend (fixtures/22.05/release, mails.txt)."""
    if "INVALID_DEPEND" in mail.wanted(job.mail_type):
        _queue(job, "INVALID_DEPEND", mail.subject("INVALID_DEPEND", _mail_job(job)), now)


def mail_time_limits(*, cluster_pk: int, now: dt.datetime) -> int:
    """TIME_LIMIT_50/80/90 and TIME_LIMIT for running jobs that asked, once each per run."""
    count = 0
    jobs = list(SlurmJob.objects.filter(cluster_id=cluster_pk, state=JobState.RUNNING, time_limit__isnull=False,
                                         start_time__isnull=False, mail_type__contains="TIME_LIMIT")
                .select_related("submitted_by"))
    # One read of what was sent, not one per job: this runs at every scheduler pass.
    sent = set(JobMail.objects.filter(job__in=jobs).values_list("job_id", "run_index", "kind")) if jobs else set()
    for job in jobs:
        run = _seconds(job.start_time, now)
        for kind in mail.time_limit_types(mail.wanted(job.mail_type), run, job.time_limit * 60):
            if (job.pk, job.restart_count, kind) not in sent:
                _queue(job, kind, mail.subject(kind, _mail_job(job), run_seconds=run), now)
                count += 1
    return count


def job_mail_send(*, mail_pk: int, now: dt.datetime) -> None:
    """Send one queued mail with Django's mail framework (empty body, as slurmctld's MailProg call)."""
    global _warned_unconfigured
    with transaction.atomic():
        row = JobMail.objects.select_for_update().select_related("job").filter(
            pk=mail_pk, status=JobMail.Status.QUEUED).first()
        if row is None:
            return
        if not settings.TRAINHUB_MAIL_ENABLED:
            if not _warned_unconfigured:
                logger.warning("job mail is not sent: %s; set EMAIL_HOST (or EMAIL_BACKEND)", NO_SERVER)
                _warned_unconfigured = True
            row.status, row.error = JobMail.Status.UNSENT, NO_SERVER
            row.save(update_fields=["status", "error"])
            _event(row.job, now, f"Mail to {row.recipient} not sent ({NO_SERVER}): {row.subject}")
            return
        try:
            send_mail(row.subject, "", settings.DEFAULT_FROM_EMAIL, [row.recipient])
        except Exception as exc:  # noqa: BLE001 - an SMTP failure is recorded on the mail and the job
            row.status, row.error = JobMail.Status.FAILED, f"{type(exc).__name__}: {exc}"[:255]
            row.save(update_fields=["status", "error"])
            _event(row.job, now, f"Mail to {row.recipient} failed ({row.error}): {row.subject}")
            return
        row.status, row.sent_at = JobMail.Status.SENT, now
        row.save(update_fields=["status", "sent_at"])
        _event(row.job, now, f"Mail sent to {row.recipient}: {row.subject}")


def job_mail_flush(*, now: dt.datetime) -> int:
    """Send every mail still QUEUED (the worker or broker was down when it was queued) whose moment
    has come."""
    pks = list(JobMail.objects.filter(status=JobMail.Status.QUEUED, created__lte=now)
               .values_list("pk", flat=True)[:500])
    for pk in pks:
        job_mail_send(mail_pk=pk, now=now)
    return len(pks)
