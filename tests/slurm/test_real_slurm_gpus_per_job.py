"""trainhub replays fixtures/22.05/gpus-per-job.sh: --gpus (GPUs per job) over several nodes that other jobs
partly use. cons_tres gives every node at least one GPU and, in node order, each node as many as it has
free leaving one for each node after it, the count in all; it takes the nodes with more free GPUs first.
Where the GPUs went shows in scontrol, squeue, sacct and inside the jobs (srun's SLURM_STEP_GPUS per node).

The recording: job 1 (-w gpu1 --gres=gpu:6) and 2 (-w gpu2 --gres=gpu:3) leave gpu1 2 free GPUs and gpu2 5;
then -N 3 --gpus=10 (3: gpu2 5, gpu3 4, gpu4 1), -N 3 --gpus=4 (4: gpu1 2, gpu3 1, gpu4 1), -N 2 --gpus=5
(5: gpu3 3, gpu4 2) and again -N 2 --gpus=5 (6), which pends: only gpu4 has GPUs left.
"""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model

from trainhub.slurm import reports
from trainhub.slurm.formats import sacct_text, squeue_long_format
from trainhub.slurm.models import JobNode, NodePhase, SlurmJob
from trainhub.slurm.services.jobs import Submission, job_submit, submitted_message
from trainhub.slurm.services.steps import step_create
from trainhub.slurm.steps import StepRequest

from .conftest import run_pass
from .test_real_slurm import harness_cluster, scontrol_differences
from .test_real_slurm_gputype import _as_trainhubs
from .test_real_slurm_ntasks import batch_environment, sbatch_lines

REAL = Path(__file__).parent / "fixtures" / "22.05" / "gpus-per-job"
WORK = "/tmp/gpus-per-job.hngZP1"
SECOND = dt.timedelta(seconds=1)
FIRST = dt.datetime(2026, 12, 5, 17, 54, 55, tzinfo=dt.UTC)
#: The recording in order, in seconds after FIRST: a job's submission (its id) or a scheduler pass (None),
#: each job submitted once the one before runs (scontrol-N: SubmitTime, StartTime; 6 tried at 17:55:07).
EVENTS = [(0, 1), (0, None), (2, 2), (3, None), (4, 3), (6, None), (6, 4), (8, 5), (9, None), (10, 6), (12, None)]
JOBS = [job_id for _, job_id in EVENTS if job_id]
SHOWN = FIRST + 15 * SECOND


def real(name: str) -> str:
    return (REAL / f"{name}.txt").read_text()


@pytest.fixture
def replayed(cast, now):
    cluster, _ = harness_cluster(cast, now)
    carol = get_user_model().objects.get(username="carol")
    script = (REAL / "job.sh").read_text()
    printed = {}
    lines = iter(sbatch_lines(REAL))
    for second, job_id in EVENTS:
        if job_id is None:
            run_pass(cluster, FIRST + second * SECOND)
            continue
        name, args = next(lines)
        argv = ("-A", "bio", "-p", "batch", "-o", f"{WORK}/out-%j.txt", *args)
        job = job_submit(cluster=cluster, user=carol, now=FIRST + second * SECOND, submission=Submission(
            argv=argv, script=script, script_path=f"{WORK}/job.sh", alloc_node="localhost", submit_dir=WORK))
        printed[name] = submitted_message(job, Submission(argv=argv)) + "\n"
    return cluster, printed


def test_sbatch_accepts_every_job(replayed):
    _, printed = replayed
    assert printed == {name: real(name) for name, _ in sbatch_lines(REAL)}


def test_scontrol_shows_each_jobs_nodes_and_gpus_as_slurm_does(replayed):
    cluster, _ = replayed
    shown = {f"scontrol-{job_id}": reports.scontrol_jobs(cluster, now=SHOWN, job=str(job_id)).text
             for job_id in JOBS}
    assert scontrol_differences(shown, REAL) == {}


def test_squeue_and_sacct_show_the_nodes_and_the_gpus_in_all_as_slurm_does(replayed):
    cluster, _ = replayed
    assert reports.squeue(cluster, now=SHOWN, format="%i|%T|%D|%C|%b|%N|%r").text == real("squeue")
    shown = reports.squeue(cluster, now=SHOWN, format=squeue_long_format("JobID:6,tres-per-job:22,tres-alloc:60")).text
    assert shown == _as_trainhubs(real("squeue-O"), cluster)
    fields = ["JobID", "State", "ReqTRES", "AllocTRES"]
    records = reports.sacct(cluster, now=SHOWN, viewer="root", all_users=True, allocations=True, fields=fields).items
    shown = sacct_text([record for record, _ in records], fields=fields, parsable="plain")
    assert shown == _as_trainhubs(real("sacct"), cluster)


@pytest.mark.parametrize("job_id", [3, 4, 5])
def test_each_node_and_srun_there_get_the_gpus_slurm_gave(replayed, job_id):
    """The GPUs of each node (out-N.txt's srun lines ``NODEID: NODE NODEID gpus=INDICES on=COUNT``), the
    lowest its earlier jobs left free (3: gpu2's 3-7 beside job 2's 0-2), for the job's nodes and an
    srun over them."""
    cluster, _ = replayed
    recorded = {}
    for line in real(f"out-{job_id}").splitlines():
        if ": gpu" in line:
            _, node, _, gpus, on = line.split()
            recorded[node] = [int(index) for index in gpus.removeprefix("gpus=").split(",")]
            assert len(recorded[node]) == int(on.removeprefix("on="))
    job = SlurmJob.objects.get(cluster=cluster, job_id=job_id)
    job_nodes = JobNode.objects.filter(job=job).select_related("node")
    assert {node.node.name: node.gpu_indices for node in job_nodes} == recorded
    job_nodes.update(phase=NodePhase.RUNNING)
    step = step_create(job=job, run_index=0, argv=["sh"], environment={}, request=StepRequest(), label=True, now=SHOWN)
    assert {node.job_node.node.name: node.gpu_indices
            for node in step.step_nodes.select_related("job_node__node")} == recorded


@pytest.mark.parametrize("job_id", [1, 2, 3, 4, 5])
def test_the_batch_script_sees_its_nodes_gpus_as_slurm_gives_them(replayed, job_id):
    """job.sh's variables (out-N.txt): its node's GPUs, and with --gpus SLURM_GPUS, the job's count."""
    cluster, _ = replayed
    recorded = dict(line.split("=", 1) for line in real(f"out-{job_id}").splitlines()
                    if re.match(r"[A-Z_]+=", line))
    environment = batch_environment(SlurmJob.objects.get(cluster=cluster, job_id=job_id))
    assert {name: environment.get(name) for name in recorded} == recorded
    assert ("SLURM_GPUS" in recorded) == (job_id > 2)
