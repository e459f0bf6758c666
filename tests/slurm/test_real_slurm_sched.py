"""trainhub replays fixtures/22.05/sched.sh (scheduling details of issue 19, recorded on a fresh
slurm-harness cluster with PreemptExemptTime=00:00:00) and decides as Slurm 22.05.8 did:

A. ``-n 24`` without ``-N`` while gpu1 has 8 CPUs free for 30 minutes and gpu2, gpu3, gpu4 none for
   5, 10, 20: backfill plans it at gpu2's end on gpu[1-2] (8 + 16 tasks), not at gpu3's on gpu[2-3]
   (an even 12 per node).
B. An urgent ``-n 20`` preempts batch jobs: only v6 (gpu1's 8 CPUs), whose end leaves 16 + 4 free.
C. Every node has 2 GPUs free and two equal-priority -N4 jobs wait: salloc's job (14) starts at once,
   an sbatch of the same shape (15) waits for the scheduler (reason None).
D. gpu1 full, a ``-w gpu1`` job waits: the -n 4 jobs after it start, with their own time limits.

The replay steps its own clock on the recording's (scontrol's SubmitTime/StartTime), so squeue's
times compare byte for byte.
"""

from __future__ import annotations

import datetime as dt
import shlex
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model

from trainhub.slurm import reports
from trainhub.slurm.models import JobNode, JobState, NodePhase, SlurmCluster, SlurmJob
from trainhub.slurm.services.allocations import allocation_relinquish, allocation_submit
from trainhub.slurm.services.jobs import Submission, job_cancel, job_submit, submitted_message
from trainhub.slurm.services.lifecycle import job_batch_finished, job_node_epilog_finished

from .conftest import run_pass
from .test_real_slurm import harness_cluster, scontrol_differences

REAL = Path(__file__).parent / "fixtures" / "22.05" / "sched"
SECOND = dt.timedelta(seconds=1)
SQ = "%i|%j|%T|%D|%C|%N|%r"
#: Where the recording's sbatch and salloc ran (scontrol's WorkDir).
WORK = "/tmp/sched-scenario.yNbxEI"


def real(name: str) -> str:
    return (REAL / f"{name}.txt").read_text()


def at(clock: str) -> dt.datetime:
    """A time of the recording (2026-12-05, UTC)."""
    return dt.datetime.fromisoformat(f"2026-12-05T{clock}+00:00")


def sbatch_lines(script: str) -> dict[str, tuple[str, list[str]]]:
    """A recording script's sbatch lines (``rec sbatch-N as USER $SB ...``, or ``sb`` for rec): fixture
    name -> (user, sbatch arguments with $SB expanded)."""
    found = {}
    for line in (REAL.parent / script).read_text().splitlines():
        if line.startswith(("rec sbatch-", "sb sbatch-")):
            words = shlex.split(line.replace("$SB", "sbatch -A physics -p batch -o /dev/null"))
            found[words[1]] = (words[3], words[5:])
    return found


class Replay:
    def __init__(self, cluster, cast, script: str = "sched.sh"):
        self.cluster = cluster
        self.users = {name: cast.get(name) or get_user_model().objects.get(username=name)
                      for name in ("alice", "bob", "carol")}
        self.lines = sbatch_lines(script)

    def sbatch(self, name: str, moment: dt.datetime) -> str:
        user, args = self.lines[name]
        submission = Submission(argv=tuple(args), alloc_node="localhost", submit_dir=WORK)
        job = job_submit(cluster=self.cluster, user=self.users[user], submission=submission, now=moment)
        return submitted_message(job, Submission(argv=tuple(args))) + "\n"

    def scontrol_differences(self, moment: dt.datetime, prefix: str, job_ids: range) -> dict[str, list[str]]:
        """The recorded ``scontrol show job`` outputs PREFIX-scontrol-N.txt that trainhub's differ from."""
        self.cluster.refresh_from_db()  # its last backfill iteration (LastSchedEval)
        shown = {f"{prefix}-scontrol-{job_id}": reports.scontrol_jobs(self.cluster, now=moment, job=str(job_id)).text
                 for job_id in job_ids}
        return scontrol_differences(shown, REAL)

    def clear(self, moment: dt.datetime) -> None:
        """scancel -u alice; scancel -u carol, and every job's end."""
        for job in SlurmJob.objects.filter(cluster=self.cluster, state__in=[JobState.PENDING, JobState.RUNNING]):
            job_cancel(job=job, actor=self.users["alice"], is_admin=True, now=moment)
        for job_node in JobNode.objects.filter(job__cluster=self.cluster, job__state=JobState.RUNNING):
            job_batch_finished(job_node=job_node, exit_code=0, signal=15, max_rss_kb=None, now=moment)
        self.epilogs_done(moment)

    def epilogs_done(self, moment: dt.datetime) -> None:
        for job_node in JobNode.objects.filter(job__cluster=self.cluster, phase=NodePhase.EPILOG):
            job_node_epilog_finished(job_node=job_node, exit_code=0, now=moment)

    def squeue(self, moment: dt.datetime, **options) -> str:
        return reports.squeue(self.cluster, now=moment, **options).text


@pytest.fixture
def replay(cast, now):
    """The harness's cluster on the recording's clock: its decay thread (PriorityCalcPeriod 1 minute)
    ran at hh:mm:05 (between b-scontrol's 08:21:03, priorities still 10000, and job 12's submission
    at 08:21:07 with alice's fair-share charged, 1428), its backfill at hh:mm:07 and :37 (bf_interval
    30 s; a-scontrol-5's LastSchedEval 08:20:37)."""
    cluster, _ = harness_cluster(cast, now, PreemptExemptTime="00:00:00")
    SlurmCluster.objects.filter(pk=cluster.pk).update(last_decay_time=at("08:20:05"),
                                                      last_priority_time=at("08:20:05"),
                                                      last_backfill_time=at("08:20:07"))
    cluster.refresh_from_db()
    return Replay(cluster, cast)


def phase_a(replay: Replay) -> None:
    for name in ("sbatch-1", "sbatch-2", "sbatch-3", "sbatch-4", "sbatch-5"):
        assert replay.sbatch(name, at("08:20:09")) == real(name)
    run_pass(replay.cluster, at("08:20:10"))  # jobs 1-4 start
    run_pass(replay.cluster, at("08:20:37"))  # a backfill iteration plans job 5


def test_backfill_plans_n_tasks_where_they_fill_the_nodes_in_order(replay):
    phase_a(replay)
    moment = at("08:20:49")
    assert replay.squeue(moment, start=True) == real("a-squeue-start")
    assert replay.squeue(moment, format=SQ) == real("a-squeue-o")
    assert replay.scontrol_differences(moment, "a", range(1, 6)) == {}


def phase_b(replay: Replay) -> None:
    phase_a(replay)
    replay.clear(at("08:20:49"))
    for name in ("sbatch-6", "sbatch-7", "sbatch-8", "sbatch-9"):
        assert replay.sbatch(name, at("08:20:50")) == real(name)
    run_pass(replay.cluster, at("08:20:51"))
    assert replay.squeue(at("08:20:53"), format=SQ) == real("b-squeue-before")
    assert replay.sbatch("sbatch-10", at("08:20:53")) == real("sbatch-10")
    run_pass(replay.cluster, at("08:20:54"))  # u10 preempts (GraceTime 0: its victims end at once)
    run_pass(replay.cluster, at("08:20:54"))


def test_preemption_frees_only_what_the_tasks_need(replay):
    phase_b(replay)
    squeue = replay.squeue(at("08:21:03"), format=SQ)
    assert squeue == real("b-squeue-o")
    victims = SlurmJob.objects.filter(cluster=replay.cluster, restart_count=1).values_list("job_id", flat=True)
    assert list(victims) == [6]
    assert replay.scontrol_differences(at("08:21:03"), "b", range(6, 11)) == {}


def phase_c(replay: Replay) -> None:
    """Job 11 (fill6) started at 08:21:05 (squeue -l's TIME 0:04 at 08:21:09), jobs 12 and 13 two seconds later."""
    phase_b(replay)
    replay.clear(at("08:21:04"))
    assert replay.sbatch("sbatch-11", at("08:21:05")) == real("sbatch-11")
    run_pass(replay.cluster, at("08:21:05"))
    for name in ("sbatch-12", "sbatch-13"):
        assert replay.sbatch(name, at("08:21:07")) == real(name)
    # the harness's backfill iterations ran at :07 and :37 (job 17's plan at 08:21:37): this one gives
    # jobs 12 and 13 the same start a year on, past bf_window, so squeue lists them in job id order
    SlurmCluster.objects.filter(pk=replay.cluster.pk).update(last_backfill_time=at("08:20:37"))
    run_pass(replay.cluster, at("08:21:07"))


def salloc(replay: Replay, moment: dt.datetime, *argv: str) -> SlurmJob:
    """salloc's submission, then the pass it asks for."""
    job = allocation_submit(cluster=replay.cluster, user=replay.users["alice"], is_admin=False, now=moment,
                            submission=Submission(argv=("-A", "physics", "-p", "batch", *argv), allocation=True,
                                                  alloc_node="localhost", submit_dir=WORK))
    run_pass(replay.cluster, moment)
    job.refresh_from_db()
    return job


def phase_c_salloc(replay: Replay) -> None:
    """salloc 14 (hostname) granted, run and relinquished in its second, then sbatch 15."""
    allocation = salloc(replay, at("08:21:08"), "-N1", "--gres=gpu:1", "-J", "s14")
    assert (allocation.job_id, allocation.state) == (14, JobState.RUNNING)
    allocation_relinquish(job=allocation, actor=replay.users["alice"], exit_code=0, signal=0, now=at("08:21:08"))
    replay.epilogs_done(at("08:21:08"))
    assert replay.sbatch("sbatch-15", at("08:21:08")) == real("sbatch-15")  # no pass: it waits for the scheduler


def test_salloc_starts_at_once_beside_equal_priority_jobs_that_cannot(replay):
    phase_c(replay)
    jobs = {job.job_id: job for job in SlurmJob.objects.filter(cluster=replay.cluster, job_id__in=[12, 13])}
    assert jobs[12].priority == jobs[13].priority
    phase_c_salloc(replay)
    moment = at("08:21:09")
    assert replay.squeue(moment, format=SQ) == real("c-squeue-o")
    assert replay.squeue(moment, long=True) == real("c-squeue-l").split("\n", 1)[1]  # the CLI prints the date
    # job 15's Priority=1428 before any pass: given as its record was made, from the 08:21:05 decay run's
    # fair-share (alice's usage charged)
    assert replay.scontrol_differences(moment, "c", range(14, 16)) == {}


def test_a_salloc_below_a_higher_priority_job_waits(replay):
    """_top_priority: a pending job of its partition with a higher priority keeps salloc's job waiting."""
    phase_c(replay)
    SlurmJob.objects.filter(cluster=replay.cluster, job_id=13).update(nice=-100, priority=10100)  # scontrol update nice=-100
    allocation = salloc(replay, at("08:21:08"), "-N1", "--gres=gpu:1")
    assert (allocation.state, allocation.reason) == (JobState.PENDING, "Priority")


def phase_d(replay: Replay) -> None:
    """Job 16 submitted at 08:21:10, 17-19 at 08:21:11, all scheduled at 08:21:13 (scontrol's LastSchedEval);
    job 17's backfill plan at 08:21:37."""
    phase_c(replay)
    phase_c_salloc(replay)
    replay.clear(at("08:21:09"))
    assert replay.sbatch("sbatch-16", at("08:21:10")) == real("sbatch-16")
    for name in ("sbatch-17", "sbatch-18", "sbatch-19"):
        assert replay.sbatch(name, at("08:21:11")) == real(name)
    run_pass(replay.cluster, at("08:21:13"))
    run_pass(replay.cluster, at("08:21:37"))


def test_a_job_waiting_for_its_required_node_holds_back_that_node_only(replay):
    """job_scheduler.c: a job whose -w nodes are busy keeps lower-priority jobs off those nodes, not
    off its partition: x18 and x19 start in the same main scheduler run (Scheduler=Main), each with
    its own time limit in squeue -l."""
    phase_d(replay)
    moment = at("08:21:51")
    assert replay.squeue(moment, format=SQ) == real("d-squeue-o")
    assert replay.squeue(moment, long=True) == real("d-squeue-l").split("\n", 1)[1]
    assert replay.scontrol_differences(moment, "d", range(16, 20)) == {}


BACKFILL = REAL.parent / "backfill-nolimit"


def test_backfill_gives_a_job_without_a_time_limit_a_year(cast, now):
    """fixtures/22.05/backfill-nolimit.sh: job 4 (-N3 -x gpu4) blocks its partition in the main
    scheduler; at the 08:37:41 backfill iteration job 5 (no time limit) and job 6 (-t 60) start on
    gpu4, job 5 with TimeLimit=365-00:00:00, which squeue -l prints past its column."""
    cluster, _ = harness_cluster(cast, now)
    replay = Replay(cluster, cast)
    SlurmCluster.objects.filter(pk=cluster.pk).update(last_backfill_time=at("08:37:11"))
    sb = ("-A", "physics", "-p", "batch", "-o", "/dev/null")

    def sbatch(moment: dt.datetime, *args: str) -> None:
        argv = (*sb, *args, "--wrap", "sleep 900")
        submission = Submission(argv=argv, alloc_node="localhost", submit_dir="/tmp/backfill-scenario.gr1fzi")
        job_submit(cluster=cluster, user=replay.users["alice"], submission=submission, now=moment)

    for n in (1, 2):
        sbatch(at("08:37:13"), "-w", f"gpu{n}", "-n", "16", "-t", "30", "-J", f"full{n}")
    run_pass(cluster, at("08:37:14"))
    sbatch(at("08:37:14"), "-w", "gpu3", "-n", "16", "-t", "30", "-J", "full3")
    sbatch(at("08:37:16"), "-N3", "-x", "gpu4", "-J", "wide")
    sbatch(at("08:37:16"), "-n", "4", "-J", "nolimit")
    sbatch(at("08:37:16"), "-n", "4", "-t", "60", "-J", "limit60")
    run_pass(cluster, at("08:37:17"))
    text = replay.squeue(at("08:37:19"), format=SQ)
    assert text == (BACKFILL / "squeue-main.txt").read_text()
    run_pass(cluster, at("08:37:41"))
    moment = at("08:37:54")
    recorded = (BACKFILL / "squeue-l.txt").read_text().split("\n", 1)[1]
    assert replay.squeue(moment, long=True) == recorded
    text = replay.squeue(moment, format=SQ + "|%l")
    assert text == (BACKFILL / "squeue-o.txt").read_text()
    cluster.refresh_from_db()  # its last backfill iteration (LastSchedEval)
    shown = {f"scontrol-{job_id}": reports.scontrol_jobs(cluster, now=moment, job=str(job_id)).text
             for job_id in (4, 5, 6)}
    assert scontrol_differences(shown, BACKFILL) == {}
