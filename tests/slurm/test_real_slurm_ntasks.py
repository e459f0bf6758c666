"""trainhub replays fixtures/22.05/ntasks.sh (``-n N`` without ``-N``: sbatch, salloc and srun inside,
recorded on a fresh slurm-harness cluster of 4 nodes x 16 CPUs x 8 GPUs) and prints what Slurm printed.

The recording's clock: job 1 submitted at 05:10:47; at 05:10:48 slurmctld's main scheduler started it,
then the other eight sbatch came, then its backfill thread (which last ran bf_interval before) started
jobs 2 and 3; the main scheduler, batch_sched_delay (3 s) after its last run, looked at jobs 4, 5 and 9
at 05:10:51 (scontrol's Scheduler= and LastSchedEval=); the squeue and scontrol recordings four seconds
after the starts (squeue's TIME 0:04). Job 9 came after that backfill iteration had built its queue:
it has no start (StartTime=Unknown) while jobs 4 and 5, tested by it, show the year-on start of the
running jobs' end (with backfill's debug flag, a later iteration tests job 9 and gives it that start too).
"""

from __future__ import annotations

import datetime as dt
import shlex
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model

from trainhub.common.errors import ApiError
from trainhub.inventory.assignments import node_assignments
from trainhub.slurm import jobenv, reports
from trainhub.slurm.models import JobNode, NodePhase, SlurmCluster, SlurmJob
from trainhub.slurm.services.jobs import Submission, job_submit, submitted_message
from trainhub.slurm.services.lifecycle import job_batch_finished, job_node_epilog_finished
from trainhub.slurm.services.steps import step_create
from trainhub.slurm.steps import StepRequest

from .conftest import run_pass
from .test_real_slurm import harness, scontrol_differences  # noqa: F401 (a fixture)

REAL = Path(__file__).parent / "fixtures" / "22.05" / "ntasks"
START = dt.datetime(2026, 12, 5, 5, 10, 47, tzinfo=dt.UTC)
SECOND = dt.timedelta(seconds=1)
#: Within 05:10:48: the main scheduler's run, seven sbatch, the backfill iteration, the last sbatch.
MAIN_RUN, BACKFILL_RUN = START + SECOND, START + 1.5 * SECOND
#: Job 9's submission, after that iteration began (its queue had no job 9: StartTime=Unknown).
LATE = BACKFILL_RUN + SECOND / 4
#: The recording's $WORK (its sbatch's working directory, -o $WORK/out-%j.txt).
WORK = "/tmp/ntasks-scenario.Fjxi4L"
#: The variables job.sh prints (its first lines) that trainhub sets.
ENV_NAMES = ("CUDA_VISIBLE_DEVICES", "SLURM_CPUS_ON_NODE", "SLURM_GPUS_ON_NODE", "SLURM_JOB_CPUS_PER_NODE",
             "SLURM_JOB_GPUS", "SLURM_JOB_NODELIST", "SLURM_JOB_NUM_NODES", "SLURM_NNODES", "SLURM_NODELIST",
             "SLURM_NPROCS", "SLURM_NTASKS", "SLURM_TASKS_PER_NODE")


def real(name: str) -> str:
    return (REAL / f"{name}.txt").read_text()


def real_err(name: str) -> str:
    return (REAL / f"{name}.err").read_text().rsplit("rc=", 1)[0]


def sbatch_lines(folder: Path) -> list[tuple[str, list[str]]]:
    """The sbatch lines of ``folder``'s recording script (ntasks.sh, ntasks-per-node.sh): (fixture name,
    the arguments after ``$SB`` but the script)."""
    found = []
    for line in folder.with_suffix(".sh").read_text().splitlines():
        if line.startswith("rec sbatch-"):
            words = shlex.split(line.split("#")[0])
            found.append((words[1], words[5:-1]))
    return found


@pytest.fixture
def replay(harness, cast):
    cluster, _ = harness
    alice = cast.get("alice") or get_user_model().objects.get(username="alice")
    script = (REAL / "job.sh").read_text()
    # slurmctld's backfill thread last ran bf_interval before its iteration of 05:10:48
    SlurmCluster.objects.filter(pk=cluster.pk).update(last_backfill_time=BACKFILL_RUN - 30 * SECOND)
    printed = {}
    for index, (name, args) in enumerate(sbatch_lines(REAL)):
        argv = ("-A", "physics", "-p", "batch", "-o", f"{WORK}/out-%j.txt", *args)
        submission = Submission(argv=argv, script=script, script_path=f"{WORK}/job.sh", alloc_node="localhost",
                                submit_dir=WORK)
        try:
            job = job_submit(cluster=cluster, user=alice, submission=submission,
                             now=START if index == 0 else LATE if name == "sbatch-9" else START + SECOND)
            printed[name] = (submitted_message(job, Submission(argv=argv)) + "\n", "")
        except ApiError as error:
            printed[name] = ("", error.message + "\n")
        if index == 0:
            run_pass(cluster, MAIN_RUN)
    run_pass(cluster, BACKFILL_RUN)
    run_pass(cluster, MAIN_RUN + 3 * SECOND)
    return cluster, printed, BACKFILL_RUN + 4 * SECOND


def test_sbatch_takes_n_tasks_without_n_nodes_as_slurm(replay):
    _, printed, _ = replay
    assert len(printed) == 9
    for name, (out, err) in printed.items():
        assert (out, err) == (real(name), real_err(name)), name


def test_pending_and_running_jobs_show_slurms_node_counts_and_reasons(replay):
    cluster, _, moment = replay
    assert reports.squeue(cluster, now=moment).text == real("squeue")
    text = reports.squeue(cluster, now=moment, format="%i|%j|%T|%D|%C|%b|%N|%r").text
    assert text == real("squeue-o")
    # jobs 2 and 3 started by backfill run with a year's limit (the CLI prints the date line)
    assert reports.squeue(cluster, now=moment, long=True).text == real("squeue-l").split("\n", 1)[1]


def recorded_environment(folder: Path, job_id: int) -> dict[str, str]:
    """The variables job.sh printed in ``folder``'s out-JOB_ID.txt."""
    lines = (folder / f"out-{job_id}.txt").read_text().splitlines()
    return dict(line.split("=", 1) for line in lines if "=" in line and not line.startswith(" "))


@pytest.mark.parametrize("job_id", [1, 2, 3])
def test_the_batch_script_sees_slurms_task_layout(replay, job_id):
    """Without GPUs (jobs 1, 2) the script gets no GPU variable at all, as in out-1.txt and out-2.txt."""
    cluster, _, _ = replay
    recorded = recorded_environment(REAL, job_id)
    environment = batch_environment(SlurmJob.objects.get(cluster=cluster, job_id=job_id))
    assert {name: environment[name] for name in ENV_NAMES if name in environment} == (
        {name: recorded[name] for name in ENV_NAMES if name in recorded})


@pytest.mark.parametrize("job_id", [1, 2])
def test_srun_inside_lays_the_tasks_out_as_slurm(replay, job_id):
    """out-N.txt: ``srun -l sh -c 'echo $SLURMD_NODENAME $SLURM_LOCALID $SLURM_NODEID ...'`` (16,4 for -n 20)."""
    cluster, _, moment = replay
    assert_srun_layout(SlurmJob.objects.get(cluster=cluster, job_id=job_id), real(f"out-{job_id}"), moment)


def assert_srun_layout(job: SlurmJob, recorded_output: str, moment, request: StepRequest | None = None) -> None:
    """A step of ``srun -l`` (``request``: its options) in the running job places each task on the node,
    local id and node index the recorded output's ``N: gpuX LOCALID NODEID`` lines show."""
    assert srun_layout(job, moment, request) == recorded_srun_layout(recorded_output)


def srun_layout(job: SlurmJob, moment, request: StepRequest | None = None) -> list[str]:
    """Where a step of ``srun -l`` (``request``: its options) in the running job places its tasks:
    ``TASK: NODE LOCALID NODEID``."""
    JobNode.objects.filter(job=job).update(phase=NodePhase.RUNNING)
    step = step_create(job=job, run_index=0, argv=["sh"], environment={}, request=request or StepRequest(),
                       label=True, now=moment)
    placed = sorted((task, node.job_node.node.name, local, node.node_index)
                    for node in step.step_nodes.select_related("job_node__node")
                    for local, task in enumerate(node.task_ids))
    return [f"{task}: {name} {local} {index}" for task, name, local, index in placed]


def recorded_srun_layout(recorded_output: str) -> list[str]:
    """The ``N: gpuX LOCALID NODEID`` lines of a recorded ``srun -l sh -c 'echo $SLURMD_NODENAME
    $SLURM_LOCALID $SLURM_NODEID ...'``, as srun_layout writes them."""
    recorded = [line.split(":", 1) for line in recorded_output.splitlines() if ": gpu" in line]
    return [f"{int(label)}: {' '.join(rest.split()[:3])}" for label, rest in recorded]


def test_n_tasks_over_the_partition_pend_with_partitionconfig(replay):
    cluster, _, _ = replay
    assert dict(SlurmJob.objects.filter(cluster=cluster, job_id__in=[6, 7]).values_list("job_id", "reason")) == {
        6: "PartitionConfig", 7: "PartitionConfig"}
    assert dict(SlurmJob.objects.filter(cluster=cluster, job_id__in=[6, 7]).values_list("job_id", "num_nodes")) == {
        6: 5, 7: 5}


def batch_environment(job: SlurmJob) -> dict[str, str]:
    """What the job's batch script sees, from the document its batch host's agent gets."""
    batch = JobNode.objects.select_related("node").get(job=job, batch_host=True, run_index=job.restart_count)
    document = next(item for item in node_assignments(node=batch.node)["slurm"] if item["id"] == batch.pk)
    context = jobenv.JobContext(
        cluster_name="harness", job_id=job.job_id, job_name=job.name, user="alice", account="physics",
        partition="batch", qos="normal", hosts=tuple(document["hosts"]), cpus_per_node=tuple(document["cpusPerNode"]),
        num_tasks=document["job"]["numTasks"], restart_count=0, submit_dir="/", submit_host="gpu1", stdout_path="",
        stderr_path="", comment="", start_epoch=0, end_epoch=None, uid=document["job"]["uid"],
        gid=document["job"]["gid"], cpus_per_task=document["job"]["cpusPerTask"],
        ntasks_per_node=document["job"]["ntasksPerNode"], gpus_per_job=document["job"]["gpusPerJob"],
        gpus_per_node_option=document["job"]["gpusPerNodeOption"], gpus_per_task=document["job"]["gpusPerTask"],
        cpus_per_gpu=document["job"]["cpusPerGpu"], memory=tuple(document["job"]["memory"]))
    return jobenv.batch_environment(context, jobenv.NodeContext(0, tuple(document["gpuIndices"])))


def test_the_waiting_jobs_fill_the_freed_nodes_in_slurms_layout(replay):
    """Once jobs 1-3 end, job 4 (``-n 16 --gpus-per-task=1``) runs 8,8 on gpu[1-2] and job 5
    (``-n 24 --gres=gpu:4``) 16,8 on gpu[3-4] (out-4.txt, out-5.txt)."""
    cluster, _, moment = replay
    for job_node in JobNode.objects.filter(job__cluster=cluster, job__job_id__in=[1, 2, 3]):
        job_batch_finished(job_node=job_node, exit_code=0, signal=0, max_rss_kb=None, now=moment)
        job_node_epilog_finished(job_node=JobNode.objects.get(pk=job_node.pk), exit_code=0, now=moment)
    run_pass(cluster, moment + SECOND)
    for job_id in (4, 5):
        recorded = recorded_environment(REAL, job_id)
        environment = batch_environment(SlurmJob.objects.get(cluster=cluster, job_id=job_id))
        assert {name: environment[name] for name in ENV_NAMES if name in recorded} == (
            {name: recorded[name] for name in ENV_NAMES if name in recorded}), job_id


def test_salloc_gives_its_command_slurms_task_layout():
    """salloc-n20.txt: ``salloc -n 20`` granted 16 + 4 CPUs, SLURM_NTASKS and SLURM_NPROCS set because
    -n was given (the CLI knows it was: salloc.command_environment)."""
    environment = jobenv.salloc_environment(
        cluster_name="harness", job_id=10, job_name="interactive", account="physics", partition="batch",
        qos="normal", hosts=["gpu1", "gpu2"], cpus_per_node=[16, 4], num_tasks=20, submit_dir="/",
        submit_host="vm", cpus_per_task=1, tasks_given=True)
    recorded = dict(line.split("=", 1) for line in real("salloc-n20").splitlines() if "=" in line)
    assert {name: environment[name] for name in recorded} == recorded


def test_scontrol_show_job_prints_what_it_printed(replay):
    """A pending job's TRES counts the nodes and GPUs asked for: one node for -n without -N, and
    --gpus-per-task's GPUs of every task (shown as TresPerTask), as in scontrol-4, -5, -6 and -7. Jobs 2
    and 3 were started by backfill (Scheduler=Backfill, a year's time limit), jobs 4, 5 and 9 last looked
    at by the main scheduler at 05:10:51, job 8 keeps its --ntasks-per-node (NtasksPerN, MinCPUsNode=8,
    NumNodes=5)."""
    cluster, _, moment = replay
    shown = {f"scontrol-{job_id}": reports.scontrol_jobs(cluster, now=moment, job=str(job_id)).text
             for job_id in range(1, 10)}
    assert scontrol_differences(shown, REAL) == {}
    assert ",node=1,billing=16,gres/gpu=16\n" in shown["scontrol-4"]
    assert "\n   TresPerTask=gres:gpu:1\n" in shown["scontrol-4"]
