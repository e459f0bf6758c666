"""trainhub replays fixtures/22.05/prio-sacctmgr.sh: jobs submitted right after sacctmgr changes, before
the decay thread's next run, get their priority from what the last run left. A modified Fairshare
(an account's, a user's) changes no job's FAIRSHARE until then, and a new association's is 0 (its job's
priority 1); the next run gives them all the new values. sprio -l and scontrol's Priority= are Slurm's,
and so are sshare -l's columns but RawUsage (the recording's usage is of its own seconds): at once the
new NormShares, but the last run's FairShare and LevelFS (for the new association a blank NormUsage
and 0 EffectvUsage, FairShare and LevelFS).

The recording (PriorityCalcPeriod=2): job 1 (alice, physics, the whole cluster) started at 17:56:55,
job 2 pending beside it; the decay run at 17:58:52 charged job 1's usage; jobs 3-5 submitted, the
shares changed and jobs 6-8 submitted at 17:58:55-57, read at once (sprio-1); the next decay run at
18:00:52 (sprio-2).
"""

from __future__ import annotations

import datetime as dt
import re
import shlex
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model

from trainhub.slurm import reports
from trainhub.slurm.services.jobs import Submission, job_submit
from trainhub.slurm.services.sacctmgr import sacctmgr_run

from .conftest import run_pass
from .test_real_slurm import harness_cluster

REAL = Path(__file__).parent / "fixtures" / "22.05" / "prio-sacctmgr"
SECOND = dt.timedelta(seconds=1)
#: The decay thread runs every 2 minutes from slurmctld's start (17:56:52 here).
CALC_PERIOD = dt.timedelta(minutes=2)
#: prio-sacctmgr.sh's steps after job 1 and 2: ("sbatch", user, its options) or ("sacctmgr", line)
STEPS = (
    ("sbatch", "alice", "-A physics -n 1 -J a0"),
    ("sbatch", "bob", "-A physics -n 1 -J b0"),
    ("sbatch", "carol", "-A bio -n 1 -J c0"),
    ("sacctmgr", "sacctmgr -i modify account physics set fairshare=5"),
    ("sbatch", "alice", "-A physics -n 1 -J a1"),
    ("sacctmgr", "sacctmgr -i modify user bob where account=physics set fairshare=5"),
    ("sbatch", "bob", "-A physics -n 1 -J b1"),
    ("sacctmgr", "sacctmgr -i add User Accounts=bio Partition=batch alice"),
    ("sbatch", "alice", "-A bio -n 1 -J a2"),
)


def recorded(name: str) -> str:
    return (REAL / f"{name}.txt").read_text()


def _sbatch(cluster, user: str, options: str, now: dt.datetime) -> None:
    argv = ("--chdir", "/tmp", "-p", "batch", "-o", "/dev/null", *shlex.split(options), "--wrap", "sleep 60")
    job_submit(cluster=cluster, user=get_user_model().objects.get(username=user),
               submission=Submission(argv=argv, alloc_node="localhost"), now=now)


@pytest.fixture
def changed(cast, now):
    """The harness's cluster (PriorityCalcPeriod=2) after prio-sacctmgr.sh's changes and jobs 3-8."""
    cluster, _ = harness_cluster(cast, now, PriorityCalcPeriod="2")
    started = now + SECOND
    run_pass(cluster, started)  # the decay thread's first run, as slurmctld starts
    # (after batch_sched_delay, so that the next pass's main scheduler starts job 1)
    _sbatch(cluster, "alice", "-A physics -n 64 -J all", started + 4 * SECOND)
    _sbatch(cluster, "carol", "-A bio -n 1 -J probe", started + 4 * SECOND)
    run_pass(cluster, started + 5 * SECOND)
    run_pass(cluster, started + CALC_PERIOD)
    moment = started + CALC_PERIOD + 2 * SECOND
    for kind, *what in STEPS:
        if kind == "sbatch":
            _sbatch(cluster, *what, moment)
        else:
            sacctmgr_run(cluster=cluster, line=what[0], actor="root", is_admin=True, now=moment)
    return cluster, started, moment


def _without_usage(text: str) -> list[list[str]]:
    """sshare -l's lines by fixed-width column, without RawUsage and the TRES columns (usage in TRES)."""
    header = text.splitlines()[1]
    bounds = [(start, start + len(dashes)) for start, dashes in
              ((match.start(), match.group()) for match in re.finditer(r"-+", header))]
    return [[line[a:b] for index, (a, b) in enumerate(bounds) if index not in (4, 9, 10)] for line in text.splitlines()]


def test_sshare_shows_the_new_shares_with_the_last_runs_fairshare(changed):
    cluster, _, moment = changed
    shown = reports.sshare(cluster, now=moment, viewer="root", long=True, all_users=True).text
    assert _without_usage(shown) == _without_usage(recorded("sshare-1"))


def test_jobs_after_the_changes_get_the_last_decay_runs_factors(changed):
    cluster, _, moment = changed
    assert reports.sprio(cluster, now=moment, long=True).text == recorded("sprio-1")
    for job_id in range(3, 9):
        shown = reports.scontrol_jobs(cluster, now=moment, job=str(job_id)).text
        assert shown.splitlines()[2] == recorded(f"scontrol-{job_id}-1").splitlines()[2], job_id


def test_the_next_decay_run_gives_the_new_shares(changed):
    cluster, started, _ = changed
    run_pass(cluster, started + 2 * CALC_PERIOD)
    moment = started + 2 * CALC_PERIOD + 3 * SECOND
    assert reports.sprio(cluster, now=moment, long=True).text == recorded("sprio-2")
    shown = reports.sshare(cluster, now=moment, viewer="root", long=True, all_users=True).text
    assert _without_usage(shown) == _without_usage(recorded("sshare-2"))

