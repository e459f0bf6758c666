"""trainhub replays fixtures/22.05/prio-basic.sh: under PriorityType=priority/basic a job has its FIFO
priority as sbatch returns (slurmctld's _set_job_prio as it makes the record: TOP_PRIORITY 0xffff0000
less one a job), before any scheduling pass: squeue's %Q and scontrol's Priority= are Slurm's. A held
job's is 0; --nice=100's is 100 less; sprio refuses to run.

The recording: jobs 1-4 submitted at 17:50:06 and read back in the same second (submit.txt), job 1
started at 17:50:07, squeue and scontrol at 17:50:09, job 4 released, job 5 submitted.
"""

from __future__ import annotations

import datetime as dt
import shlex
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model

from trainhub.slurm import reports
from trainhub.slurm.models import SlurmJob
from trainhub.slurm.services.jobs import Submission, job_release, job_submit

from .conftest import run_pass
from .test_real_slurm import harness_cluster

REAL = Path(__file__).parent / "fixtures" / "22.05" / "prio-basic"
SUBMIT = dt.datetime(2026, 12, 5, 17, 50, 6, tzinfo=dt.UTC)
SECOND = dt.timedelta(seconds=1)
FORMAT = "%i|%j|%T|%Q|%r"
#: prio-basic.sh's four sbatch calls, after its $SB (-A physics -p batch -o /dev/null)
SUBMITTED = ["-n 64 -J all --wrap 'sleep 120'", "-n 16 -J two --wrap 'sleep 60'",
             "-n 1 --nice=100 -J nice --wrap 'sleep 60'", "-H -n 1 -J held --wrap 'sleep 60'"]


def recorded(name: str) -> str:
    return (REAL / f"{name}.txt").read_text()


def _sbatch(cluster, args: str, now: dt.datetime) -> None:
    argv = ("--chdir", "/tmp", "-A", "physics", "-p", "batch", "-o", "/dev/null", *shlex.split(args))
    job_submit(cluster=cluster, user=get_user_model().objects.get(username="alice"),
               submission=Submission(argv=argv, alloc_node="localhost"), now=now)


@pytest.fixture
def submitted(cast, now):
    """The harness's cluster under priority/basic with prio-basic.sh's jobs 1-4, before any pass."""
    cluster, _ = harness_cluster(cast, now, PriorityType="priority/basic")
    for args in SUBMITTED:
        _sbatch(cluster, args, SUBMIT)
    return cluster


def _columns(text: str, count: int) -> list[str]:
    """Each line's first ``count`` |-separated columns."""
    return ["|".join(line.split("|")[:count]) for line in text.splitlines()]


def test_each_job_has_its_fifo_priority_as_sbatch_returns(submitted):
    """squeue before any pass: the priorities (and the order they give) of submit.txt. Its REASON is
    the scheduler's, which trainhub's pass gives (slurmctld had already tried job 1)."""
    shown = reports.squeue(submitted, now=SUBMIT, format=FORMAT).text
    assert _columns(shown, 4) == _columns(recorded("submit").split("JOBID", 1)[1].join(["JOBID", ""]), 4)[:5]
    for job_id in (2, 3):
        text = reports.scontrol_jobs(submitted, now=SUBMIT, job=str(job_id)).text
        assert text.split("\n")[2].split(" Account=")[0].strip() in recorded("submit")


def test_the_pass_keeps_them_and_sprio_refuses(submitted):
    run_pass(submitted, SUBMIT + SECOND)
    moment = SUBMIT + 3 * SECOND
    assert reports.squeue(submitted, now=moment, format=FORMAT).text == recorded("squeue")
    assert reports.sprio(submitted, now=moment).text == (REAL / "sprio.err").read_text().rsplit("rc=", 1)[0]


def test_a_released_job_and_a_later_one_take_the_next_values(submitted, cast):
    run_pass(submitted, SUBMIT + SECOND)
    moment = SUBMIT + 4 * SECOND
    job_release(job=SlurmJob.objects.get(cluster=submitted, job_id=4), actor=cast["alice"], is_admin=False, now=moment)
    run_pass(submitted, moment)
    assert reports.squeue(submitted, now=moment, format=FORMAT).text == recorded("squeue-released")
    _sbatch(submitted, "-n 1 -J five --wrap 'sleep 60'", moment)
    # REASON: slurmctld's job_allocate already gave job 5 Priority; trainhub's next pass does
    assert _columns(reports.squeue(submitted, now=moment, format=FORMAT).text, 4) == _columns(recorded("squeue-5"), 4)
