"""trainhub replays fixtures/22.05/acct-reason.sh (issue 19): sacct's Reason is slurmctld's
state_reason_prev_db, on the slurm-harness cluster (4 nodes x 16 CPUs x 8 GPUs, CR_CPU,
AccountingStorageEnforce=associations,limits,qos; carol's bio/urgent association GrpTRES=cpu=2).

What Slurm did. Each queue build keeps a pending job's reason unless it is None, Priority or Resources
(scheduler.reason_prev_db); a job that ran shows the one its start carried: Dependency (``-d afterok``),
JobHeldUser (``-H``, released 7 s later), BeginTime (``--begin=now+4``), AssocGrpCpuLimit (carol's ``-n 1``
while her ``-n 2`` ran), None for Resources and Priority. A job that never ran shows the one its first
record carried (services.accounting.job_records_sent, slurmctld's db_inx thread every 5 s): a held and a
dependent job cancelled after a build JobHeldUser and Dependency; pending, the dependent job shows
Dependency, the limited one None (its first build gave it AssocGrpCpuLimit; the record came before the next).

The replay steps its clock on the recording's (sacct-times: Submit, Eligible, Start, End); its passes run
where slurmctld's main scheduler did (batch_sched_delay after submissions, at job ends), and it sends the
job records on 5-second ticks that fall between the first build after the last submissions (07:43:48) and
the next (07:43:52), where the recording's outputs put slurmctld's.
"""

from __future__ import annotations

import datetime as dt
import shlex
from pathlib import Path

import pytest

from trainhub.slurm import formats, reports
from trainhub.slurm.models import SlurmCluster, SlurmJob
from trainhub.slurm.services.accounting import job_records_sent
from trainhub.slurm.services.jobs import Submission, job_release, job_submit, submitted_message
from trainhub.slurm.services.sacctmgr import sacctmgr_run

from .conftest import run_pass
from .test_real_slurm import harness_cluster
from .test_real_slurm_finished_jobs import at, cancel, finish, launch
from .test_real_slurm_sched import Replay

REAL = Path(__file__).parent / "fixtures" / "22.05" / "acct-reason"
#: Where the recording's sbatch ran (scontrol's WorkDir; sbatch's answer does not show it).
WORK = "/tmp/acct-reason"


def real(name: str) -> str:
    return (REAL / f"{name}.txt").read_text()


def submissions() -> dict[str, tuple[str, list[str]]]:
    """The script's ``sub NAME USER ACCOUNT/PARTITION ARGS...`` lines: NAME -> (user, sbatch arguments)."""
    found = {}
    for line in REAL.with_suffix(".sh").read_text().splitlines():
        if not line.startswith("sub "):
            continue
        _, name, user, place, *args = shlex.split(line.replace('"afterok:${JOB[dep-a]}"', "afterok:3"))
        account, partition = place.split("/")
        found[name] = (user, ["-o", "/dev/null", "-A", account, "-p", partition, "-J", name, *args])
    return found


SUBMISSIONS = submissions()


def sbatch(cluster: SlurmCluster, replay: Replay, name: str, moment: dt.datetime) -> str:
    user, args = SUBMISSIONS[name]
    job = job_submit(cluster=cluster, user=replay.users[user], now=moment,
                     submission=Submission(argv=tuple(args), alloc_node="localhost", submit_dir=WORK))
    return submitted_message(job, Submission(argv=tuple(args))) + "\n"


def ran(replay: Replay, job_ids: tuple[int, ...], moment: dt.datetime) -> None:
    """The jobs' batch scripts ran and ended at once (``--wrap true``), their epilogs done."""
    for job_id in job_ids:
        launch(job_id, moment)
        finish(job_id, exit_code=0, moment=moment)
    replay.epilogs_done(moment)


def ticks(start: str, end: str) -> None:
    """slurmctld's db_inx thread, every 5 s from ``start`` up to ``end``."""
    moment = at(start)
    while moment <= at(end):
        job_records_sent(now=moment)
        moment += dt.timedelta(seconds=5)


@pytest.fixture
def replayed(cast, now) -> tuple[Replay, dict[str, str]]:
    cluster, _ = harness_cluster(cast, now, AccountingStorageEnforce="associations,limits,qos")
    sacctmgr_run(cluster=cluster, line="-i modify user carol where account=bio partition=urgent set GrpTRES=cpu=2",
                 actor="root", is_admin=True, now=now)
    replay = Replay(cluster, cast)
    answers = {"plain": sbatch(cluster, replay, "plain", at("07:43:40"))}
    run_pass(cluster, at("07:43:42"))
    ran(replay, (1,), at("07:43:42"))
    for name in ("fill", "dep-a", "lim-a"):
        answers[name] = sbatch(cluster, replay, name, at("07:43:42"))
    run_pass(cluster, at("07:43:45"))
    for job_id in (2, 3, 4):
        launch(job_id, at("07:43:45"))
    for name in ("dep", "held"):
        answers[name] = sbatch(cluster, replay, name, at("07:43:45"))
    for name in ("begin", "res", "prio", "lim", "hcancel", "dcancel"):
        answers[name] = sbatch(cluster, replay, name, at("07:43:46"))
    run_pass(cluster, at("07:43:48"))
    ticks("07:43:44", "07:43:49")
    job_release(job=SlurmJob.objects.get(cluster=cluster, job_id=6), actor=replay.users["alice"], is_admin=False,
                now=at("07:43:52"))
    run_pass(cluster, at("07:43:52"))
    ran(replay, (6, 7), at("07:43:52"))
    cancel(replay, 11, "alice", at("07:43:53"))
    cancel(replay, 12, "alice", at("07:43:53"))
    ticks("07:43:54", "07:44:04")
    answers["sacct-mid"] = sacct_text(cluster, at("07:43:56"), "sacct-mid")
    for job_id in (2, 3, 4):
        finish(job_id, exit_code=0, moment=at("07:44:05"))
    replay.epilogs_done(at("07:44:05"))
    run_pass(cluster, at("07:44:05"))
    ran(replay, (5,), at("07:44:05"))
    run_pass(cluster, at("07:44:06"))
    ran(replay, (8, 9, 10), at("07:44:06"))
    return replay, answers


#: Each sacct of the script: its options as reports.sacct takes them (root sees every user's jobs).
SACCT = {
    "sacct-mid": ("JobID,JobName,State,Reason", {"jobs": ",".join(str(n) for n in range(1, 13))}, "plain"),
    "sacct": ("JobID,State,Reason", {}, None),
    "sacct-p": ("JobID,State,Reason", {}, "ending"),
    "sacct-j": ("JobID,JobName,State,Reason", {"jobs": ",".join(str(n) for n in range(1, 13))}, "plain"),
}


def sacct_text(cluster: SlurmCluster, moment: dt.datetime, name: str) -> str:
    fields, options, parsable = SACCT[name]
    records = reports.sacct(cluster, now=moment, viewer="root", all_users=True, allocations=True,
                            fields=fields.split(","), **options).items
    return formats.sacct_text([record for record, _ in records], fields=fields.split(","), parsable=parsable)


def test_sbatch_answers_as_slurm(replayed):
    _, answers = replayed
    assert {name: answers[name] for name in SUBMISSIONS} == {name: real(f"sbatch-{name}") for name in SUBMISSIONS}


def test_sacct_of_pending_and_cancelled_jobs_shows_their_first_records_reason(replayed):
    """sacct at 07:43:56: dep pending Dependency, lim pending None though squeue shows AssocGrpCpuLimit,
    held and begin (ran) JobHeldUser and BeginTime, hcancel and dcancel (cancelled) JobHeldUser and
    Dependency."""
    _, answers = replayed
    assert answers["sacct-mid"] == real("sacct-mid")


@pytest.mark.parametrize("name", ["sacct", "sacct-p", "sacct-j"])
def test_sacct_reason_of_jobs_that_ran_is_what_they_waited_for(replayed, name):
    """After every job ended: Dependency, JobHeldUser, BeginTime, AssocGrpCpuLimit; None for the jobs that
    ran at once or waited only for Resources or Priority; without -j the held and dependent jobs cancelled
    pending (never eligible) are left out."""
    replay, _ = replayed
    assert sacct_text(replay.cluster, at("07:44:09"), name) == real(name)
