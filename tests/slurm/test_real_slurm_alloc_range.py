"""trainhub replays fixtures/22.05/alloc-range.sh (issue 19): ``salloc -N MIN-MAX`` and ``srun -N MIN-MAX``
outside a job on the slurm-harness cluster (4 nodes x 16 CPUs, CR_CPU), idle and with gpu1 and gpu2's CPUs
held by other jobs.

What Slurm did: the allocation takes as many of MAX nodes as are free (idle: ``-N 1-3`` 3 nodes, ``-N 2-4``
4; busy: 2), MAX lowered to -n (``-N 2-4 -n 3``: 3 nodes), a task's CPU on each without -n; salloc's command
sees SLURM_NNODES and SLURM_JOB_NUM_NODES of the nodes it got and no SLURM_NTASKS without -n; srun's step
runs on every node the job got, one task each without -n (SLURM_NTASKS=4 on 4 nodes), its -n tasks over
their CPUs with it (``-N 1-3 -n 5``: 3,1,1 idle, 4,1 busy). scontrol and squeue show the nodes it got;
sacct's ReqTRES keeps the request (MIN nodes, their memory, one CPU without -n), AllocTRES what it got.

The recording's noise: salloc's ``Job allocation N has been revoked.`` after its Relinquishing line comes or
not as its threads race (idle-salloc-N1-3 has it, busy-salloc-N1-3 not); it is not compared.
"""

from __future__ import annotations

import datetime as dt
import re
import shlex
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model

from trainhub.cli import srun as srun_cli
from trainhub.slurm import jobenv, reports
from trainhub.slurm.models import JobNode, NodePhase, SlurmCluster, SlurmJob
from trainhub.slurm.services import lifecycle
from trainhub.slurm.services.allocations import allocation_hosts, allocation_submit
from trainhub.slurm.services.jobs import Submission, job_submit

from .conftest import run_pass
from .test_real_slurm import harness_cluster, scontrol_differences
from .test_srun_alone import on_trainhub_nodes

REAL = Path(__file__).parent / "fixtures" / "22.05" / "alloc-range"
SQUEUE = "%i|%j|%T|%D|%C|%N|%R"
#: What alloc-range.sh's seen.sh echoes, as a shell command.
SEEN = ("echo $SLURM_NNODES $SLURM_JOB_NUM_NODES ${SLURM_NTASKS-unset} ${SLURM_NPROCS-unset} $SLURM_JOB_NODELIST "
        "$SLURM_JOB_CPUS_PER_NODE ${SLURM_TASKS_PER_NODE-unset} ${SLURMD_NODENAME-} ${SLURM_STEP_NUM_NODES-} "
        "${SLURM_STEP_NUM_TASKS-}")


def script_cases() -> dict[str, tuple[str, list[str]]]:
    """alloc-range.sh's cases in order: NAME -> (salloc or srun, -N and -n)."""
    return {words[1]: (words[0].removesuffix("_case"), words[2:])
            for words in (shlex.split(line) for line in REAL.with_suffix(".sh").read_text().splitlines()
                          if re.match(r"(salloc|srun)_case ", line))}


CASES = script_cases()


def real(name: str) -> str:
    return (REAL / f"{name}.txt").read_text()


def recorded_job_id(name: str) -> int:
    return int(re.search(r"JobId=(\d+)", real(f"scontrol-{name}"))[1])


def recorded_moment(name: str) -> dt.datetime:
    return dt.datetime.fromisoformat(re.search(r"SubmitTime=(\S+)", real(f"scontrol-{name}"))[1]).replace(tzinfo=dt.UTC)


def test_the_recording_has_every_case():
    assert list(CASES) == ["idle-salloc-N1-3", "idle-srun-N2-4", "idle-salloc-N2-4-n3", "idle-srun-N1-3-n5",
                           "busy-salloc-N1-3", "busy-srun-N2-4", "busy-srun-N1-3-n5"]


def allocated(cast, name: str) -> tuple[SlurmCluster, SlurmJob]:
    """Case NAME's allocation on a fresh harness cluster at its recorded moment, with its recorded id; busy-*
    beside jobs 5 and 6 holding gpu1 and gpu2's CPUs. salloc's job options are its arguments, srun's
    trainhub's srun makes of them (its job named after its command)."""
    moment = recorded_moment(name)
    cluster, _ = harness_cluster(cast, moment)
    alice = get_user_model().objects.get(username="alice")
    if name.startswith("busy-"):
        SlurmCluster.objects.filter(pk=cluster.pk).update(next_job_id=5)
        for node in ("gpu1", "gpu2"):
            job_submit(cluster=cluster, user=alice, now=moment, submission=Submission(
                argv=("-A", "physics", "-p", "batch", "-w", node, "-N", "1", "-n", "16", "--wrap", "sleep 900")))
        run_pass(cluster, moment)
    SlurmCluster.objects.filter(pk=cluster.pk).update(next_job_id=recorded_job_id(name))
    command, args = CASES[name]
    argv = ["-A", "physics", "-p", "batch", *args]
    options = srun_cli.split([*argv, f"/tmp/{name}/seen.sh"])[0] if command == "srun" else argv
    job = allocation_submit(cluster=cluster, user=alice, is_admin=False, now=moment, submission=Submission(
        argv=tuple(options), allocation=True, alloc_node="localhost", submit_dir=str(Path(WORK))))
    run_pass(cluster, moment)
    return cluster, SlurmJob.objects.get(pk=job.pk)


#: The recording's $WORK (its commands' working directory).
WORK = re.search(r"WorkDir=(\S+)", (REAL / "scontrol-idle-salloc-N1-3.txt").read_text())[1]


@pytest.mark.parametrize("name", list(CASES))
def test_the_allocation_is_slurms(cast, name):
    """squeue and scontrol show job of the allocation while its command runs: every line but an srun's
    Command (trainhub's allocation does not record it)."""
    cluster, job = allocated(cast, name)
    moment = recorded_moment(name)
    assert reports.squeue(cluster, now=moment, format=SQUEUE, jobs=str(job.job_id)).text == real(f"squeue-{name}")
    shown = reports.scontrol_jobs(cluster, now=moment, job=str(job.job_id)).text
    differences = scontrol_differences({f"scontrol-{name}": shown}, REAL).get(f"scontrol-{name}", [])
    assert [line for line in differences if "Command=" not in line] == []


@pytest.mark.parametrize("name", [name for name in CASES if "salloc" in name])
def test_sallocs_command_sees_the_nodes_it_got(cast, name):
    """SLURM_NNODES, SLURM_JOB_NUM_NODES of the nodes it got; SLURM_NTASKS (SLURM_NPROCS) only with -n."""
    _, job = allocated(cast, name)
    JobNode.objects.filter(job=job).update(phase=NodePhase.RUNNING)  # its nodes' prolog done: salloc runs it
    hosts = allocation_hosts(job)
    env = jobenv.salloc_environment(
        cluster_name="harness", job_id=job.job_id, job_name=job.name, account=job.account, partition=job.partition,
        qos=job.qos, hosts=[host for host, _ in hosts], cpus_per_node=[cpus for _, cpus in hosts],
        num_tasks=job.num_tasks, submit_dir=WORK, submit_host="localhost", tasks_given="-n" in CASES[name][1])
    seen = [env.get(variable, "unset") for variable in ("SLURM_NNODES", "SLURM_JOB_NUM_NODES", "SLURM_NTASKS",
                                                        "SLURM_NPROCS", "SLURM_JOB_NODELIST",
                                                        "SLURM_JOB_CPUS_PER_NODE", "SLURM_TASKS_PER_NODE")]
    assert " ".join(seen) + "\n" == real(name)


@pytest.mark.parametrize("name", list(CASES))
def test_sacct_keeps_the_request_and_what_it_got(cast, name):
    """ReqTRES (MIN nodes, their memory, one CPU without -n) and AllocTRES of the case's job, once ended."""
    rows = {row[0]: row for row in (line.split("|") for line in real("sacct").splitlines())}
    cluster, job = allocated(cast, name)
    lifecycle.job_allocation_ended(job=job, exit_code=0, signal=0, now=recorded_moment(name))
    text = reports.sacct(cluster, now=recorded_moment(name), viewer="alice", jobs=str(job.job_id), parsable=True,
                         allocations=True, fields=["JobID", "JobName", "State", "ExitCode", "NNodes", "NTasks",
                                                   "NodeList", "AllocCPUS", "ReqTRES", "AllocTRES"]).text
    assert text.splitlines()[1].split("|")[:10] == rows[str(job.job_id)]


@pytest.mark.parametrize("name", ["busy-salloc-N1-3", "busy-srun-N2-4", "busy-srun-N1-3-n5"])
def test_on_two_free_nodes_the_command_sees_what_slurms_saw(slurm_cli_as_uma, name):
    """End to end on the test cluster's 2 nodes (a4-0, a4-1: gpu3 and gpu4 of the busy harness): salloc's
    command's line, srun's tasks' lines (-N MIN-MAX is the job's; the step runs on every node it got)."""
    command, args = CASES[name]
    code, out, _ = slurm_cli_as_uma(command, *args, *(["-l"] if command == "srun" else []), "sh", "-c", SEEN)
    assert (code, sorted(out.splitlines())) == (0, on_trainhub_nodes(real(name).splitlines(), 3))


def test_srun_gives_a_node_range_to_its_job_not_to_its_step():
    assert srun_cli.split(["-N", "2-4", "-n", "3", "true"]) == (
        ["--job-name=true", "--nodes=2-4", "--ntasks=3"], ["srun", "--ntasks=3", "--", "true"])
    assert srun_cli.split(["-N", "2", "true"])[1] == ["srun", "--nodes=2", "--", "true"]
