"""trainhub replays fixtures/22.05/cpus-per-gpu.sh: --cpus-per-gpu=N gives each node of the job N CPUs
for each GPU it gets there where that is more than its tasks' (cons_tres; scheduler.cpus_for_gpus), as
NumCPUs, TRES and squeue's %C show once it runs; while it waits it asks its tasks' CPUs (job 5: %C 1,
cpu=1). scontrol shows CpusPerTres=gres:gpu:N, the batch script SLURM_CPUS_PER_GPU (with GPUs or
without). sbatch, salloc and srun refuse it with --cpus-per-task, and a count that is not a positive
number; slurmctld refuses a job no node has the CPUs for.

The recording: -w gpu1 --gpus=2 --cpus-per-gpu=3 (1: 6 CPUs), -w gpu[2-3] -N 2 --gres=gpu:2
--cpus-per-gpu=4 (2: 8 + 8), -w gpu4 --cpus-per-gpu=3 (3: no GPU, 1 CPU), -w gpu4 -n 2 --gres=gpu:2
--cpus-per-gpu=3 --mem-per-gpu=100 (4: 6), all at 21:03:56 and started at :57; then -w gpu1 --gres=gpu:1
--cpus-per-gpu=12 (5, at :59), which pends: gpu1 has 10 CPUs left. Then the refusals, salloc and srun.
"""

from __future__ import annotations

import datetime as dt
import os
import re
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model

from trainhub.cli.salloc import SALLOC, command_environment
from trainhub.cli.srun import SRUN
from trainhub.common.errors import ApiError
from trainhub.slurm import reports
from trainhub.slurm.formats import sacct_text
from trainhub.slurm.models import JobNode, SlurmJob
from trainhub.slurm.sbatch import SbatchError, parse_options
from trainhub.slurm.services.allocations import allocation_submit
from trainhub.slurm.services.jobs import Submission, job_submit, submitted_message

from .conftest import run_pass
from .test_real_slurm import harness_cluster, scontrol_differences
from .test_real_slurm_gputype import _as_trainhubs
from .test_real_slurm_ntasks import batch_environment, sbatch_lines

REAL = Path(__file__).parent / "fixtures" / "22.05" / "cpus-per-gpu"
WORK = "/tmp/cpus-per-gpu.YeHxNo"
SECOND = dt.timedelta(seconds=1)
FIRST = dt.datetime(2026, 12, 5, 21, 3, 56, tzinfo=dt.UTC)
#: The recorded jobs' submissions (seconds after FIRST): 1-4 at once, started at :57; 5 at :59, tried at 21:04:00.
SUBMITTED = {"sbatch-1": 0, "sbatch-2": 0, "sbatch-3": 0, "sbatch-4": 0, "sbatch-5": 3}
SHOWN = FIRST + 6 * SECOND


def real(name: str) -> str:
    return (REAL / f"{name}.txt").read_text()


def refusal(name: str) -> str:
    """A refused command's stderr, without the exit status rec() appended."""
    return (REAL / f"{name}.err").read_text().rsplit("rc=", 1)[0].rstrip("\n")


def _submit(cluster, args: list[str], moment: dt.datetime) -> SlurmJob:
    argv = ("-A", "bio", "-p", "batch", "-o", f"{WORK}/out-%j.txt", *args)
    return job_submit(cluster=cluster, user=get_user_model().objects.get(username="carol"), now=moment,
                      submission=Submission(argv=argv, script=(REAL / "job.sh").read_text(),
                                            script_path=f"{WORK}/job.sh", alloc_node="localhost", submit_dir=WORK))


@pytest.fixture
def replayed(cast, now):
    cluster, _ = harness_cluster(cast, now)
    lines = dict(sbatch_lines(REAL))
    printed = {}
    for name, second in SUBMITTED.items():
        if second == 3:
            run_pass(cluster, FIRST + SECOND)
        job = _submit(cluster, lines[name], FIRST + second * SECOND)
        printed[name] = submitted_message(job, Submission(argv=())) + "\n"
    run_pass(cluster, FIRST + 4 * SECOND)
    return cluster, printed


def test_sbatch_accepts_the_jobs(replayed):
    _, printed = replayed
    assert printed == {name: real(name) for name in SUBMITTED}


def test_scontrol_shows_the_cpus_the_gpus_brought_and_cpus_per_tres(replayed):
    cluster, _ = replayed
    shown = {f"scontrol-{job_id}": reports.scontrol_jobs(cluster, now=SHOWN, job=str(job_id)).text
             for job_id in range(1, 6)}
    assert scontrol_differences(shown, REAL) == {}


def test_squeue_and_sacct_count_the_cpus_as_slurm_does(replayed):
    cluster, _ = replayed
    assert reports.squeue(cluster, now=SHOWN, format="%i|%T|%D|%C|%b|%N|%r").text == real("squeue")
    fields = ["JobID", "State", "ReqTRES", "AllocTRES"]
    records = reports.sacct(cluster, now=SHOWN, viewer="root", all_users=True, allocations=True, fields=fields).items
    shown = sacct_text([record for record, _ in records], fields=fields, parsable="plain")
    # job 5, submitted 3 s before, had not reached slurmdbd yet (sacct-end.txt lists it)
    assert "".join(line for line in shown.splitlines(keepends=True) if not line.startswith("5|")) == _as_trainhubs(
        real("sacct"), cluster)


def test_each_node_holds_the_cpus_for_its_gpus(replayed):
    cluster, _ = replayed
    cpus = {(row.job.job_id, row.node.name): row.cpus for row in JobNode.objects.filter(job__cluster=cluster)
            .select_related("job", "node")}
    assert cpus == {(1, "gpu1"): 6, (2, "gpu2"): 8, (2, "gpu3"): 8, (3, "gpu4"): 1, (4, "gpu4"): 6}


@pytest.mark.parametrize("job_id", [1, 2, 3, 4])
def test_the_batch_script_sees_slurm_cpus_per_gpu(replayed, job_id):
    """out-N.txt: SLURM_CPUS_PER_GPU, and the CPUs it brought (SLURM_CPUS_ON_NODE, SLURM_JOB_CPUS_PER_NODE)."""
    cluster, _ = replayed
    recorded = dict(line.split("=", 1) for line in real(f"out-{job_id}").splitlines() if re.match(r"[A-Z_]+=", line))
    environment = batch_environment(SlurmJob.objects.get(cluster=cluster, job_id=job_id))
    assert {name: environment.get(name) for name in recorded} == recorded


def test_a_job_no_node_has_the_cpus_for_is_refused(replayed):
    """sbatch-big: one GPU with 17 CPUs, on nodes of 16."""
    cluster, _ = replayed
    with pytest.raises(ApiError) as refused:
        _submit(cluster, dict(sbatch_lines(REAL))["sbatch-big"], SHOWN)
    assert refused.value.message == refusal("sbatch-big")
    # slurmctld made its record first: job 6 is FAILED and salloc's is 7 (salloc.err)
    assert SlurmJob.objects.get(cluster=cluster, job_id=6).state == "FAILED"
    assert "Granted job allocation 7" in (REAL / "salloc.err").read_text()


@pytest.mark.parametrize("name", ["sbatch-c", "sbatch-c-first", "sbatch-zero", "sbatch-x", "sbatch-empty"])
def test_sbatch_refuses_it_in_its_words(replayed, name):
    cluster, _ = replayed
    args = dict(sbatch_lines(REAL))[name]
    try:
        parse_options(list(args))
    except SbatchError as exc:
        assert str(exc) == refusal(name)
        return
    with pytest.raises(ApiError) as refused:
        _submit(cluster, args, SHOWN)
    assert refused.value.message == refusal(name)


@pytest.mark.parametrize(("words", "recorded"), [(SALLOC, "salloc"), (SRUN, "srun")])
def test_salloc_gives_its_command_slurm_cpus_per_gpu_and_srun_its_tasks_none(words, recorded, tmp_path, monkeypatch):
    """salloc.txt: ``$SLURM_CPUS_PER_GPU $SLURM_CPUS_ON_NODE $SLURM_JOB_CPUS_PER_NODE $SLURM_GPUS`` is
    ``3 6 2`` (salloc's command runs on no node); srun.txt ``6 6``: its tasks (on their node) get
    neither --gpus's nor --cpus-per-gpu's variable."""
    for name in [name for name in os.environ if name.startswith("SLURM")]:
        monkeypatch.delenv(name)
    answer = {"clusterName": "harness", "hosts": ["gpu1"], "cpusPerNode": [6],
              "job": {"name": "sh", "account": "bio", "partition": "batch", "qos": "normal", "tasks": 1,
                      "cpusPerTask": 1, "gpusPerJob": 2, "cpusPerGpu": 3}}
    environment = command_environment(answer, job_id=6, base_url="http://x", credential="k", bin_dir=str(tmp_path),
                                      given=[("gpus", "2"), ("cpus-per-gpu", "3")], words=words)
    if words is SRUN:  # the step's own variables: its node's
        environment["SLURM_CPUS_ON_NODE"] = "6"
    shown = [environment.get(name) for name in ("SLURM_CPUS_PER_GPU", "SLURM_CPUS_ON_NODE", "SLURM_JOB_CPUS_PER_NODE",
                                                "SLURM_GPUS")]
    assert " ".join(value for value in shown if value) + "\n" == real(recorded)


@pytest.mark.parametrize(("name", "program", "args"), [
    ("salloc-c", "salloc", ["--gpus=2", "--cpus-per-gpu=3", "-c", "2"]),
    ("srun-c", "srun", ["--gpus=2", "--cpus-per-gpu=3", "-c", "2"]),
    ("srun-zero", "srun", ["--gpus=2", "--cpus-per-gpu=0"])])
def test_salloc_and_srun_refuse_it_in_their_words(replayed, name, program, args):
    """srun outside an allocation asks for one as salloc does, and says salloc's refusal in its own
    words (trainhub.cli.salloc.allocate_and_run)."""
    cluster, _ = replayed
    with pytest.raises(ApiError) as refused:
        allocation_submit(cluster=cluster, user=get_user_model().objects.get(username="carol"), is_admin=False,
                          submission=Submission(argv=("-A", "bio", "-p", "batch", *args), allocation=True), now=SHOWN)
    assert refused.value.message.replace("salloc: ", f"{program}: ") == refusal(name)
