"""sbatch --mail-type/--mail-user: the mails real Slurm 22.05 sends (fixtures/22.05/mail, mail.sh), queued
with each transition and sent after commit with Django's mail framework."""

from __future__ import annotations

import email
import email.policy
import logging
import socket
import threading
from pathlib import Path

import pytest
from django.core import mail as django_mail

from tests.slurm.conftest import run_pass
from tests.slurm.test_pass import at, reload, submit, tiered  # noqa: F401 - tiered is a fixture
from trainhub.slurm import mail
from trainhub.slurm.models import JobMail, JobNode, JobState, SlurmJob
from trainhub.slurm.services.jobs import job_cancel
from trainhub.slurm.services.mail import job_mail_flush

FIXTURES = Path(__file__).parent / "fixtures" / "22.05" / "mail"
#: "SUBJECT -> RECIPIENT" of every mail slurmctld sent in mail.sh.
RECORDED = (FIXTURES / "subjects.txt").read_text().splitlines()
LOCMEM = {"EMAIL_BACKEND": "django.core.mail.backends.locmem.EmailBackend", "TRAINHUB_MAIL_ENABLED": True}


def recorded(subject: str, to: str = "carol") -> str:
    """``subject`` as built here, checked against what real Slurm sent."""
    assert f"{subject} -> {to}" in RECORDED, subject
    return subject


def test_scontrol_names_the_mail_types_in_slurms_order():
    """release/scontrol-dep-all (ALL), scontrol-kill-all (ALL,INVALID_DEPEND), mail/ (END,FAIL)."""
    assert mail.shown_types("ALL") == mail.shown_types("all,invalid_depend") == (
        "INVALID_DEPEND,BEGIN,END,FAIL,REQUEUE,STAGE_OUT")
    assert mail.shown_types("FAIL,END") == "END,FAIL"
    assert mail.shown_types("TIME_LIMIT,TIME_LIMIT_50,ARRAY_TASKS") == "ARRAY_TASKS,TIME_LIMIT_50,TIME_LIMIT"
    assert mail.shown_types("NONE") == ""


def test_the_subjects_are_slurms_for_every_mail_type():
    assert mail.subject("BEGIN", mail.MailJob(1, "mbegin"), queued_seconds=1) == recorded(
        "Slurm Job_id=1 Name=mbegin Began, Queued time 00:00:01")
    assert mail.subject("END", mail.MailJob(2, "mend"), state="COMPLETED") == recorded(
        "Slurm Job_id=2 Name=mend Ended, Run time 00:00:00, COMPLETED, ExitCode 0")
    assert mail.subject("FAIL", mail.MailJob(3, "mfail"), state="FAILED", exit_code=3) == recorded(
        "Slurm Job_id=3 Name=mfail Failed, Run time 00:00:00, FAILED, ExitCode 3")
    assert mail.subject("FAIL", mail.MailJob(40, "vB"), run_seconds=62, state="PREEMPTED") == recorded(
        "Slurm Job_id=40 Name=vB Failed, Run time 00:01:02, PREEMPTED, ExitCode 0")  # PreemptMode=CANCEL
    assert mail.subject("END", mail.MailJob(10, "mcancel"), run_seconds=8, state="CANCELLED") == recorded(
        "Slurm Job_id=10 Name=mcancel Ended, Run time 00:00:08, CANCELLED, ExitCode 0")
    assert mail.subject("END", mail.MailJob(11, "mcancelpend"), state="CANCELLED") == recorded(
        "Slurm Job_id=11 Name=mcancelpend Ended, Run time 00:00:00, CANCELLED, ExitCode 0")
    assert mail.subject("REQUEUE", mail.MailJob(15, "mreq"), run_seconds=8) == recorded(
        "Slurm Job_id=15 Name=mreq Requeued, Run time 00:00:08")
    timed = mail.MailJob(9, "mtime")
    assert mail.subject("TIME_LIMIT_50", timed, run_seconds=54) == recorded(
        "Slurm Job_id=9 Name=mtime Reached 50% of time limit, Run time 00:00:54")
    assert mail.subject("TIME_LIMIT_90", timed, run_seconds=54) == recorded(
        "Slurm Job_id=9 Name=mtime Reached 90% of time limit, Run time 00:00:54")
    assert mail.subject("TIME_LIMIT", timed, run_seconds=84) == recorded(
        "Slurm Job_id=9 Name=mtime Reached time limit, Run time 00:01:24")
    assert mail.subject("FAIL", timed, run_seconds=84, state="TIMEOUT") == recorded(
        "Slurm Job_id=9 Name=mtime Failed, Run time 00:01:24, TIMEOUT, ExitCode 0")
    assert f"{mail.subject('END', mail.MailJob(4, 'mall'), run_seconds=1, state='COMPLETED')} -> carol@example.org" \
        in RECORDED  # --mail-user


def test_array_subjects_name_the_task_or_summarise_the_array():
    task = mail.MailJob(24, "marraytasks", array_job_id=13, array_task_id=1)
    assert mail.subject("BEGIN", task, queued_seconds=1) == recorded(
        "Slurm Array Task Job_id=13_1 (24) Name=marraytasks Began, Queued time 00:00:01")
    assert mail.summary_subject("BEGIN", array_job_id=12, name="marray") == recorded(
        "Slurm Array Summary Job_id=12_* (12) Name=marray Began")
    ends = {"marray": [("COMPLETED", 0), ("FAILED", 1), ("COMPLETED", 0)], "aokz": [("COMPLETED", 0)] * 3,
            "afsame": [("FAILED", 5)] * 3, "afdiff": [("FAILED", 1), ("FAILED", 2), ("FAILED", 3)],
            "amixok": [("FAILED", 1), ("COMPLETED", 0), ("COMPLETED", 0)]}
    assert mail.summary_subject("FAIL", array_job_id=12, name="marray", ends=ends["marray"]) == recorded(
        "Slurm Array Summary Job_id=12_* (12) Name=marray Failed, Mixed, ExitCode [0-1]")
    for job_id, name, tail in ((16, "aokz", "COMPLETED, ExitCode [0-0]"), (17, "afsame", "FAILED, ExitCode [5-5]"),
                               (18, "afdiff", "FAILED, ExitCode [1-3]"), (19, "amixok", "Mixed, ExitCode [0-1]")):
        assert mail.summary_subject("END", array_job_id=job_id, name=name, ends=ends[name]) == recorded(
            f"Slurm Array Summary Job_id={job_id}_* ({job_id}) Name={name} Ended, {tail}")


def test_all_means_slurms_six_types_and_one_end_mail_at_most():
    assert mail.wanted("ALL") == {"BEGIN", "END", "FAIL", "REQUEUE", "INVALID_DEPEND", "STAGE_OUT"}
    assert mail.wanted("NONE") == mail.wanted("") == frozenset()
    assert mail.end_type(mail.wanted("END,FAIL"), "FAILED") == "FAIL"  # mendfail: only the Failed mail
    assert mail.end_type(mail.wanted("END"), "TIMEOUT") == "END"
    assert mail.end_type(mail.wanted("ALL"), "PREEMPTED") == "FAIL"  # PreemptMode=CANCEL: vB's Failed mail
    assert mail.end_type(mail.wanted("FAIL"), "COMPLETED") is None
    assert mail.end_type(mail.wanted("BEGIN"), "FAILED") is None
    assert mail.time_limit_types(mail.wanted("TIME_LIMIT,TIME_LIMIT_50,TIME_LIMIT_80"), 47, 60) == ["TIME_LIMIT_50"]
    assert mail.time_limit_types(mail.wanted("TIME_LIMIT_50,TIME_LIMIT_90,TIME_LIMIT"), 77, 60) == [
        "TIME_LIMIT_50", "TIME_LIMIT_90", "TIME_LIMIT"]


@pytest.fixture
def uma(cast):
    cast["uma"].email = "uma@example.org"
    cast["uma"].save(update_fields=["email"])
    return cast["uma"]


def test_begin_and_end_mails_reach_the_submitter_after_commit(accounts, uma, now, settings,
                                                              django_capture_on_commit_callbacks):
    settings.EMAIL_BACKEND, settings.TRAINHUB_MAIL_ENABLED = LOCMEM["EMAIL_BACKEND"], True
    job = submit(accounts, uma, "-J", "train", "--mail-type=BEGIN,END", "--wrap", "sleep 600", now=now)
    with django_capture_on_commit_callbacks(execute=True):
        run_pass(accounts, at(now, seconds=2))
    assert [(m.subject, m.to) for m in django_mail.outbox] == [
        (f"Slurm Job_id={job.job_id} Name=train Began, Queued time 00:00:02", ["uma@example.org"])]
    with django_capture_on_commit_callbacks(execute=True):
        job_cancel(job=reload(job), actor=uma, is_admin=False, now=at(now, seconds=7))
    assert django_mail.outbox[1].subject == (
        f"Slurm Job_id={job.job_id} Name=train Ended, Run time 00:00:05, CANCELLED, ExitCode 0")
    assert django_mail.outbox[1].body == "" and django_mail.outbox[1].from_email == settings.DEFAULT_FROM_EMAIL
    assert set(JobMail.objects.values_list("status", flat=True)) == {JobMail.Status.SENT}
    assert any(e.message.startswith("Mail sent to uma@example.org: Slurm") for e in reload(job).events.all())


def test_mail_user_overrides_and_types_not_asked_send_nothing(accounts, uma, now, settings):
    settings.EMAIL_BACKEND, settings.TRAINHUB_MAIL_ENABLED = LOCMEM["EMAIL_BACKEND"], True
    quiet = submit(accounts, uma, "--mail-type=FAIL", "--wrap", "a", now=now)
    none = submit(accounts, uma, "--mail-type=NONE", "--wrap", "b", now=now)
    unset = submit(accounts, uma, "--wrap", "c", now=now)
    other = submit(accounts, uma, "-J", "x", "--mail-type=END", "--mail-user=ops@example.org", "--wrap", "d",
                   now=now)
    for job in (quiet, none, unset, other):
        job_cancel(job=job, actor=uma, is_admin=False, now=at(now, seconds=1))
    job_mail_flush(now=at(now, seconds=2))
    assert [(m.subject, m.to) for m in django_mail.outbox] == [
        (f"Slurm Job_id={other.job_id} Name=x Ended, Run time 00:00:00, CANCELLED, ExitCode 0",
         ["ops@example.org"])]


def test_time_limit_mails_come_once_each_then_the_timeout_failure(accounts, uma, now, settings):
    settings.EMAIL_BACKEND, settings.TRAINHUB_MAIL_ENABLED = LOCMEM["EMAIL_BACKEND"], True
    job = submit(accounts, uma, "-J", "mtime", "-t", "1",
                 "--mail-type=TIME_LIMIT,TIME_LIMIT_50,TIME_LIMIT_80,TIME_LIMIT_90,END,FAIL", "--wrap", "sleep 600",
                 now=now)
    run_pass(accounts, now)
    run_pass(accounts, at(now, seconds=47))
    run_pass(accounts, at(now, seconds=77))  # OverTimeLimit=0: stopped at the limit's first pass
    job_mail_flush(now=at(now, seconds=78))
    assert reload(job).state == JobState.TIMEOUT
    head = f"Slurm Job_id={job.job_id} Name=mtime"
    assert sorted(m.subject for m in django_mail.outbox) == sorted([
        f"{head} Reached 50% of time limit, Run time 00:00:47",
        f"{head} Reached 80% of time limit, Run time 00:01:17",
        f"{head} Reached 90% of time limit, Run time 00:01:17",
        f"{head} Reached time limit, Run time 00:01:17",
        f"{head} Failed, Run time 00:01:17, TIMEOUT, ExitCode 0",
    ])


def test_a_preempted_job_mails_requeued_with_its_run_time(tiered, cast, now, settings):  # noqa: F811
    settings.EMAIL_BACKEND, settings.TRAINHUB_MAIL_ENABLED = LOCMEM["EMAIL_BACKEND"], True
    cast["uma"].email = "uma@example.org"
    cast["uma"].save(update_fields=["email"])
    low = submit(tiered, cast["uma"], "-J", "vB", "-p", "low", "-N", "2", "--gres=gpu:8", "--mail-type=ALL",
                 "--wrap", "train", now=now)
    run_pass(tiered, now)
    submit(tiered, cast["alice"], "-p", "high", "--gres=gpu:8", "--wrap", "urgent", now=at(now, minutes=11))
    run_pass(tiered, at(now, minutes=11))
    job_mail_flush(now=at(now, minutes=11))
    assert reload(low).state == JobState.PENDING
    assert [m.subject for m in django_mail.outbox] == [
        f"Slurm Job_id={low.job_id} Name=vB Began, Queued time 00:00:00",
        f"Slurm Job_id={low.job_id} Name=vB Requeued, Run time 00:11:00"]


def test_without_a_mail_server_nothing_is_sent_and_the_job_says_so(accounts, uma, now, settings, caplog):
    settings.EMAIL_BACKEND, settings.TRAINHUB_MAIL_ENABLED = LOCMEM["EMAIL_BACKEND"], False
    job = submit(accounts, uma, "--mail-type=END", "--wrap", "a", now=now)
    job_cancel(job=job, actor=uma, is_admin=False, now=at(now, seconds=1))
    with caplog.at_level(logging.WARNING, logger="trainhub.slurm.services.mail"):
        job_mail_flush(now=at(now, seconds=2))
    assert django_mail.outbox == []
    assert JobMail.objects.get(job=job).status == JobMail.Status.UNSENT
    assert any("not sent (no mail server configured (EMAIL_HOST))" in e.message for e in reload(job).events.all())


def _smtp_server(received: list[bytes]) -> int:
    """A one-connection SMTP server on 127.0.0.1 that records the DATA it gets; returns its port."""
    listener = socket.create_server(("127.0.0.1", 0))

    def serve():
        conn, _ = listener.accept()
        with conn, conn.makefile("rb") as lines:
            conn.sendall(b"220 test ESMTP\r\n")
            for line in lines:
                verb = line[:4].upper()
                if verb == b"DATA":
                    conn.sendall(b"354 go\r\n")
                    data = b"".join(iter(lambda: lines.readline(), b".\r\n"))
                    received.append(data)
                    conn.sendall(b"250 queued\r\n")
                elif verb == b"QUIT":
                    conn.sendall(b"221 bye\r\n")
                    return
                else:
                    conn.sendall(b"250 ok\r\n")
        listener.close()

    threading.Thread(target=serve, daemon=True).start()
    return listener.getsockname()[1]


def test_a_mail_goes_out_over_smtp(accounts, uma, now, settings):
    received: list[bytes] = []
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT, settings.TRAINHUB_MAIL_ENABLED = "127.0.0.1", _smtp_server(received), True
    job = submit(accounts, uma, "-J", "smtp", "--mail-type=END", "--wrap", "a", now=now)
    job_cancel(job=job, actor=uma, is_admin=False, now=at(now, seconds=1))
    job_mail_flush(now=at(now, seconds=2))
    assert JobMail.objects.get(job=job).status == JobMail.Status.SENT
    message = email.message_from_bytes(received[0], policy=email.policy.default)
    assert message["Subject"] == f"Slurm Job_id={job.job_id} Name=smtp Ended, Run time 00:00:00, CANCELLED, ExitCode 0"
    assert message["To"] == "uma@example.org"


def test_an_unreachable_mail_server_is_recorded_on_the_mail(accounts, uma, now, settings):
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    closed = socket.create_server(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()
    settings.EMAIL_HOST, settings.EMAIL_PORT, settings.TRAINHUB_MAIL_ENABLED = "127.0.0.1", port, True
    job = submit(accounts, uma, "--mail-type=END", "--wrap", "a", now=now)
    job_cancel(job=job, actor=uma, is_admin=False, now=at(now, seconds=1))
    job_mail_flush(now=at(now, seconds=2))
    row = JobMail.objects.get(job=job)
    assert row.status == JobMail.Status.FAILED and "ConnectionRefusedError" in row.error


def test_an_array_mails_one_summary_at_its_first_start_and_after_its_last_task(accounts, uma, now, settings):
    settings.EMAIL_BACKEND, settings.TRAINHUB_MAIL_ENABLED = LOCMEM["EMAIL_BACKEND"], True
    array = submit(accounts, uma, "-J", "sweep", "--array=1-3", "--mail-type=ALL", "--wrap", "train", now=now)
    run_pass(accounts, at(now, seconds=1))
    tasks = list(array.cluster.jobs.filter(array_job_id=array.job_id).order_by("array_task_id"))
    assert [task.state for task in tasks] == [JobState.RUNNING] * 3
    job_cancel(job=tasks[0], actor=uma, is_admin=False, now=at(now, seconds=2))
    job_mail_flush(now=at(now, seconds=2))
    assert [m.subject for m in django_mail.outbox] == [f"Slurm Array Summary Job_id={array.job_id}_* ({array.job_id}) "
                                                        "Name=sweep Began"]
    job_cancel(job=reload(array), actor=uma, is_admin=False, now=at(now, seconds=3))
    job_mail_flush(now=at(now, seconds=3))
    assert [m.subject for m in django_mail.outbox][1:] == [
        f"Slurm Array Summary Job_id={array.job_id}_* ({array.job_id}) Name=sweep Ended, CANCELLED, ExitCode [0-0]"]


def test_array_tasks_mail_each_task(accounts, uma, now, settings):
    settings.EMAIL_BACKEND, settings.TRAINHUB_MAIL_ENABLED = LOCMEM["EMAIL_BACKEND"], True
    array = submit(accounts, uma, "-J", "sweep", "--array=1-2", "--mail-type=BEGIN,ARRAY_TASKS", "--wrap", "t",
                   now=now)
    run_pass(accounts, now)
    job_mail_flush(now=now)
    tasks = {task.array_task_id: task.job_id for task in array.cluster.jobs.filter(array_job_id=array.job_id)}
    assert sorted(m.subject for m in django_mail.outbox) == sorted(
        f"Slurm Array Task Job_id={array.job_id}_{task} ({job_id}) Name=sweep Began, Queued time 00:00:00"
        for task, job_id in tasks.items())


def test_a_mail_queued_while_the_broker_is_down_is_sent_by_the_next_flush(accounts, uma, now, settings, monkeypatch,
                                                                          django_capture_on_commit_callbacks):
    settings.EMAIL_BACKEND, settings.TRAINHUB_MAIL_ENABLED = LOCMEM["EMAIL_BACKEND"], True

    def broker_down(*args):
        raise ConnectionError("broker down")

    monkeypatch.setattr("trainhub.common.enqueue.enqueue", broker_down)
    job = submit(accounts, uma, "-J", "late", "--mail-type=END", "--wrap", "a", now=now)
    with django_capture_on_commit_callbacks(execute=True):
        job_cancel(job=job, actor=uma, is_admin=False, now=at(now, seconds=1))
    assert django_mail.outbox == [] and JobMail.objects.get(job=job).status == JobMail.Status.QUEUED
    assert job_mail_flush(now=at(now, seconds=60)) == 1
    assert [m.subject for m in django_mail.outbox] == [
        f"Slurm Job_id={job.job_id} Name=late Ended, Run time 00:00:00, CANCELLED, ExitCode 0"]
    assert job_mail_flush(now=at(now, seconds=120)) == 0  # sent once


RELEASE = Path(__file__).parent / "fixtures" / "22.05" / "release"


def recorded_release(subject: str) -> str:
    """``subject`` as built here, checked against a mail real Slurm sent in release.sh."""
    mails = (RELEASE / "mails.txt").read_text()
    assert f"[{subject}] [carol]" in mails, subject
    return subject


def test_a_preempted_jobs_requeued_mail_waits_for_the_end_of_its_grace_time(tiered, cast, now, settings,  # noqa: F811
                                                                           django_capture_on_commit_callbacks):
    """22.05 mails Requeued when GraceTime is over and the victim is requeued, not when it is chosen
    (fixtures/22.05/mail: urgent job at 1796427143, the victims' SIGTERM then, their kill and the
    Requeued mails 39 s later with GraceTime=30, when slurmctld found it over): here at the first pass
    after it where slurmctld's periodic check is due (30 s after the last backfill iteration)."""
    from trainhub.slurm.services.lifecycle import job_node_prolog_finished, job_preempt

    settings.EMAIL_BACKEND, settings.TRAINHUB_MAIL_ENABLED = LOCMEM["EMAIL_BACKEND"], True
    cast["uma"].email = "uma@example.org"
    cast["uma"].save(update_fields=["email"])
    victim = submit(tiered, cast["uma"], "-J", "vB", "-p", "low", "--gres=gpu:8", "--mail-type=REQUEUE",
                    "--wrap", "train", now=now)
    run_pass(tiered, now)
    job_node_prolog_finished(job_node=JobNode.objects.get(job=victim), exit_code=0, now=now)  # its script runs
    chosen, kill_at = at(now, minutes=11), at(now, minutes=11, seconds=30)
    with django_capture_on_commit_callbacks(execute=True):
        job_preempt(job=reload(victim), requeue=True, now=chosen, desc="preempted by job 9", kill_at=kill_at)
    with django_capture_on_commit_callbacks(execute=True):
        run_pass(tiered, at(chosen, seconds=10))
    assert job_mail_flush(now=at(chosen, seconds=20)) == 0 and django_mail.outbox == []
    with django_capture_on_commit_callbacks(execute=True):
        run_pass(tiered, at(kill_at, seconds=2))  # 22 s after the last backfill iteration: no check
    assert job_mail_flush(now=at(kill_at, seconds=5)) == 0 and django_mail.outbox == []
    with django_capture_on_commit_callbacks(execute=True):
        run_pass(tiered, at(kill_at, seconds=10))
    assert [m.subject for m in django_mail.outbox] == [
        f"Slurm Job_id={victim.job_id} Name=vB Requeued, Run time 00:11:40"]
    assert JobMail.objects.get(job=victim).created == at(kill_at, seconds=10)


def test_the_invalid_dependency_subject_is_slurms():
    assert mail.subject("INVALID_DEPEND", mail.MailJob(5, "dinvalid")) == recorded_release(
        "Slurm Job_id=5 Name=dinvalid Invalid dependency")


def test_a_dependency_that_can_never_be_satisfied_mails_invalid_dependency_once(accounts, uma, now, settings):
    """At submission on a job that already failed, or when the job waited on fails; ALL includes it,
    END does not (release.sh: jobs 5, 6, 8 mailed, 12 not)."""
    settings.EMAIL_BACKEND, settings.TRAINHUB_MAIL_ENABLED = LOCMEM["EMAIL_BACKEND"], True
    failed = submit(accounts, uma, "-J", "dfail", "--wrap", "exit 1", now=now)
    running = submit(accounts, uma, "-J", "dlater", "--wrap", "exit 1", now=now)
    SlurmJob.objects.filter(pk=failed.pk).update(state=JobState.FAILED, end_time=now)
    asked = submit(accounts, uma, "-J", "dinvalid", "--mail-type=INVALID_DEPEND",
                   f"--dependency=afterok:{failed.job_id}", "--wrap", "true", now=now)
    everything = submit(accounts, uma, "-J", "dall", "--mail-type=ALL", f"--dependency=afterok:{failed.job_id}",
                        "--wrap", "true", now=now)
    submit(accounts, uma, "-J", "kend", "--mail-type=END", f"--dependency=afterok:{failed.job_id}", "--wrap", "true",
           now=now)
    waiting = submit(accounts, uma, "-J", "donlater", "--mail-type=ALL", f"--dependency=afterok:{running.job_id}",
                     "--wrap", "true", now=now)
    run_pass(accounts, at(now, seconds=1))
    run_pass(accounts, at(now, seconds=2))
    job_mail_flush(now=at(now, seconds=3))
    assert sorted(m.subject for m in django_mail.outbox) == [
        f"Slurm Job_id={asked.job_id} Name=dinvalid Invalid dependency",
        f"Slurm Job_id={everything.job_id} Name=dall Invalid dependency"]
    SlurmJob.objects.filter(pk=running.pk).update(state=JobState.FAILED, end_time=at(now, seconds=4))
    run_pass(accounts, at(now, seconds=5))
    run_pass(accounts, at(now, seconds=6))
    job_mail_flush(now=at(now, seconds=7))
    assert django_mail.outbox[2:] and [m.subject for m in django_mail.outbox[2:]] == [
        f"Slurm Job_id={waiting.job_id} Name=donlater Invalid dependency"]
    assert reload(waiting).reason == "DependencyNeverSatisfied"
