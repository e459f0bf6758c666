"""trainhub replays fixtures/22.05/gputype.sh: typed and untyped GPU requests (--gres, --gpus-per-node,
--gpus-per-task, --gpus), held and running, on the harness's cluster, whose nodes' GPUs have no type
tesla. sbatch's messages, scontrol show job, squeue's %b and -O tres-per-*/tres-alloc are Slurm's byte
for byte; a released typed job waits with BadConstraints; a typed job runs only on nodes of its type.

The recording: every job submitted at 14:33:30; 13-16 (typed, not held) refused; 17-19 started at
14:33:31; squeue and scontrol ran at 14:33:33.
"""

from __future__ import annotations

import datetime as dt
import re
import shlex
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model

from trainhub.common.errors import ApiError
from trainhub.slurm import reports
from trainhub.slurm.formats import sacct_text, squeue_long_format
from trainhub.slurm.models import JobNode, JobState, NodePhase, SlurmJob
from trainhub.slurm.render import render_job
from trainhub.slurm.scontrol_job import memory_text
from trainhub.slurm.services.jobs import Submission, job_release, job_submit, submitted_message
from trainhub.slurm.services.steps import step_create
from trainhub.slurm.steps import StepRequest

from .conftest import run_pass
from .test_real_slurm import harness_cluster, scontrol_differences

REAL = Path(__file__).parent / "fixtures" / "22.05" / "gputype"
SUBMIT = dt.datetime(2026, 12, 5, 14, 33, 30, tzinfo=dt.UTC)
SECOND = dt.timedelta(seconds=1)
SHOWN = SUBMIT + 3 * SECOND
#: gputype.sh's $H and $R: sbatch as carol, held or not.
PREFIXES = {"$H": ["-A", "bio", "-p", "batch", "-H", "--wrap", "true"], "$R": ["-A", "bio", "-p", "batch"]}


def _recorded() -> list[tuple[str, list[str]]]:
    """gputype.sh's sbatch lines: (name, sbatch's arguments)."""
    found = []
    for line in (REAL.parent / "gputype.sh").read_text().splitlines():
        words = shlex.split(line) if line.startswith("rec ") else []
        if words and words[2] in PREFIXES:
            found.append((words[1], PREFIXES[words[2]] + words[3:]))
    return found


def recorded(name: str) -> str:
    return (REAL / f"{name}.txt").read_text()


@pytest.fixture
def replayed(cast, now):
    """The harness's cluster with gputype.sh's jobs, after the pass that started 17-19; and what sbatch
    printed for each line (stdout, stderr)."""
    cluster, _ = harness_cluster(cast, now)
    carol = get_user_model().objects.get(username="carol")
    printed = {}
    for name, args in _recorded():
        submission = Submission(argv=("--chdir", "/tmp", *args), alloc_node="localhost")
        try:
            job = job_submit(cluster=cluster, user=carol, submission=submission, now=SUBMIT)
            printed[name] = (submitted_message(job, submission) + "\n", "")
        except ApiError as error:
            printed[name] = ("", error.message + "\n")
    run_pass(cluster, SUBMIT + SECOND)
    return cluster, printed


def test_sbatch_prints_what_it_printed_on_the_harness(replayed):
    """Typed requests held are accepted; not held, refused, as no node has tesla GPUs (each takes its
    job id: 17 is the next job's)."""
    _, printed = replayed
    assert len(printed) == 19
    for name, shown in printed.items():
        assert shown == (recorded(name), (REAL / f"{name}.err").read_text().rsplit("rc=", 1)[0]), name
    assert list(SlurmJob.objects.filter(job_id__in=range(13, 17)).values_list("state", flat=True)) == [
        JobState.FAILED] * 4


def test_scontrol_shows_each_job_as_slurm_does(replayed):
    """TresPerJob, TresPerNode and TresPerTask as the request was written (gres:gpu:tesla:2,
    gres:gpu, gres:gpu:02), TRES with the GPUs' count. Held 6 (``-n 40 --gpus-per-task=1``) shows
    slurmctld's estimate at submission, its tasks' CPUs alone (3 nodes of 16, not 5 of 8 GPUs); 19
    (``-N 2 --gpus=3``) gets 3 GPUs in all on gpu[3-4], whose 8 free GPUs each cons_tres prefers to
    gpu2's 2 beside 17 and 18."""
    cluster, _ = replayed
    names = sorted(path.stem for path in REAL.glob("scontrol-*.txt") if path.stem != "scontrol-1-released")
    assert len(names) == 15
    shown = {name: reports.scontrol_jobs(cluster, now=SHOWN, job=name.split("-")[1]).text for name in names}
    assert scontrol_differences(shown, REAL) == {}


def test_gpus_per_job_reach_each_node_of_the_job_and_its_steps(replayed):
    """19's 3 GPUs: 2 on gpu3 (its batch host), 1 on gpu4, for the batch script (CUDA_VISIBLE_DEVICES,
    SLURM_GPUS_ON_NODE) and an srun over both nodes alike (SLURM_STEP_GPUS)."""
    cluster, _ = replayed
    job = SlurmJob.objects.get(cluster=cluster, job_id=19)
    job_nodes = JobNode.objects.filter(job=job).select_related("node")
    assert {node.node.name: (node.gpu_indices, node.batch_host) for node in job_nodes} == {
        "gpu3": ([0, 1], True), "gpu4": ([0], False)}
    job_nodes.update(phase=NodePhase.RUNNING)
    step = step_create(job=job, run_index=0, argv=["nvidia-smi"], environment={}, request=StepRequest(), label=False,
                       now=SHOWN)
    assert {node.job_node.node.name: node.gpu_indices for node in step.step_nodes.select_related("job_node__node")} == {
        "gpu3": [0, 1], "gpu4": [0]}


def _as_trainhubs(text: str, cluster) -> str:
    """``text`` with the harness's nodes' memory (16000M each) as trainhub's (n1-standard-16), a cell
    blank-padded as wide as before."""
    node_mb = max(node.memory_mb for node in reports.snapshot.load_cluster(cluster, now=SHOWN).nodes.values())

    def swap(match: re.Match) -> str:
        cell = f"mem={memory_text(node_mb * int(match['nodes']))},node={match['nodes']}{match['rest']}"
        return cell.ljust(len(match[0])) if match["pad"] else cell
    return re.sub(r"mem=(?:16000|32000|48000|64000)M,node=(?P<nodes>\d+)(?P<rest>\S*)(?P<pad> *)", swap, text)


def test_squeue_shows_the_requests_and_tres_as_slurm_does(replayed):
    """%b is TRES_PER_NODE (N/A for --gpus and --gpus-per-task); -O tres-per-job/node/task the request
    as scontrol shows it; tres-alloc scontrol's TRES."""
    cluster, _ = replayed
    assert reports.squeue(cluster, now=SHOWN, format="%i|%T|%D|%C|%b").text == recorded("squeue-b")
    shown = reports.squeue(cluster, now=SHOWN, format=squeue_long_format(
        "JobID:6,tres-per-job:22,tres-per-node:22,tres-per-task:22,tres-alloc:60")).text
    assert shown == _as_trainhubs(recorded("squeue-O"), cluster)


def test_squeue_tres_alloc_is_scontrols_tres(replayed):
    """One computation for both (scontrol_job.job_cpus_and_tres): -n without -N asks one node and gets
    two (17), --gpus-per-task counts every task (18), --gpus its count (19, and 4 held)."""
    cluster, _ = replayed
    lines = reports.squeue(cluster, now=SHOWN, format=squeue_long_format("JobID:6,tres-alloc:80")).text.splitlines()
    tres = {line.split()[0]: line.split()[1] for line in lines[1:]}
    for job_id in ("4", "6", "17", "18", "19"):
        text = reports.scontrol_jobs(cluster, now=SHOWN, job=job_id).text
        assert f"   TRES={tres[job_id]}\n" in text, job_id


def test_limits_count_the_gpus_scontrol_shows(replayed):
    """Association and QOS limits weigh a job's GPUs as its TRES shows them: --gpus's count (4, 19),
    --gpus-per-task's for every task (6, 18), not a per-node share times the nodes."""
    cluster, _ = replayed
    state = reports.snapshot.load_cluster(cluster, now=SHOWN)
    jobs = SlurmJob.objects.filter(cluster=cluster, job_id__in=[4, 6, 18, 19])
    assert {job.job_id: reports.snapshot.job_tres(job, state)["gres/gpu"] for job in jobs} == {
        4: 3, 6: 40, 18: 6, 19: 3}


def test_a_released_typed_job_no_node_has_waits_with_bad_constraints(replayed):
    cluster, _ = replayed
    carol = get_user_model().objects.get(username="carol")
    job_release(job=SlurmJob.objects.get(cluster=cluster, job_id=1), actor=carol, is_admin=False, now=SHOWN)
    run_pass(cluster, SHOWN + SECOND)
    assert reports.squeue(cluster, now=SHOWN, jobs="1", format="%i|%T|%r").text == recorded("squeue-released")


def test_a_job_asking_its_nodes_gpu_type_runs_and_shows_it(cast, now):
    """trainhub's harness nodes have V100s (Gres=gpu:v100:8 in its slurm.conf): --gres=gpu:v100:2 and
    --gpus=v100:3 are accepted without -H and run; another type is refused as tesla was."""
    cluster, _ = harness_cluster(cast, now)
    carol = get_user_model().objects.get(username="carol")

    def submit(*args: str) -> SlurmJob:
        return job_submit(cluster=cluster, user=carol, now=SUBMIT,
                          submission=Submission(argv=("-A", "bio", "-p", "batch", "--wrap", "true", *args)))

    per_node, per_job = submit("--gres=gpu:v100:2"), submit("--gpus=v100:3")
    with pytest.raises(ApiError, match="Requested node configuration is not available"):
        submit("--gpus-per-node=a100:1")
    run_pass(cluster, SUBMIT + SECOND)
    for job in (per_node, per_job):
        job.refresh_from_db()
        assert (job.state, render_job(job)["gpuType"]) == (JobState.RUNNING, "v100")
    text = reports.scontrol_jobs(cluster, now=SHOWN).text
    assert "   TresPerNode=gres:gpu:v100:2\n" in text and "   TresPerJob=gres:gpu:v100:3\n" in text


def test_sacct_shows_what_each_job_asked_as_slurm_does(replayed):
    """ReqTRES: scontrol's TRES as requested, by name; the GPUs' count without their type (the harness's
    AccountingStorageTRES=gres/gpu): the refused typed jobs 13-16 too, the running -n 20 asking one node.
    The held jobs have no record yet."""
    cluster, _ = replayed
    fields = ["JobID", "State", "ReqTRES", "AllocTRES"]
    records = reports.sacct(cluster, now=SHOWN, viewer="root", all_users=True, allocations=True, fields=fields).items
    # sacct -P (trainhub's sacct has -p only: its lines end in a |)
    shown = sacct_text([record for record, _ in records], fields=fields, parsable="plain")
    assert shown == _as_trainhubs(recorded("sacct"), cluster)
