"""trainhub replays fixtures/22.05/prio-held.sh: under PriorityType=priority/basic slurmctld counts its
FIFO priority down only for the jobs it gives one (_set_job_prio's lowest_prio): a job held at
submission takes none (priority 0), the next job takes the value it would have, and its release takes
the next one then (set_job_prio), as a later job does after it. A nice lowers the job's own value only.

The recording: job 1 (-n 64) runs; sbatch -H (2), sbatch (3), release 2, sbatch (4), sbatch -H (5),
sbatch --nice=10 (6), release 5; squeue %Q after each step.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from trainhub.slurm import reports
from trainhub.slurm.models import SlurmCluster, SlurmJob
from trainhub.slurm.services.jobs import job_release

from .conftest import run_pass
from .test_real_slurm import harness_cluster
from .test_real_slurm_prio_basic import _sbatch

REAL = Path(__file__).parent / "fixtures" / "22.05" / "prio-held"
FIRST = dt.datetime(2026, 12, 5, 21, 4, 33, tzinfo=dt.UTC)
SECOND = dt.timedelta(seconds=1)
FORMAT = "%i|%j|%T|%Q"
#: The recording's steps in order: an sbatch (after prio-held.sh's $SB), a release of a job id,
#: or the squeue recorded after them.
STEPS = ["-n 64 -J all --wrap 'sleep 120'", "-H -n 1 -J held --wrap 'sleep 60'", "-n 1 -J three --wrap 'sleep 60'",
         "squeue-3", 2, "squeue-released", "-n 1 -J four --wrap 'sleep 60'", "squeue-4",
         "-H -n 1 -J held2 --wrap 'sleep 60'", "-n 1 --nice=10 -J nice --wrap 'sleep 60'", 5, "squeue-end"]


def recorded(name: str) -> str:
    return (REAL / f"{name}.txt").read_text()


@pytest.fixture
def cluster(cast, now):
    cluster, _ = harness_cluster(cast, now, PriorityType="priority/basic")
    return cluster


def test_a_held_job_takes_no_fifo_value_and_its_release_takes_the_next(cluster, cast):
    shown = {}
    for index, step in enumerate(STEPS):
        moment = FIRST + index * SECOND
        if isinstance(step, int):
            job_release(job=SlurmJob.objects.get(cluster=cluster, job_id=step), actor=cast["alice"], is_admin=False,
                        now=moment)
        elif step.startswith("squeue"):
            shown[step] = reports.squeue(cluster, now=moment, format=FORMAT).text
            continue
        else:
            _sbatch(cluster, step, moment)
        run_pass(cluster, moment)
    assert shown == {name: recorded(name) for name in shown}
    text = reports.scontrol_jobs(cluster, now=FIRST + len(STEPS) * SECOND, job="2").text
    assert text.split("\n")[2] == recorded("scontrol-2").split("\n")[2]


def test_a_release_takes_its_value_before_any_pass(cluster, cast):
    """squeue-released: the released job shows its new value at once (slurmctld sets it as it releases)."""
    for index, step in enumerate(STEPS[:3]):
        _sbatch(cluster, step, FIRST + index * SECOND)
    job = job_release(job=SlurmJob.objects.get(cluster=cluster, job_id=2), actor=cast["alice"], is_admin=False,
                      now=FIRST + 4 * SECOND)
    assert (job.priority, SlurmJob.objects.get(pk=job.pk).priority) == (0xFFFF0000 - 3, 0xFFFF0000 - 3)
    assert SlurmCluster.objects.get(pk=cluster.pk).fifo_priorities == 3


def test_without_priority_basic_the_countdown_stays(cast, now):
    """priority/multifactor's jobs take no FIFO value (their priority comes from the factors)."""
    cluster, _ = harness_cluster(cast, now)
    _sbatch(cluster, STEPS[0], now)
    assert SlurmCluster.objects.get(pk=cluster.pk).fifo_priorities == 0
    assert SlurmJob.objects.get(cluster=cluster).fifo_priority == 0
