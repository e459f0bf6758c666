"""trainhub replays fixtures/22.05/weight-required.sh (slurm.conf ``Weight=10, 30, 30, 30`` for gpu1..gpu4,
recorded on a fresh slurm-harness cluster of 4 nodes x 16 CPUs x 8 GPUs): a job's nodes beside its -w
nodes come weight by weight, lowest first, each weight's from the run of its nodes holding the -w node,
working up then down from it (scheduler._Pass._around_required).

The recording's clock: the three sbatch at 18:42:06, slurmctld's main scheduler started them all at
18:42:07; squeue and scontrol three seconds later (scontrol's RunTime).
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from trainhub.slurm import reports
from trainhub.slurm.models import JobNode

from .test_real_slurm import scontrol_differences
from .test_real_slurm_weight import replay_submissions

REAL = Path(__file__).parent / "fixtures" / "22.05" / "weight-required"
SUBMIT = dt.datetime(2026, 12, 5, 18, 42, 6, tzinfo=dt.UTC)
SECOND = dt.timedelta(seconds=1)
MAIN_RUN = SUBMIT + SECOND
#: The recording's $WORK (its sbatch's working directory).
WORK = "/tmp/weight-required-scenario.9RI67n"
WEIGHTS = {"gpu1": 10, "gpu2": 30, "gpu3": 30, "gpu4": 30}


def real(name: str) -> str:
    return (REAL / f"{name}.txt").read_text()


@pytest.fixture
def replay(cast, now):
    cluster, printed = replay_submissions(cast, now, REAL, submit=SUBMIT, work=WORK, weights=WEIGHTS)
    return cluster, printed, MAIN_RUN + 3 * SECOND


def test_w_jobs_get_the_lighter_neighbours_of_their_nodes_first(replay):
    """squeue-o: ``-N2 -w gpu2`` on gpu[1-2] (gpu1, of weight 10, beside gpu2), ``-N2 -w gpu3`` on
    gpu[3-4] (no weight-10 node beside gpu3), ``-n 40 -w gpu2`` on gpu[1-3]."""
    cluster, printed, moment = replay
    assert printed == {name: real(name) for name in printed}
    assert reports.squeue(cluster, now=moment, format="%i|%j|%T|%D|%C|%b|%N|%r").text == real("squeue-o")


def test_n_tasks_with_w_take_the_lighter_neighbour_before_the_next_weight(replay):
    """scontrol-d-3: 15 CPUs each on gpu1 and gpu2 (beside jobs 1 and 2), then 10 on gpu3."""
    cluster, _, _ = replay
    cpus = dict(JobNode.objects.filter(job__cluster=cluster, job__job_id=3).values_list("node__name", "cpus"))
    assert cpus == {"gpu1": 15, "gpu2": 15, "gpu3": 10}


def test_scontrol_show_job_prints_what_it_printed(replay):
    cluster, _, moment = replay
    shown = {f"scontrol-{job_id}": reports.scontrol_jobs(cluster, now=moment, job=str(job_id)).text
             for job_id in range(1, 4)}
    assert scontrol_differences(shown, REAL) == {}
