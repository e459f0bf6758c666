"""trainhub replays fixtures/22.05/backfill-window.sh (issue 19): backfill's plan ends with bf_window.

What Slurm did (bf_window=10 minutes, bf_interval 30 s, bf_resolution 60 s): with gpu1 held until +2 min,
gpu2 and gpu3 until +3 min and gpu4 free, a waiting ``-N 2`` is planned on gpu[1,4] from gpu1's end. A ``-N 3
-t 5`` behind it is planned for that reservation's end (floored to bf_resolution) when the reservation ends
within the window (within: ``-N 2 -t 5``), and gets no start at all, N/A, when it reaches past the window's
end (past: ``-t 20``; nolimit: no time limit): backfill.c's node-space map ends at the window's end, so those
nodes stay reserved for every later job of the iteration.
"""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path

import pytest

from trainhub.slurm import reports
from trainhub.slurm.models import SlurmCluster, SlurmJob
from trainhub.slurm.services.jobs import Submission, job_submit

from .conftest import run_pass
from .test_real_slurm import harness_cluster
from .test_real_slurm_nsplit import end
from .test_real_slurm_sched import Replay

REAL = Path(__file__).parent / "fixtures" / "22.05" / "backfill-window"
WORK = "/tmp/backfill-window"
SQUEUE = "%i|%j|%T|%D|%C|%N|%R"
ROUNDS = ("within", "past", "nolimit")
#: The recording's backfill iterations: one at 04:00:20 (within-*'s LastSchedEval), every bf_interval after.
BACKFILL = dt.datetime(2026, 12, 6, 4, 0, 20, tzinfo=dt.UTC)
BF_INTERVAL = dt.timedelta(seconds=30)


def real(name: str) -> str:
    return (REAL / f"{name}.txt").read_text()


def recorded_jobs() -> list[dict[str, str]]:
    """sacct-times: every job's id, name, Submit, Start and End."""
    header, *rows = real("sacct-times").splitlines()
    return [dict(zip(header.split("|"), row.split("|"), strict=True)) for row in rows]


def at(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text).replace(tzinfo=dt.UTC)


def sbatch_args() -> dict[str, list[str]]:
    """Each round's jobs' sbatch arguments, from the script's ``sub`` lines and ``round`` calls."""
    script = REAL.with_suffix(".sh").read_text()
    found = {}
    for name, args in re.findall(r'sub "\$r-(\w+)" (.+)', script):
        for round_ in ROUNDS:
            found[f"{round_}-{name}"] = args.replace('"$@"', "").split()
    for round_, args in re.findall(r"^round (\w+)(.*)$", script, re.M):
        found[f"{round_}-first"] += args.split()
    return found


def run_at(cluster: SlurmCluster, moment: dt.datetime) -> None:
    """A scheduler pass at ``moment`` that runs backfill only at one of the recording's iterations."""
    since = (moment - BACKFILL) % BF_INTERVAL
    SlurmCluster.objects.filter(pk=cluster.pk).update(last_backfill_time=moment - (since or BF_INTERVAL))
    run_pass(cluster, moment)


def replay(cast, now) -> dict[str, dict[str, str]]:
    cluster, _ = harness_cluster(cast, now, PriorityCalcPeriod="10", SchedulerParameters="bf_window=10")
    SlurmCluster.objects.filter(pk=cluster.pk).update(last_decay_time=BACKFILL, last_priority_time=BACKFILL)
    harness = Replay(cluster, cast)
    args = sbatch_args()
    jobs: dict[str, SlurmJob] = {}
    outcomes = {}
    for round_ in ROUNDS:
        rows = [row for row in recorded_jobs() if row["JobName"].startswith(f"{round_}-")]
        for row in rows:
            moment = at(row["Submit"])
            jobs[row["JobName"]] = job_submit(cluster=cluster, user=harness.users["alice"], now=moment, submission=Submission(
                argv=("-A", "physics", "-p", "batch", "-o", "/dev/null", "-J", row["JobName"], *args[row["JobName"]],
                      "--wrap", "sleep 900"), alloc_node="localhost", submit_dir=WORK))
            if not row["JobName"].endswith(("hold1", "hold2")):  # the holds start together
                run_at(cluster, at(row["Start"]) if row["Start"] != "None" else moment)
        shown = at(real(f"date-{round_}").strip())
        iteration = shown - (shown - BACKFILL) % BF_INTERVAL
        run_at(cluster, iteration)
        outcomes[round_] = {"squeue": reports.squeue(cluster, now=shown, format=SQUEUE).text,
                            "start": reports.squeue(cluster, now=shown, start=True).text}
        ended = at(rows[0]["End"])
        for row in rows:
            end(jobs[row["JobName"]], harness, ended)
        run_at(cluster, ended)
    return outcomes


@pytest.fixture
def replayed(cast, now):
    return replay(cast, now)


def test_squeue_start_plans_a_job_behind_a_reservation_only_where_it_ends_within_bf_window(replayed):
    assert {round_: outcome["start"] for round_, outcome in replayed.items()} == {
        round_: real(f"start-{round_}") for round_ in ROUNDS}


def test_squeue_shows_each_round_as_slurm_did(replayed):
    assert {round_: outcome["squeue"] for round_, outcome in replayed.items()} == {
        round_: real(f"squeue-{round_}") for round_ in ROUNDS}
