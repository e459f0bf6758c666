"""trainhub replays fixtures/22.05/start-passed.sh: jobs 1-4 fill the four nodes with -t 1 (started
14:46:34, limit 14:47:34), job 5 waits and a backfill iteration plans it at 14:47:34. slurmctld stopped
1-4 only at its time-limit check at 14:47:58, so for 24 s job 5's expected start lay in the past:
squeue --start, squeue's %S and %e, and scontrol's StartTime and EndTime show it starting now
(reports.expected_start_shown). The replay runs no pass after the plan, as slurmctld started none.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model

from trainhub.slurm import reports
from trainhub.slurm.models import SlurmCluster
from trainhub.slurm.services.jobs import Submission, job_submit

from .conftest import run_pass
from .test_real_slurm import harness_cluster

REAL = Path(__file__).parent / "fixtures" / "22.05" / "start-passed"
SQ = "%i|%T|%S|%e|%r|%N"
SB = ("-A", "physics", "-p", "batch", "-o", "/dev/null", "--wrap", "sleep 900")


def at(clock: str) -> dt.datetime:
    return dt.datetime.fromisoformat(f"2026-12-05T{clock}+00:00")


def real(name: str) -> str:
    return (REAL / f"{name}.txt").read_text()


@pytest.fixture
def planned(cast, now):
    cluster, _ = harness_cluster(cast, now)
    SlurmCluster.objects.filter(pk=cluster.pk).update(last_backfill_time=at("14:46:28"))
    alice = get_user_model().objects.get(username="alice")
    for n in range(1, 5):
        job_submit(cluster=cluster, user=alice, now=at("14:46:34"),
                   submission=Submission(argv=(*SB, "-w", f"gpu{n}", "-n", "16", "-t", "1", "-J", f"full{n}")))
    job_submit(cluster=cluster, user=alice, now=at("14:46:34"),
               submission=Submission(argv=(*SB, "-n", "16", "-t", "5", "-J", "next")))
    run_pass(cluster, at("14:46:34"))
    run_pass(cluster, at("14:46:58"))  # the backfill iteration that plans job 5
    return cluster


#: Every sample but t10's (14:48:00), taken after slurmctld had stopped jobs 1-4 and started job 5.
@pytest.mark.parametrize("sample", ["planned", *(f"t{n}" for n in range(1, 10))])
def test_an_expected_start_that_has_passed_shows_as_now(planned, sample):
    moment = dt.datetime.fromisoformat(real(f"{sample}-date").strip() + "+00:00")
    assert reports.squeue(planned, now=moment, start=True).text == real(f"{sample}-squeue-start")
    assert reports.squeue(planned, now=moment, format=SQ).text == real(f"{sample}-squeue-o")
    shown = reports.scontrol_jobs(planned, now=moment, job="5").text
    times = next(line for line in real(f"{sample}-scontrol-5").splitlines() if "StartTime=" in line)
    assert times in shown.splitlines()
