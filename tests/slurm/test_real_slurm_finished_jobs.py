"""trainhub replays fixtures/22.05/finished-jobs.sh (issue 19): finished and refused jobs as a user sees them.

What Slurm did (fresh harness cluster, MinJobAge 300 s): ``squeue -t all`` (and ``-t CD,F,CA``, ``--states=``)
lists the jobs that ended in the last MinJobAge seconds beside the queued ones, in its order ``-S P,t,-p``
where ``t`` compares the short state codes as strings (CA, CD, F, PD, R); plain ``squeue``, with or without
``-j``, hides them. A job refused at submission (--gres=gpu:9, --mem=20000, -c 17) is kept FAILED
(BadConstraints, 0:1 in scontrol, 1:0 in sacct) with its request: priority, CPUs, TRES, its submit time as
start and end. ``-N 5`` on the 4-node partition is not refused: it pends (PartitionNodeLimit).

sacct's Reason (sacct-x-more.txt) is ``None`` for every finished job, the refused ones too (not their
BadConstraints), and ``PartitionConfig`` for nodes5 (squeue's PartitionNodeLimit: its submission's reason,
which the build after it kept before its first record went; formats.accounting_reason).

The replay steps its own clock on the recording's (scontrol's SubmitTime/StartTime/EndTime).
"""

from __future__ import annotations

import datetime as dt
import shlex
from pathlib import Path

import pytest

from trainhub.common.errors import ApiError
from trainhub.slurm import formats, reports
from trainhub.slurm.models import JobNode, JobState, SlurmJob
from trainhub.slurm.services.accounting import job_records_sent
from trainhub.slurm.services.jobs import Submission, job_cancel, job_submit, submitted_message
from trainhub.slurm.services.lifecycle import job_batch_finished, job_node_prolog_finished

from .conftest import run_pass
from .test_real_slurm import harness_cluster, scontrol_differences
from .test_real_slurm_sched import Replay

REAL = Path(__file__).parent / "fixtures" / "22.05" / "finished-jobs"
#: Where the recording's sbatch ran (scontrol's WorkDir).
WORK = "/tmp/finished-jobs.0Bl38a"


def real(name: str) -> str:
    return (REAL / f"{name}.txt").read_text()


def at(clock: str) -> dt.datetime:
    """A time of the recording (2026-12-06, UTC)."""
    return dt.datetime.fromisoformat(f"2026-12-06T{clock}+00:00")


def submissions() -> dict[str, tuple[str, list[str]]]:
    """finished-jobs.sh's ``sub NAME USER ARGS...``: NAME -> (user, sbatch arguments as sub passes them)."""
    found = {}
    for line in (REAL.parent / "finished-jobs.sh").read_text().splitlines():
        if line.startswith("sub "):
            words = shlex.split(line)
            found[words[1]] = (words[2], ["-o", "/dev/null", "-J", words[1], *words[3:]])
    return found


SUBMISSIONS = submissions()


def sbatch(replay: Replay, name: str, moment: dt.datetime) -> tuple[str, str]:
    """sbatch NAME at ``moment``: its stdout and stderr as the recording keeps them (stderr's rc= line)."""
    user, args = SUBMISSIONS[name]
    if "--begin=now+1hour" in args:
        args = [arg.replace("now+1hour", f"{moment + dt.timedelta(hours=1):%Y-%m-%dT%H:%M:%S}") for arg in args]
    try:
        job = job_submit(cluster=replay.cluster, user=replay.users[user], now=moment,
                         submission=Submission(argv=tuple(args), alloc_node="localhost", submit_dir=WORK))
    except ApiError as exc:
        return "", exc.message + "\nrc=1\n"
    return submitted_message(job, Submission(argv=tuple(args))) + "\n", "rc=0\n"


def launch(job_id: int, moment: dt.datetime) -> None:
    """The prolog ran on the job's nodes: its batch script runs."""
    for job_node in JobNode.objects.filter(job__job_id=job_id, job__state=JobState.RUNNING):
        job_node_prolog_finished(job_node=job_node, exit_code=0, now=moment)


def finish(job_id: int, *, exit_code: int, moment: dt.datetime) -> None:
    for job_node in JobNode.objects.filter(job__job_id=job_id, job__state=JobState.RUNNING):
        job_batch_finished(job_node=job_node, exit_code=exit_code, signal=0, max_rss_kb=None, now=moment)


def cancel(replay: Replay, job_id: int, user: str, moment: dt.datetime) -> None:
    job = SlurmJob.objects.get(cluster=replay.cluster, job_id=job_id)
    job_cancel(job=job, actor=replay.users[user], is_admin=False, now=moment)
    for job_node in JobNode.objects.filter(job=job, job__state=JobState.RUNNING):
        job_batch_finished(job_node=job_node, exit_code=0, signal=15, max_rss_kb=None, now=moment)


@pytest.fixture
def replayed(cast, now) -> tuple[Replay, dict[str, tuple[str, str]]]:
    """finished-jobs.sh on the recording's clock; every job's batch script ends (and its epilog) when
    scontrol's EndTime says."""
    cluster, _ = harness_cluster(cast, now)
    replay = Replay(cluster, cast)
    answers = {}
    for name in ("done", "exit3"):
        answers[name] = sbatch(replay, name, at("03:39:56"))
    run_pass(cluster, at("03:39:56"))
    launch(1, at("03:39:56"))
    launch(2, at("03:39:56"))
    finish(1, exit_code=0, moment=at("03:39:56"))
    finish(2, exit_code=3, moment=at("03:39:56"))
    replay.epilogs_done(at("03:39:56"))
    answers["run-cancel"] = sbatch(replay, "run-cancel", at("03:39:57"))
    run_pass(cluster, at("03:39:59"))
    launch(3, at("03:39:59"))
    cancel(replay, 3, "bob", at("03:40:01"))
    replay.epilogs_done(at("03:40:01"))
    for name in ("begin-cancel", "held-cancel"):
        answers[name] = sbatch(replay, name, at("03:40:01"))
    run_pass(cluster, at("03:40:01"))
    cancel(replay, 4, "carol", at("03:40:03"))
    cancel(replay, 5, "alice", at("03:40:03"))
    for name in ("gres9", "nodes5", "mem", "cpus", "keep", "held"):
        answers[name] = sbatch(replay, name, at("03:40:03"))
    run_pass(cluster, at("03:40:05"))  # keep's LastSchedEval
    launch(10, at("03:40:05"))
    job_records_sent(now=at("03:40:06"))  # after the build that kept nodes5's PartitionConfig
    return replay, answers


def test_sbatch_answers_as_slurm(replayed):
    """Each sbatch's job id or refusal (slurmctld's extra line for --mem and -c); nodes5 (``-N 5`` on 4
    nodes) is accepted, EnforcePartLimits being NO."""
    _, answers = replayed
    assert answers == {name: (real(f"sbatch-{name}"), (REAL / f"sbatch-{name}.err").read_text())
                       for name in answers}


SHOWN = at("03:40:07")
#: squeue -t all -o, -l and scontrol ran a second later (keep's TIME 0:03 there).
LATER = at("03:40:08")


@pytest.mark.parametrize(("name", "options"), [
    ("squeue", {}),
    ("squeue-all", {"states": "all"}),
    ("squeue-all-o", {"states": "all", "format": "%i|%j|%u|%T|%D|%C|%b|%N|%r|%Q|%S|%e|%M"}),
    ("squeue-all-long", {"states": "all", "long": True}),
    ("squeue-finished", {"states": "CD,F,CA", "format": "%i|%T|%D|%C|%N|%r"}),
    ("squeue-states", {"states": "COMPLETED,CANCELLED"}),
    ("squeue-failed", {"states": "FAILED", "format": "%i|%T|%r|%D|%C"}),
    ("squeue-bob", {"states": "all", "user": "bob"}),
    ("squeue-j", {"states": "all", "jobs": "1,3,6"}),
    ("squeue-j-default", {"jobs": "1,3,6"}),
])
def test_squeue_lists_finished_jobs_as_slurm(replayed, name, options):
    replay, _ = replayed
    moment = LATER if name in ("squeue-all-o", "squeue-all-long") else SHOWN
    text = reports.squeue(replay.cluster, now=moment, **options).text
    if options.get("long"):  # it prints its clock first
        text = f"{moment:%a %b %d %H:%M:%S %Y}\n" + text
    assert text == real(name)


def test_scontrol_show_job_of_each_is_slurms(replayed):
    replay, _ = replayed
    shown = {f"scontrol-{job_id}": reports.scontrol_jobs(replay.cluster, now=LATER, job=str(job_id)).text
             for job_id in range(1, 12)}
    assert scontrol_differences(shown, REAL) == {}
    gone = reports.scontrol_jobs(replay.cluster, now=LATER, job="12")  # no such job
    assert gone.text + gone.stderr + "rc=1\n" == real("scontrol-12") + (REAL / "scontrol-12.err").read_text()


@pytest.mark.parametrize(("name", "fields"), [
    ("sacct-x", "JobID,JobName,State,ExitCode,ReqTRES,AllocTRES,NNodes,AllocCPUS,NodeList,Priority"),
    ("sacct-steps", "JobID,State,ExitCode,NNodes,NodeList"),
    ("sacct-x-more", "JobID,NCPUS,ReqCPUS,ReqNodes,AllocNodes,Reason,Start,End,Elapsed"),
])
def test_sacct_of_them_is_slurms(replayed, name, fields):
    """-X: each job's record; sacct-steps: with its batch step's (FAILED 3:0 on the batch host alone,
    CANCELLED 0:15 under the job's ``CANCELLED by 1002`` 0:0); sacct-x-more (ran at 03:40:11: keep's
    Elapsed): a refused job asked 1 node and got none, started and ended at its submission."""
    replay, _ = replayed
    recorded = real(name)
    records = reports.sacct(replay.cluster, now=at("03:40:11") if name == "sacct-x-more" else SHOWN, viewer="root", all_users=True, allocations=name != "sacct-steps",
                            fields=fields.split(",")).items
    shown = formats.sacct_text([record for record, _ in records], fields=fields.split(","), parsable="plain")
    assert shown == recorded


def test_sacct_default_is_slurms(replayed):
    replay, _ = replayed
    shown = reports.sacct(replay.cluster, now=SHOWN, viewer="root", all_users=True).text
    assert shown == real("sacct")
