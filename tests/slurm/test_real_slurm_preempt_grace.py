"""trainhub replays fixtures/22.05/preempt-grace (preempt-grace.sh): victims in their GraceTime.

carol's v1 (gpu1) and v2 (gpu2) run in batch (GraceTime=45) for 10 minutes with 8 GPUs each, f3 and f4 hold
gpu3 and gpu4 in urgent, p (batch, -w gpu1, 4 GPUs) waits for gpu1. u1 (urgent, -w gpu1, 4 GPUs) preempts v1;
u2 (urgent, 4 GPUs anywhere), submitted in v1's GraceTime, does not choose v1 again but a new victim, v2.

The recording's clock (slurmctld-extract.txt): slurmctld's backfill iterations and periodic checks at
21:10:15, 21:10:45, 21:11:15, 21:11:45 (every 30 s); its main scheduler at the submissions (v1, v2, f3, f4 at
21:09:47, started 21:09:48; p at 21:09:52; u1 at 21:10:27, u2 at 21:10:32) and its full run at 21:10:45.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from django.contrib.auth import get_user_model

from trainhub.slurm import reports
from trainhub.slurm.models import JobNode, JobState, NodePhase, Partition, SlurmCluster
from trainhub.slurm.services.clusters import partition_update
from trainhub.slurm.services.jobs import Submission, job_submit
from trainhub.slurm.services import lifecycle

from .conftest import run_pass
from .test_real_slurm import harness_cluster, scontrol_differences

FIXTURES = Path(__file__).parent / "fixtures" / "22.05" / "preempt-grace"
SECOND = dt.timedelta(seconds=1)
SQUEUE = "%i|%j|%T|%r|%S|%e|%N"
START = "%i|%j|%T|%r|%S|%Y"
NAMES = ("v1", "v2", "f3", "f4", "p", "u1", "u2")


def at(clock: str) -> dt.datetime:
    return dt.datetime.fromisoformat(f"2026-12-05T{clock}").replace(tzinfo=dt.UTC)


def _epoch(folder: Path, name: str) -> dt.datetime:
    return dt.datetime.fromtimestamp(int((folder / name).read_text()), dt.UTC)


class Recording:
    """One of preempt-grace.sh's runs (``mode``: the batch partition's PreemptMode) replayed in trainhub."""

    def __init__(self, cast, now, mode: str, clock: dict[str, str]):
        self.folder = FIXTURES / mode
        self.clock = {name: at(value) for name, value in clock.items()}
        cluster, _ = harness_cluster(cast, now, PreemptExemptTime="00:00:00")
        partition_update(partition=Partition.objects.get(cluster=cluster, name="batch"), actor="root",
                         config={"PriorityTier": "1", "GraceTime": "45", "PreemptMode": mode}, now=now)
        # slurmctld's backfill thread (and its periodic checks) run every 30 s from its start, its decay
        # thread (PriorityCalcPeriod=1) every minute from then
        SlurmCluster.objects.filter(pk=cluster.pk).update(last_backfill_time=self.clock["started"],
                                                          last_decay_time=self.clock["decay"],
                                                          last_priority_time=self.clock["decay"])
        self.cluster = cluster
        self.carol = get_user_model().objects.get(username="carol")

    def sbatch(self, moment: dt.datetime, name: str, partition: str, *argv: str) -> None:
        job_submit(cluster=self.cluster, user=self.carol, now=moment, submission=Submission(
            argv=("-A", "bio", "-p", partition, "-J", name, *argv, "-o", "/dev/null"), alloc_node="localhost",
            submit_dir="/tmp"))

    def run(self, moment: dt.datetime) -> None:
        """A pass at ``moment``; the prologs of the jobs it started and the epilogs of those that ended
        (their batch scripts gone) done then."""
        run_pass(self.cluster, moment)
        for job_node in JobNode.objects.filter(job__cluster=self.cluster, phase=NodePhase.PROLOG):
            lifecycle.job_node_prolog_finished(job_node=job_node, exit_code=0, now=moment)
        for job_node in JobNode.objects.filter(job__cluster=self.cluster, phase=NodePhase.EPILOG,
                                               job__state=JobState.PREEMPTED):
            lifecycle.job_node_epilog_finished(job_node=job_node, exit_code=0, now=moment)

    def shown(self, phase: str, moment: dt.datetime) -> dict[str, str]:
        return {f"{phase}-scontrol-{name}": reports.scontrol_jobs(self.cluster, now=moment, job=str(job_id)).text
                for job_id, name in enumerate(NAMES, start=1)
                if (self.folder / f"{phase}-scontrol-{name}.txt").exists()}

    def differences(self, phase: str, moment: dt.datetime, *, but: tuple[str, ...] = ()) -> dict[str, list[str]]:
        """What trainhub's squeue, squeue --start and scontrol show job print at ``moment`` unlike the
        recording's ``phase``: each output's lines recorded ("-") and shown ("+"); ``but``: jobs left
        out of the comparison."""
        left_out = tuple(f"{NAMES.index(name) + 1}|" for name in but)
        shown = {name: text for name, text in self.shown(phase, moment).items()
                 if name.removeprefix(f"{phase}-scontrol-") not in but}
        found = scontrol_differences(shown, self.folder)
        for name, text in ((f"{phase}-squeue", reports.squeue(self.cluster, now=moment, format=SQUEUE).text),
                           (f"{phase}-start", reports.squeue(self.cluster, now=moment, start=True,
                                                              format=START).text)):
            recorded, printed = ([line for line in output.splitlines() if not line.startswith(left_out)]
                                 for output in ((self.folder / f"{name}.txt").read_text(), text))
            if printed != recorded:
                found[name] = [f"-{line}" for line in recorded] + [f"+{line}" for line in printed]
        return found

    def epoch(self, name: str) -> dt.datetime:
        return _epoch(self.folder, name)

    def until_grace(self) -> None:
        """The recording to u2's first try (v1 in its GraceTime, v2 chosen by u2)."""
        submitted = self.clock["submitted"]
        for name, partition, node in (("v1", "batch", "gpu1"), ("v2", "batch", "gpu2"), ("f3", "urgent", "gpu3"),
                                      ("f4", "urgent", "gpu4")):
            self.sbatch(submitted, name, partition, "-w", node, "--gres=gpu:8", "-t", "10", "--wrap", "sleep 600")
        self.run(self.clock["main"])
        self.sbatch(self.clock["p"], "p", "batch", "-w", "gpu1", "--gres=gpu:4", "-t", "5", "--wrap", "sleep 300")
        self.run(self.clock["p"])
        self.run(self.clock["started"] + 30 * SECOND)
        for name, argv in (("u1", ("-w", "gpu1")), ("u2", ())):
            moment = self.epoch(f"{name}-at.txt")
            self.sbatch(moment, name, "urgent", *argv, "--gres=gpu:4", "-t", "5", "--wrap", "sleep 300")
            self.run(moment)


#: The recordings' clocks: slurmctld's start (its backfill iterations and periodic checks every 30 s from
#: then), its decay thread's first run, the submissions and v1's GraceTime end + 1 s.
REQUEUE_CLOCK = {"started": "21:09:45", "decay": "21:09:46", "submitted": "21:09:47", "main": "21:09:48",
                 "p": "21:09:52", "over": "21:11:13"}
CANCEL_CLOCK = {"started": "21:12:32", "decay": "21:12:33", "submitted": "21:12:34", "main": "21:12:35",
                "p": "21:12:39", "over": "21:14:00"}


@pytest.fixture
def requeue(cast, now):
    recording = Recording(cast, now, "REQUEUE", REQUEUE_CLOCK)
    recording.until_grace()
    return recording


@pytest.fixture
def cancel(cast, now):
    recording = Recording(cast, now, "CANCEL", CANCEL_CLOCK)
    recording.until_grace()
    return recording


def test_before_the_preemption_p_waits_for_v1s_time_limit(cast, now):
    recording = Recording(cast, now, "REQUEUE", REQUEUE_CLOCK)
    submitted = recording.clock["submitted"]
    for name, partition, node in (("v1", "batch", "gpu1"), ("v2", "batch", "gpu2"), ("f3", "urgent", "gpu3"),
                                  ("f4", "urgent", "gpu4")):
        recording.sbatch(submitted, name, partition, "-w", node, "--gres=gpu:8", "-t", "10", "--wrap", "sleep 600")
    recording.run(recording.clock["main"])
    recording.sbatch(recording.clock["p"], "p", "batch", "-w", "gpu1", "--gres=gpu:4", "-t", "5", "--wrap",
                     "sleep 300")
    recording.run(recording.clock["p"])
    recording.run(recording.clock["started"] + 30 * SECOND)
    assert recording.differences("before", recording.epoch("u1-at.txt")) == {}


def test_u2_chooses_a_new_victim_and_the_victims_end_at_their_grace_time(requeue):
    assert requeue.differences("grace", requeue.epoch("u2-at.txt") + 3 * SECOND) == {}


def test_backfill_in_the_grace_time(requeue):
    moment = requeue.epoch("bf-at.txt")
    requeue.run(moment)
    assert requeue.differences("bf", moment) == {}


def _to_ended(recording: Recording) -> dt.datetime:
    """From u2's first try to v1's end, slurmctld's next check after v1's GraceTime (21:11:12): when."""
    recording.run(recording.epoch("bf-at.txt"))
    recording.run(recording.clock["decay"] + 60 * SECOND)  # slurmctld's decay thread
    # v1's GraceTime is over: its agent kills its batch script, but it runs until slurmctld's next check
    over = recording.clock["over"]
    batch = JobNode.objects.get(job__cluster=recording.cluster, job__job_id=1, batch_host=True)
    lifecycle.job_batch_finished(job_node=batch, exit_code=0, signal=9, max_rss_kb=None, now=over - SECOND)
    recording.run(over)
    assert reports.squeue(recording.cluster, now=over, format="%j|%T", jobs="1").text.endswith(
        "v1|RUNNING\n")
    moment = recording.epoch("ended-at.txt")
    recording.run(moment)
    return moment


def test_the_victim_is_requeued_at_the_first_check_after_its_grace_time(requeue):
    """v1 requeued at 21:11:15, u1 and u2 started on gpu1 then, v2 running on though no longer needed.
    p is left out: slurmctld's backfill iteration planned it (21:16:00) after u1's try before its main
    scheduler started u1 and u2 in that second; trainhub's pass requeues v1 first and plans p after them
    (21:16:15, as Slurm's next iteration: later-start.txt)."""
    assert requeue.differences("ended", _to_ended(requeue), but=("p",)) == {}


def test_the_other_victim_is_requeued_at_its_own_check_and_sacct_shows_both_preempted(requeue):
    """v2, whose preemptor runs already, is requeued all the same when slurmctld's periodic check
    finds its GraceTime over (21:11:45, "for JobId=Invalid"). v1 and p are left out of the outputs:
    slurmctld's decay thread recomputed v1's priority in between (not replayed), and its full main
    scheduler run at 21:11:45, after the backfill iteration, evaluated p last (Scheduler=Main)."""
    ended = _to_ended(requeue)
    requeue.run(ended + 30 * SECOND)  # v2's GraceTime (21:11:17) found over: requeued
    later = ended + 35 * SECOND
    assert requeue.differences("later", later, but=("v1", "p")) == {}
    fields = ["JobID", "JobName", "State", "ExitCode", "Submit", "Start", "End", "NodeList"]
    text = reports.sacct(requeue.cluster, now=later, viewer="root", all_users=True, allocations=True,
                         parsable=True, fields=fields).text
    assert [line.removesuffix("|") for line in text.splitlines()] == (
        requeue.folder / "sacct.txt").read_text().splitlines()


def test_cancel_victims_run_out_their_grace_time_as_requeue_ones(cancel):
    assert cancel.differences("grace", cancel.epoch("u2-at.txt") + 3 * SECOND) == {}
    moment = cancel.epoch("bf-at.txt")
    cancel.run(moment)
    assert cancel.differences("bf", moment) == {}


def test_a_cancel_victim_ends_preempted_at_the_first_check_after_its_grace_time(cancel):
    """v1 ends PREEMPTED (scontrol ExitCode=0:15, sacct 0:0) at 21:14:02, its EndTime and PreemptTime
    then, not when its batch script was killed at the end of its GraceTime (21:13:59); v2 at 21:14:32.
    p is left out, as in the REQUEUE tests above."""
    moment = _to_ended(cancel)
    assert cancel.differences("ended", moment, but=("p",)) == {}
    cancel.run(moment + 30 * SECOND)
    later = moment + 35 * SECOND
    assert cancel.differences("later", later, but=("p",)) == {}
    fields = ["JobID", "JobName", "State", "ExitCode", "Submit", "Start", "End", "NodeList"]
    text = reports.sacct(cancel.cluster, now=later, viewer="root", all_users=True, allocations=True,
                         parsable=True, fields=fields).text
    assert [line.removesuffix("|") for line in text.splitlines()] == (
        cancel.folder / "sacct.txt").read_text().splitlines()
