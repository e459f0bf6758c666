"""trainhub replays fixtures/22.05/mem-env.sh: the memory variables a batch script and salloc's command
see for each way of asking memory (env-NAME.txt, salloc-NAME.txt): --mem's SLURM_MEM_PER_NODE,
--mem-per-cpu's SLURM_MEM_PER_CPU, --mem-per-gpu's SLURM_MEM_PER_GPU, in MB whatever the unit
(``--mem=2G``: 2048), and none without them."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model

from trainhub.slurm.models import SlurmJob
from trainhub.slurm.services.jobs import Submission, job_submit

from .conftest import run_pass
from .test_real_slurm import harness_cluster
from .test_real_slurm_ntasks import batch_environment

REAL = Path(__file__).parent / "fixtures" / "22.05" / "mem-env"
#: sbatch's (and salloc's) options of each recorded job (mem-env.sh).
JOBS = {"mem": ("--mem=1000",), "mem-g": ("--mem=2G",), "per-cpu": ("-n", "2", "--mem-per-cpu=500"),
        "per-gpu": ("--gres=gpu:2", "--mem-per-gpu=700"), "none": ()}
SALLOC = {"mem": ("--mem=1000",), "per-cpu": ("--mem-per-cpu=500",), "per-gpu": ("--gres=gpu:2", "--mem-per-gpu=700"),
          "none": ()}
NOW = dt.datetime(2026, 12, 5, 22, 0, tzinfo=dt.UTC)


def real(name: str) -> str:
    return (REAL / f"{name}.txt").read_text()


def memory_lines(environment: dict[str, str]) -> str:
    return "".join(f"{key}={value}\n" for key, value in sorted(environment.items()) if key.startswith("SLURM_MEM"))


@pytest.fixture
def alice(cast):
    cluster, _ = harness_cluster(cast, NOW)
    return cluster, get_user_model().objects.get(username="alice")


@pytest.mark.parametrize("name", list(JOBS))
def test_the_batch_script_sees_the_memory_variables_slurm_sets(alice, name):
    cluster, user = alice
    job = job_submit(cluster=cluster, user=user, now=NOW, submission=Submission(
        argv=("-A", "physics", "-p", "batch", *JOBS[name]), script="#!/bin/bash\nenv\n"))
    run_pass(cluster, NOW)
    assert memory_lines(batch_environment(SlurmJob.objects.get(pk=job.pk))) == real(f"env-{name}")


@pytest.mark.parametrize("name", list(SALLOC))
def test_sallocs_command_sees_the_same_memory_variables(alice, name, monkeypatch):
    from trainhub.cli.salloc import command_environment
    from trainhub.slurm.render import render_job

    for variable in ("SLURM_MEM_PER_NODE", "SLURM_MEM_PER_CPU", "SLURM_MEM_PER_GPU"):
        monkeypatch.delenv(variable, raising=False)
    cluster, user = alice
    job = job_submit(cluster=cluster, user=user, now=NOW, submission=Submission(
        argv=("-A", "physics", "-p", "batch", *SALLOC[name]), allocation=True))
    answer = {"job": render_job(job), "clusterName": "harness", "hosts": ["gpu1"], "cpusPerNode": [2]}
    environment = command_environment(answer, job_id=job.job_id, base_url="http://trainhub", credential="c",
                                      bin_dir="/opt/trainhub/bin", given=[])
    assert memory_lines(environment) == real(f"salloc-{name}")
