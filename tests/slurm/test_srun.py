"""srun inside a batch script: one job step across the allocation, every task on its node with
Slurm's step environment, output into the job's file (``N: `` labels with -l), the worst task's
exit as srun's, steps in sacct; cancelling the job stops every task on every node.

The agents run in process (tests.agent.harness); the batch script, srun and the tasks are real
processes, and srun reaches the control plane over HTTP (a live server)."""

from pathlib import Path

import pytest

from tests.agent.harness import agents_on
from tests.slurm.conftest import make_job, nodes_done, run_until, start_job
from trainhub.slurm.models import JobState, JobStep

pytestmark = pytest.mark.django_db(transaction=True)


def output(tmp_path, job):
    return (tmp_path / "slurm" / "c1" / "home" / "uma" / f"slurm-{job.job_id}.out").read_text().splitlines()


def run_job(cluster, tmp_path, live_server, now, script, **fields):
    job = make_job(cluster, script=script, now=now, **fields)
    start_job(job, ["a4-0", "a4-1"][:job.num_nodes], now=now)
    agents = agents_on(tmp_path, srun_url=live_server.url)
    run_until(agents, job, now, nodes_done)
    return job


FIXTURES = Path(__file__).parent / "fixtures" / "22.05" / "srun"
#: The batch script of job 1 of fixtures/22.05/srun.sh.
STEPS = (FIXTURES / "job1.sh").read_text()


def test_srun_runs_one_task_per_slot_on_every_node_of_the_allocation(cluster, real_pools, now, tmp_path,
                                                                      live_server):
    """fixtures/22.05/srun/out-1.txt, the same script on real Slurm (nodes gpu1, gpu2 there)."""
    job = run_job(cluster, tmp_path, live_server, now, STEPS, name="steps", num_nodes=2, num_tasks=4,
                  gpus_per_node=2)
    assert output(tmp_path, job) == [
        "batch on a4-0",
        "0: a4-0 0 0 0 0 a4-[0-1] 4",
        "1: a4-0 1 1 0 0 a4-[0-1] 4",
        "2: a4-1 2 0 1 0 a4-[0-1] 4",
        "3: a4-1 3 1 1 0 a4-[0-1] 4",
        "step 0 rc=0",
        "failing on a4-0",
        "srun: error: a4-0: task 0: Exited with exit code 3",
        "step 1 rc=3",
        "0 a4-0 gpus=0 cuda=0",
        "1 a4-0 gpus=0 cuda=0",
        "2 a4-1 gpus=0 cuda=0",
        "step 2 rc=0",
    ]
    assert job.state == JobState.COMPLETED
    steps = [(s.step_id, s.name, s.state, s.exit_code, s.num_tasks, s.node_list) for s in JobStep.objects.order_by("step_id")]
    assert steps == [(0, "sh", "COMPLETED", 0, 4, "a4-[0-1]"), (1, "sh", "FAILED", 3, 1, "a4-0"),
                     (2, "sh", "COMPLETED", 0, 3, "a4-[0-1]")]
