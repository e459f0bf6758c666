"""trainhub replays fixtures/22.05/gpu-env.sh: the GPU variables a batch script sees for each way of
asking GPUs on an idle gpu1 (env-NAME.txt): --gpus-per-task's SLURM_GPUS_PER_TASK, --gpus-per-node's
SLURM_GPUS_PER_NODE, -G's SLURM_GPUS and none of them for --gres=gpu:2; and the jobs, submitted as
``sbatch ./gpu.env.sh`` without -J, named after the script file (squeue-j.txt)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model

from trainhub.slurm import reports
from trainhub.slurm.models import SlurmJob
from trainhub.slurm.services.jobs import Submission, job_submit, submitted_message

from .conftest import run_pass
from .test_real_slurm import harness_cluster
from .test_real_slurm_ntasks import batch_environment

REAL = Path(__file__).parent / "fixtures" / "22.05" / "gpu-env"
WORK = "/tmp/gpu-env.recorded"
#: sbatch's options of each recorded job, in submission order (gpu-env.sh).
JOBS = {"per-task": ("-n", "2", "--gpus-per-task=1"), "per-node": ("--gpus-per-node=2",),
        "gres": ("--gres=gpu:2",), "gpus": ("-G", "2")}
NOW = dt.datetime(2026, 12, 5, 19, 5, tzinfo=dt.UTC)


def real(name: str) -> str:
    return (REAL / f"{name}.txt").read_text()


@pytest.fixture
def replayed(cast):
    cluster, _ = harness_cluster(cast, NOW)
    alice = get_user_model().objects.get(username="alice")
    script = "#!/bin/bash\nenv | grep -E \"^(SLURM_GPU|SLURM_JOB_GPUS|CUDA_VISIBLE_DEVICES)\" | sort\n"
    jobs, printed = {}, {}
    for name, options in JOBS.items():
        argv = ("-A", "physics", "-p", "batch", *options)
        jobs[name] = job_submit(cluster=cluster, user=alice, now=NOW, submission=Submission(
            argv=argv, script=script, script_path=f"{WORK}/gpu.env.sh", submit_dir=WORK))
        printed[name] = submitted_message(jobs[name], Submission(argv=argv)) + "\n"
    run_pass(cluster, NOW)
    return cluster, jobs, printed


def test_the_jobs_are_accepted_and_named_after_their_script(replayed):
    cluster, _, printed = replayed
    assert printed == {name: real(f"sbatch-{name}") for name in JOBS}
    shown = reports.squeue(cluster, now=NOW, format="%i|%j").text.splitlines()[1:]  # squeue -h: no header
    # the recording's jobs had ended by then (--states=all lists them in its own order): names compared
    assert sorted(shown) == sorted(real("squeue-j").splitlines())


@pytest.mark.parametrize("name", list(JOBS))
def test_the_batch_script_sees_the_gpu_variables_slurm_sets(replayed, name):
    _, jobs, _ = replayed
    environment = batch_environment(SlurmJob.objects.get(pk=jobs[name].pk))
    shown = "".join(f"{key}={value}\n" for key, value in sorted(environment.items())
                    if key.startswith(("SLURM_GPU", "SLURM_JOB_GPUS", "CUDA_VISIBLE_DEVICES")))
    assert shown == real(f"env-{name}")


@pytest.mark.parametrize("name", list(JOBS))
def test_sallocs_command_sees_the_same_gpu_variables(cast, name, monkeypatch):
    """salloc-NAME.txt: salloc gives its command the variables sbatch gives a batch script; the CLI
    reads the counts from the job trainhub answers with."""
    from trainhub.cli.salloc import command_environment
    from trainhub.slurm.render import render_job

    for variable in ("SLURM_GPUS", "SLURM_GPUS_PER_NODE", "SLURM_GPUS_PER_TASK"):
        monkeypatch.delenv(variable, raising=False)
    cluster, _ = harness_cluster(cast, NOW)
    job = job_submit(cluster=cluster, user=get_user_model().objects.get(username="alice"), now=NOW,
                     submission=Submission(argv=("-A", "physics", "-p", "batch", *JOBS[name]), allocation=True))
    answer = {"job": render_job(job), "clusterName": "harness", "hosts": ["gpu1"], "cpusPerNode": [2]}
    environment = command_environment(answer, job_id=job.job_id, base_url="http://trainhub", credential="c",
                                      bin_dir="/opt/trainhub/bin", given=[])
    shown = "".join(f"{key}={value}\n" for key, value in sorted(environment.items()) if key.startswith("SLURM_GPU"))
    assert shown == real(f"salloc-{name}")
