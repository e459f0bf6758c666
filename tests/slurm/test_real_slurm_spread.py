"""trainhub replays fixtures/22.05/spread.sh (``-n N`` without ``-N`` where the free CPUs are spread
over the nodes, recorded on a fresh slurm-harness cluster) and places the tasks as Slurm 22.05.8 did
(cons_tres ``_eval_nodes``: scheduler.TaskSpread.place):

A. gpu[1-3] 10 CPUs free each, gpu4 none: ``-n 24`` runs on three nodes (10, 10, 4), then ``-n 5`` on gpu3.
B. 8 CPUs free everywhere: ``-n 20 --gres=gpu:2`` runs on gpu[1-3] (8, 8, 4), then ``-n 10 --gres=gpu:1``
   on gpu[3-4] (4, 6).
C. 2, 12, 5 and 9 CPUs free: ``-n 20`` takes all four nodes in order (2, 12, 5, 1), not gpu2 and gpu4.
D. 10, 0, 3 and 3 CPUs free: ``-n 5`` takes gpu[3-4] (3, 2), the smaller set that holds it, not gpu1.

Each job is submitted at its SubmitTime and scheduled at its StartTime (scontrol's), one at a time as
on the harness; squeue's order (its start-time sort) compares byte for byte.
"""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path

import pytest

from trainhub.slurm import reports
from trainhub.slurm.hostlist import expand
from trainhub.slurm.models import JobNode

from .conftest import run_pass
from .test_real_slurm import harness_cluster
from .test_real_slurm_sched import Replay

REAL = Path(__file__).parent / "fixtures" / "22.05" / "spread"
PHASES = {"a": range(1, 7), "b": range(7, 13), "c": range(13, 19), "d": range(19, 25)}
#: scontrol show job's lines of where a job runs.
PLACEMENT = re.compile(r"^ {3}(NodeList=.*|NumNodes=.*|TRES=.*)$", re.MULTILINE)


def real(name: str) -> str:
    return (REAL / f"{name}.txt").read_text()


def recorded_time(text: str, field: str) -> dt.datetime:
    clock = re.search(rf"\b{field}=(\S+)", text).group(1)
    return dt.datetime.fromisoformat(clock).replace(tzinfo=dt.UTC)


@pytest.fixture
def replay(cast, now):
    cluster, _ = harness_cluster(cast, now)
    return Replay(cluster, cast, "spread.sh")


def run_phase(replay: Replay, phase: str) -> dt.datetime:
    """The phase's jobs submitted and started at the recording's times; returns the time squeue ran."""
    moment = None
    for job_id in PHASES[phase]:
        shown = real(f"{phase}-scontrol-{job_id}")
        assert replay.sbatch(f"sbatch-{job_id}", recorded_time(shown, "SubmitTime")) == real(f"sbatch-{job_id}")
        moment = recorded_time(shown, "StartTime")
        run_pass(replay.cluster, moment)
    return moment + 2 * dt.timedelta(seconds=1)


@pytest.mark.parametrize("phase", PHASES)
def test_n_tasks_take_the_nodes_slurm_gives_them(replay, phase):
    for earlier in PHASES:
        if earlier == phase:
            break
        replay.clear(run_phase(replay, earlier))
    moment = run_phase(replay, phase)
    assert replay.squeue(moment, format="%i %T %N %C %D") == real(f"{phase}-squeue")
    for job_id in PHASES[phase]:
        shown = reports.scontrol_jobs(replay.cluster, now=moment, job=str(job_id)).text
        assert PLACEMENT.findall(shown) == PLACEMENT.findall(real(f"{phase}-scontrol-{job_id}")), job_id
        tasks = dict(JobNode.objects.filter(job__cluster=replay.cluster, job__job_id=job_id)
                     .values_list("node__name", "cpus"))
        assert tasks == _recorded_cpus(real(f"{phase}-scontrol-d-{job_id}")), job_id


def _recorded_cpus(text: str) -> dict[str, int]:
    """scontrol -d's ``Nodes=gpu[1-2] CPU_IDs=6-15`` lines: CPUs per node."""
    cpus = {}
    for nodes, ids in re.findall(r"Nodes=(\S+) CPU_IDs=(\S+)", text):
        ranges = [part.partition("-") for part in ids.split(",")]
        cpus.update(dict.fromkeys(expand(nodes), sum(int(end or start) - int(start) + 1 for start, _, end in ranges)))
    return cpus
