"""trainhub replays fixtures/22.05/ntasks-per-node.sh (``--ntasks-per-node`` with and without ``-n``,
recorded on a fresh slurm-harness cluster of 4 nodes x 16 CPUs x 8 GPUs) and prints what Slurm printed.

The recording's clock: the four sbatch at 14:34:50, the main scheduler's run at 14:34:52 (batch_sched_delay
after its last), no backfill iteration before the squeue and scontrol recordings at 14:34:54 (RunTime 2 s).
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model

from trainhub.slurm import formats, reports
from trainhub.slurm.models import JobNode, SlurmCluster, SlurmJob
from trainhub.slurm.services.jobs import Submission, job_submit, submitted_message
from trainhub.slurm.services.lifecycle import (
    job_batch_finished,
    job_node_epilog_finished,
)

from .conftest import run_pass
from .test_real_slurm import harness, scontrol_differences  # noqa: F401 (a fixture)
from .test_real_slurm_ntasks import (ENV_NAMES, assert_srun_layout, batch_environment, recorded_environment,
                                     sbatch_lines)

REAL = Path(__file__).parent / "fixtures" / "22.05" / "ntasks-per-node"
SUBMITTED = dt.datetime(2026, 12, 5, 14, 34, 50, tzinfo=dt.UTC)
SECOND = dt.timedelta(seconds=1)
#: The recording's $WORK (its sbatch's working directory, -o $WORK/out-%j.txt).
WORK = "/tmp/ntasks-per-node.k211ii"


def real(name: str) -> str:
    return (REAL / f"{name}.txt").read_text()


@pytest.fixture
def replay(harness):
    cluster, _ = harness
    alice = get_user_model().objects.get(username="alice")
    # the harness had started less than bf_interval before: no backfill iteration in the recording
    SlurmCluster.objects.filter(pk=cluster.pk).update(last_backfill_time=SUBMITTED - 10 * SECOND)
    printed = {}
    for name, args in sbatch_lines(REAL):
        argv = ("-A", "physics", "-p", "batch", "-o", f"{WORK}/out-%j.txt", "--chdir", WORK, *args)
        submission = Submission(argv=argv, script=(REAL.parent / "ntasks" / "job.sh").read_text(),
                                script_path=f"{WORK}/job.sh", alloc_node="localhost")
        job = job_submit(cluster=cluster, user=alice, submission=submission, now=SUBMITTED)
        printed[name] = submitted_message(job, Submission(argv=argv)) + "\n"
    run_pass(cluster, SUBMITTED + 2 * SECOND)
    return cluster, printed, SUBMITTED + 4 * SECOND


def test_sbatch_takes_ntasks_per_node_as_slurm(replay):
    _, printed, _ = replay
    assert printed == {name: real(name) for name in printed}


def test_squeue_shows_the_nodes_and_cpus_ntasks_per_node_gets(replay):
    """``-n 20 --ntasks-per-node=8`` runs on 3 nodes of 8 CPUs (24); ``-n 12 --ntasks-per-node=6 -c 2``
    needs 2 nodes with 12 CPUs free and waits (Resources), ``-n 4 --ntasks-per-node=16`` behind it."""
    cluster, _, moment = replay
    assert reports.squeue(cluster, now=moment, format="%i|%j|%T|%D|%C|%N|%r").text == real("squeue-o")


def test_squeue_numtasks_of_a_running_job_is_what_its_cpus_hold_as_scontrols(replay):
    """squeue -O NumTasks prints the num_tasks scontrol's NumTasks shows (both read pack_job's): for ``-n 20
    --ntasks-per-node=8`` running on 3 x 8 CPUs 24, not -n's 20 (fixtures/22.05/review-records/squeue-O.txt,
    the same job as this recording's job 1, named pn8 there)."""
    cluster, _, moment = replay
    fields = "JobID,Name,State,NumTasks,NumNodes,NumCPUs,Reason"
    shown = reports.squeue(cluster, now=moment, jobs="1", format=formats.squeue_long_format(fields)).text
    recorded = (REAL.parent / "review-records" / "squeue-O.txt").read_text()
    assert shown.replace("n20pn8", "pn8   ") == recorded


def test_scontrol_show_job_prints_what_it_printed(replay):
    """NtasksPerN:B:S:C, MinCPUsNode (--cpus-per-task x --ntasks-per-node) and, running, NumTasks as the
    CPUs hold (24 for ``-n 20`` on 3 x 8 CPUs)."""
    cluster, _, moment = replay
    shown = {f"scontrol-{job_id}": reports.scontrol_jobs(cluster, now=moment, job=str(job_id)).text
             for job_id in range(1, 5)}
    assert scontrol_differences(shown, REAL) == {}


def _assert_environment(cluster, job_id: int) -> None:
    recorded = recorded_environment(REAL, job_id)
    environment = batch_environment(SlurmJob.objects.get(cluster=cluster, job_id=job_id))
    assert {name: environment[name] for name in ENV_NAMES + ("SLURM_NTASKS_PER_NODE",) if name in recorded} == (
        {name: recorded[name] for name in ENV_NAMES + ("SLURM_NTASKS_PER_NODE",) if name in recorded}), job_id


@pytest.mark.parametrize("job_id", [1, 2])
def test_the_batch_script_sees_slurms_task_layout(replay, job_id):
    """out-1.txt: SLURM_TASKS_PER_NODE=8(x3) for 20 tasks, SLURM_NTASKS_PER_NODE=8."""
    cluster, _, _ = replay
    _assert_environment(cluster, job_id)


def test_srun_inside_spreads_the_tasks_over_the_nodes(replay):
    """out-1.txt: srun in the batch script runs its 20 tasks 7,7,6 (it ignores --ntasks-per-node=8)."""
    cluster, _, moment = replay
    assert_srun_layout(SlurmJob.objects.get(cluster=cluster, job_id=1), real("out-1"), moment)


def test_the_waiting_jobs_get_whole_ntasks_per_node_cpus(replay):
    """Once jobs 1 and 2 end, job 3 runs 6,6 on gpu[1-2] with 12 CPUs each and job 4 (4 tasks) gets
    gpu3's 16 CPUs: SLURM_TASKS_PER_NODE=16 (out-3.txt, out-4.txt)."""
    cluster, _, moment = replay
    for job_node in JobNode.objects.filter(job__cluster=cluster, job__job_id__in=[1, 2]):
        job_batch_finished(job_node=job_node, exit_code=0, signal=0, max_rss_kb=None, now=moment)
        job_node_epilog_finished(job_node=JobNode.objects.get(pk=job_node.pk), exit_code=0, now=moment)
    run_pass(cluster, moment + SECOND)
    for job_id in (3, 4):
        _assert_environment(cluster, job_id)
