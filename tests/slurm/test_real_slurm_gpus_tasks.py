"""trainhub replays fixtures/22.05/gpus-tasks.sh: -n with --gpus and no -N. The tasks place the job
(scheduler.TaskSpread) and --gpus's count is the job's GPUs in all, shared over the nodes the tasks took
in node order (scheduler.share_gpus_per_job), not one GPU on each: ``-n 20 --gpus=4`` runs 16 tasks with 3
GPUs on gpu1 and 4 with 1 on gpu2, ``-n 4 --gpus=4`` 4 tasks with 4 GPUs on gpu2.

The recording's clock: both sbatch at 18:43:07, slurmctld's main scheduler started them at 18:43:08;
squeue and scontrol three seconds later.
"""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path

import pytest

from trainhub.slurm import hostlist, reports
from trainhub.slurm.models import JobNode

from .test_real_slurm_weight import replay_submissions

REAL = Path(__file__).parent / "fixtures" / "22.05" / "gpus-tasks"
SUBMIT = dt.datetime(2026, 12, 5, 18, 43, 7, tzinfo=dt.UTC)
SECOND = dt.timedelta(seconds=1)
WORK = "/tmp/gpus-tasks-scenario.JfkBnw"


def real(name: str) -> str:
    return (REAL / f"{name}.txt").read_text()


@pytest.fixture
def replayed(cast, now):
    cluster, _ = replay_submissions(cast, now, REAL, submit=SUBMIT, work=WORK)
    return cluster


def test_the_jobs_run_where_slurm_ran_them(replayed):
    shown = reports.squeue(replayed, now=SUBMIT + 4 * SECOND, format="%i|%j|%T|%D|%C|%b|%N|%r").text
    assert shown == real("squeue-o")


@pytest.mark.parametrize("job_id", [1, 2])
def test_each_node_gets_the_tasks_and_the_gpus_slurm_gave(replayed, job_id):
    """scontrol-d-N's ``Nodes=gpu1 CPU_IDs=0-15 Mem=0 GRES=gpu:3(IDX:0-2)``: each node's CPUs and GPUs."""
    recorded = {}
    for nodes, cpu_ids, count, gpu_ids in re.findall(r"^\s+Nodes=(\S+) CPU_IDs=(\S+) Mem=0 GRES=gpu:(\d+)\(IDX:(\S+)\)",
                                                     real(f"scontrol-d-{job_id}"), re.M):
        for node in hostlist.expand(nodes):
            recorded[node] = (len(hostlist.expand(f"x[{cpu_ids}]")), int(count), hostlist.expand(f"x[{gpu_ids}]"))
    job_nodes = JobNode.objects.filter(job__cluster=replayed, job__job_id=job_id).select_related("node")
    assert {node.node.name: (node.cpus, len(node.gpu_indices), [f"x{index}" for index in node.gpu_indices])
            for node in job_nodes} == recorded
