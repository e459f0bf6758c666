"""trainhub replays mail.sh's preemption rounds (fixtures/22.05/mail: carol's four victims vB, vS, vN, vT
on gpu1-4 in partition batch, GraceTime=30, then an urgent -N 4 job) and ``squeue`` and ``scontrol show
job`` of the victims 3 s after the urgent job's submission print what Slurm printed: still RUNNING in
their GraceTime, PreemptTime the moment they were chosen, the urgent job PENDING (Resources).

The three rounds are compared: PreemptMode=CANCEL (CANCEL-*), REQUEUE (REQUEUE-*) and USERSIG (USERSIG-*:
REQUEUE with SchedulerParameters=preempt_send_user_signal, which changed nothing 22.05 showed:
trap-USERSIG-*.txt signalled as trap-REQUEUE-*.txt). What follows the GraceTime is in test_real_slurm_preempt_requeue.
"""
from __future__ import annotations

import datetime as dt
import shlex
from dataclasses import dataclass
from pathlib import Path

import pytest

from django.contrib.auth import get_user_model

from trainhub.slurm import reports
from trainhub.slurm.models import JobNode, JobState, NodePhase, Partition, SlurmCluster, SlurmJob
from trainhub.slurm.services.clusters import partition_update
from trainhub.slurm.services.jobs import Submission, job_cancel, job_submit
from trainhub.slurm.services.lifecycle import (
    job_batch_finished,
    job_node_epilog_finished,
    job_node_prolog_finished,
)

from .conftest import run_pass
from .test_real_slurm import finish, harness_cluster, scontrol_differences

REAL = Path(__file__).parent / "fixtures" / "22.05" / "mail"
SECOND = dt.timedelta(seconds=1)
#: Where mail.sh kept its victim script and recording (the victims' Command).
VICTIM = "/tmp/slurmh-mailsig/mail-victim.sh"
RECORDING = "/tmp/slurmh-mailsig/rec/mail"
VICTIMS = ("vB", "vS", "vN", "vT")


def _victim_lines() -> dict[str, list[str]]:
    """mail.sh's ``rec "$mode-vX" $S ...`` lines: victim name -> its sbatch options."""
    found = {}
    for line in (REAL.parent / "mail.sh").read_text().splitlines():
        if line.strip().startswith('rec "$mode-v'):
            words = shlex.split(line.strip())
            found[words[1].removeprefix("$mode-")] = words[3:words.index("$HERE/mail-victim.sh")]
    return found


@dataclass(frozen=True)
class Round:
    """One of mail.sh's rounds: its partition PreemptMode, first victim's job id, when the victims were
    submitted (vT, submitted last, in the next second in USERSIG) and started, when the urgent job was
    (the victims' PreemptTime; preempted-at-*.txt, taken just before sbatch, may be a second earlier)."""

    mode: str
    preempt_mode: str
    first_job_id: int
    submitted: dt.datetime
    started: dt.datetime
    urgent: dt.datetime
    last_submitted: dt.datetime | None = None

    @property
    def shown_at(self) -> dt.datetime:
        """When mail.sh ran squeue and scontrol (``RunTime=00:00:18``)."""
        return self.started + 18 * SECOND


def _moment(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text).replace(tzinfo=dt.UTC)


ROUNDS = {round_.mode: round_ for round_ in (
    Round("REQUEUE", "REQUEUE", 35, _moment("2026-12-04T23:32:08"), _moment("2026-12-04T23:32:08"),
          _moment("2026-12-04T23:32:23")),
    Round("CANCEL", "CANCEL", 40, _moment("2026-12-04T23:33:31"), _moment("2026-12-04T23:33:31"),
          _moment("2026-12-04T23:33:47")),
    Round("USERSIG", "REQUEUE", 45, _moment("2026-12-04T23:35:04"), _moment("2026-12-04T23:35:05"),
          _moment("2026-12-04T23:35:20"), last_submitted=_moment("2026-12-04T23:35:05")),
)}


def replay_round(cast, now, round_: Round):
    """One round up to the urgent job's first pass; returns the cluster."""
    cluster, _ = harness_cluster(cast, now, PreemptExemptTime="00:00:00", **(
        {"SchedulerParameters": "preempt_send_user_signal"} if round_.mode == "USERSIG" else {}))
    carol = get_user_model().objects.get(username="carol")
    partition_update(partition=Partition.objects.get(cluster=cluster, name="batch"), actor="root",
                     config={"PriorityTier": "1", "GraceTime": "30", "PreemptMode": round_.preempt_mode}, now=now)
    submitted = round_.submitted
    # carol's earlier jobs in mail.sh charged her fair-share (Priority=1428): one of them here
    SlurmCluster.objects.filter(pk=cluster.pk).update(last_decay_time=submitted - 120 * SECOND,
                                                      last_priority_time=submitted - 120 * SECOND)
    earlier = job_submit(cluster=cluster, user=carol, now=submitted - 120 * SECOND, submission=Submission(
        argv=("-A", "bio", "-p", "batch", "--wrap", "true")))
    run_pass(cluster, submitted - 120 * SECOND)
    finish(cluster, [earlier.job_id], submitted - 60 * SECOND)
    run_pass(cluster, submitted - 5 * SECOND)
    SlurmCluster.objects.filter(pk=cluster.pk).update(next_job_id=round_.first_job_id)
    for name, options in _victim_lines().items():
        at = round_.last_submitted if name == VICTIMS[-1] and round_.last_submitted else submitted
        job_submit(cluster=cluster, user=carol, now=at, submission=Submission(
            argv=("-A", "bio", "-p", "batch", *options), script="#!/bin/bash\n", script_path=VICTIM,
            script_args=(f"{round_.mode}-{name}", RECORDING), alloc_node="localhost", submit_dir="/tmp"))
    run_pass(cluster, round_.started)
    for job_node in JobNode.objects.filter(job__cluster=cluster, phase=NodePhase.PROLOG):
        job_node_prolog_finished(job_node=job_node, exit_code=0, now=round_.started)  # the victims' scripts run
    job_submit(cluster=cluster, user=carol, now=round_.urgent, submission=Submission(
        argv=("-A", "bio", "-p", "urgent", "-J", "urgent", "-N", "4", "--gres=gpu:8", "--wrap", "sleep 2"),
        alloc_node="localhost", submit_dir="/tmp"))
    run_pass(cluster, round_.urgent)
    cluster.refresh_from_db()
    return cluster


def shown(cluster, round_: Round) -> dict[str, str]:
    """mail.sh's squeue and scontrol show job of each victim, as trainhub prints them."""
    outputs = {f"{round_.mode}-scontrol-{name}": reports.scontrol_jobs(cluster, now=round_.shown_at,
                                                                       job=str(round_.first_job_id + index)).text
               for index, name in enumerate(VICTIMS)}
    outputs[f"{round_.mode}-squeue"] = reports.squeue(cluster, now=round_.shown_at, format="%i|%j|%T|%r|%e").text
    return outputs


@pytest.mark.parametrize("mode", list(ROUNDS))
def test_victims_stay_running_through_their_grace_time_as_slurm_shows_them(cast, now, mode):
    round_ = ROUNDS[mode]
    outputs = shown(replay_round(cast, now, round_), round_)
    squeue = outputs.pop(f"{mode}-squeue")
    assert scontrol_differences(outputs, REAL) == {}
    assert squeue == (REAL / f"{mode}-squeue.txt").read_text()


def test_a_pass_in_the_grace_time_keeps_the_victims_running_and_their_preempt_time(cast, now):
    """The urgent job tried again while its victims run out their GraceTime: nothing new is signalled
    and it still waits (22.05 signals a victim once, preempt.c ``_preempt_signal``)."""
    round_ = ROUNDS["REQUEUE"]
    cluster = replay_round(cast, now, round_)
    for moment in (round_.urgent + 10 * SECOND, round_.urgent + 29 * SECOND):
        run_pass(cluster, moment)
    victims = range(35, 39)
    assert set(SlurmJob.objects.filter(cluster=cluster, job_id__in=victims).values_list("state", "preempt_time")) == {
        (JobState.RUNNING, round_.urgent)}
    assert SlurmJob.objects.get(cluster=cluster, job_id=39).state == JobState.PENDING
    assert JobNode.objects.filter(job__cluster=cluster, job__job_id__in=victims, stop_requested=True,
                                  kill_at=round_.urgent + 30 * SECOND).count() == 4


#: slurmctld's backfill iterations and periodic checks in mail.sh's REQUEUE round, every 30 s
#: (slurmctld-extract.txt: the victims requeued at 23:33:02.939, their GraceTime over at 23:32:53).
REQUEUE_CHECKS = (_moment("2026-12-04T23:32:02"), _moment("2026-12-04T23:32:32"), _moment("2026-12-04T23:33:02"))


def _on_slurms_clock(cluster) -> None:
    """The replayed cluster's last backfill iteration at slurmctld's, before the urgent job."""
    SlurmCluster.objects.filter(pk=cluster.pk).update(last_backfill_time=REQUEUE_CHECKS[0])


def test_a_requeue_victim_is_requeued_when_its_grace_time_ends(cast, now):
    """At slurmctld's first periodic check that finds its GraceTime over (slurmctld-extract.txt:
    "preempted JobId=35 has been requeued" 39 s after it was chosen, 9 s after its GraceTime), not
    at a pass in between: PENDING, Reason=BeginTime, Restarts=1, submitted again then and eligible
    121 s later, its run recorded PREEMPTED; the urgent job starts in that pass."""
    round_ = ROUNDS["REQUEUE"]
    cluster = replay_round(cast, now, round_)
    _on_slurms_clock(cluster)
    _, first, found = REQUEUE_CHECKS
    run_pass(cluster, first)
    run_pass(cluster, round_.urgent + 33 * SECOND)  # its GraceTime is over, no check is due
    assert SlurmJob.objects.get(cluster=cluster, job_id=35).state == JobState.RUNNING
    assert found == round_.urgent + 39 * SECOND
    run_pass(cluster, found)  # no word from the victims' nodes yet: they are killed now
    victim = SlurmJob.objects.get(cluster=cluster, job_id=35)
    assert (victim.state, victim.reason, victim.restart_count) == (JobState.PENDING, "BeginTime", 1)
    assert (victim.submit_time, victim.begin_time) == (found, found + 121 * SECOND)
    record = victim.runs.get()
    assert (record.state, record.end_time, record.state_desc) == (JobState.PREEMPTED, found, "preempted by job 39")
    assert SlurmJob.objects.get(cluster=cluster, job_id=39).state == JobState.RUNNING
    text = reports.scontrol_jobs(cluster, now=found, job="35").text
    assert ("   JobState=PENDING Reason=BeginTime Dependency=(null)\n"
            "   Requeue=1 Restarts=1 BatchFlag=1 Reboot=0 ExitCode=0:0\n") in text


def test_a_requeued_victim_started_again_has_no_preempt_time(cast, now):
    """A run starts unchosen: the victims of a REQUEUE round, started again once the urgent job ended,
    show PreemptTime=None (as every running job in the other recordings)."""
    round_ = ROUNDS["REQUEUE"]
    cluster = replay_round(cast, now, round_)
    _on_slurms_clock(cluster)
    killed = round_.urgent + 30 * SECOND  # the end of their GraceTime: their batch scripts are killed
    for job_node in JobNode.objects.filter(job__cluster=cluster, phase=NodePhase.RUNNING, batch_host=True):
        job_batch_finished(job_node=job_node, exit_code=0, signal=15, max_rss_kb=None, now=killed)
    for job_node in JobNode.objects.filter(job__cluster=cluster, phase=NodePhase.EPILOG):
        job_node_epilog_finished(job_node=job_node, exit_code=0, now=killed)
    assert SlurmJob.objects.get(cluster=cluster, job_id=35).state == JobState.RUNNING  # until the check
    run_pass(cluster, REQUEUE_CHECKS[2])  # requeued; the urgent job starts
    assert SlurmJob.objects.get(cluster=cluster, job_id=35).state == JobState.PENDING
    later = round_.submitted + 300 * SECOND
    finish(cluster, [39], later)
    run_pass(cluster, later)
    text = reports.scontrol_jobs(cluster, now=later, job="35").text
    assert "   JobState=RUNNING " in text and " PreemptTime=None\n" in text


def test_a_requeue_victim_cancelled_in_its_grace_time_ends_cancelled(cast, now):
    """scancel still kills a victim running out its GraceTime (slurmctld's job_signal): its batch
    script at once, and it is not requeued when the GraceTime ends."""
    round_ = ROUNDS["REQUEUE"]
    cluster = replay_round(cast, now, round_)
    carol = get_user_model().objects.get(username="carol")
    cancelled = round_.urgent + 5 * SECOND
    job_cancel(job=SlurmJob.objects.get(cluster=cluster, job_id=35), actor=carol, is_admin=False, now=cancelled)
    batch = JobNode.objects.get(job__cluster=cluster, job__job_id=35)
    assert batch.stop_requested and batch.kill_at is None
    run_pass(cluster, round_.urgent + 33 * SECOND)  # the GraceTime is over: the other victims are requeued
    assert SlurmJob.objects.get(cluster=cluster, job_id=35).state == JobState.RUNNING  # its script not yet ended
    assert set(SlurmJob.objects.filter(cluster=cluster, job_id__in=range(36, 39)).values_list("state", flat=True)) == {
        JobState.PENDING}
    job_batch_finished(job_node=batch, exit_code=0, signal=15, max_rss_kb=None, now=round_.urgent + 34 * SECOND)
    victim = SlurmJob.objects.get(cluster=cluster, job_id=35)
    assert (victim.state, victim.restart_count, victim.state_desc) == (JobState.CANCELLED, 0, "by carol")
