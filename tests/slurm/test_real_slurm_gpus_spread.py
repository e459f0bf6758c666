"""trainhub replays fixtures/22.05/gpus-spread.sh and gpus-mem.sh (issue 19): --gpus over nodes without -N,
-N with -n and --gpus, -N MIN-MAX, and --mem-per-gpu over several nodes, each job alone on an idle
slurm-harness cluster of 4 nodes x 16 CPUs x 8 GPUs (gpus-spread busy-*: beside 4 jobs holding 3 GPUs of
each node; gpus-mem: SelectTypeParameters=CR_CPU_Memory, 16000 MB a node).

What Slurm did: ``--gpus=12`` runs on gpu[1-2], 8 GPUs and 4; ``--gpus=6`` where every node has 5 free on
gpu[1-2], 5 and 1; ``-N 2 -n 4 --gpus=3`` runs 3,1 tasks with 2,1 GPUs; ``-N 1-3 -n 5`` 3,1,1 tasks on 3 nodes
but ``-N 1-3 -n 5 --gpus=3`` all 5 on gpu1; and --mem-per-gpu gives each node its GPUs' memory (gpus-mem
scontrol-d-N2-g3: ``-N 2 --gpus=3 --mem-per-gpu=1000`` holds 2000 MB of gpu1 and 1000 of gpu2, so a job
asking 15000 MB of gpu2 runs beside it).
"""

from __future__ import annotations

import datetime as dt
import re
import shlex
from pathlib import Path

import pytest

from trainhub.slurm import reports, snapshot
from trainhub.slurm.formats import sacct_text
from trainhub.slurm.models import JobNode, SlurmCluster, SlurmJob
from trainhub.slurm.services.jobs import Submission, job_submit, submitted_message

from .conftest import run_pass
from .test_real_slurm import harness_cluster, scontrol_differences
from .test_real_slurm_gputype import _as_trainhubs
from .test_real_slurm_nsplit import end
from .test_real_slurm_ntasks import batch_environment, recorded_srun_layout, srun_layout
from .test_real_slurm_sched import Replay

FIXTURES = Path(__file__).parent / "fixtures" / "22.05"
#: Each recording's $WORK (its sbatch's working directory, -o $WORK/out-NAME.txt).
WORK = {"gpus-spread": "/tmp/gpus-spread.xXEq1D", "gpus-mem": "/tmp/gpus-mem.7EluZ3"}
SCRIPT = (FIXTURES / "gpus-spread" / "job.sh").read_text()
#: gpus-spread's busy-g6 (submitted at 21:03:43, less than batch_sched_delay after the main scheduler started
#: the 4 jobs holding GPUs) was started by backfill at 21:03:44 (Scheduler=Backfill, a year's time limit):
#: its iterations ran 30 s apart, one at 21:03:14.
BACKFILL_RUN = dt.datetime(2026, 12, 5, 21, 3, 14, tzinfo=dt.UTC)
#: The jobs holding 3 GPUs of each node: 2 s (gpus-spread.sh's sleep) before busy-g6's submission.
HOLDS_SUBMITTED = dt.datetime(2026, 12, 5, 21, 3, 41, 500000, tzinfo=dt.UTC)


def real(scenario: str, name: str) -> str:
    return (FIXTURES / scenario / f"{name}.txt").read_text()


def cases(scenario: str) -> list[tuple[str, list[str], bool]]:
    """The script's cases in order, (name, the sbatch arguments after ``-o``, kept running with the next
    case); its 4 jobs holding GPUs as ``hold1``..``hold4``."""
    found = []
    for line in (FIXTURES / f"{scenario}.sh").read_text().splitlines():
        words = shlex.split(line.split("#")[0]) if line.startswith(("case_ ", "KEEP=1 case_ ")) else []
        if words:
            kept = words[0] == "KEEP=1"
            found.append((words[1 + kept], words[2 + kept:], kept))
        elif line.startswith("  rec sbatch-hold$n "):
            words = shlex.split(line)
            found += [(f"hold{n}", [word.replace("$n", str(n)) for word in words[words.index("/dev/null") + 1:]],
                       True) for n in range(1, 5)]
    return found


def recorded_time(scenario: str, name: str, field: str) -> dt.datetime:
    found = re.search(rf"\b{field}=(\S+)", real(scenario, f"scontrol-{name}"))
    return dt.datetime.fromisoformat(found[1]).replace(tzinfo=dt.UTC)


def step_gpus(job: SlurmJob) -> dict[str, list[int]]:
    """The GPUs of each node of an ``srun`` over the job (srun_layout's step)."""
    step = job.steps.order_by("-pk").first()
    return {node.job_node.node.name: node.gpu_indices for node in step.step_nodes.select_related("job_node__node")}


def recorded_step_gpus(output: str) -> dict[str, list[int]]:
    """``N: gpuX LOCALID NODEID gpus=INDICES on=COUNT`` lines: each node's GPUs."""
    return {line.split()[1]: [int(index) for index in line.split()[4].removeprefix("gpus=").split(",") if index]
            for line in output.splitlines() if ": gpu" in line}


def replay_cases(scenario: str, cast, now, **config: str) -> tuple[SlurmCluster, dict[str, dict[str, object]]]:
    cluster, _ = harness_cluster(cast, now, **config)
    SlurmCluster.objects.filter(pk=cluster.pk).update(last_backfill_time=BACKFILL_RUN)
    harness = Replay(cluster, cast)
    alice = harness.users["alice"]
    outcomes: dict[str, dict[str, object]] = {}
    kept: list[SlurmJob] = []
    for name, args, keep in cases(scenario):
        if name.startswith("hold"):
            argv = ("-A", "physics", "-p", "batch", "-o", "/dev/null", *args)
            job_submit(cluster=cluster, user=alice, now=HOLDS_SUBMITTED,
                       submission=Submission(argv=argv, alloc_node="localhost", submit_dir=WORK[scenario]))
            run_pass(cluster, HOLDS_SUBMITTED)
            continue
        argv = ("-A", "physics", "-p", "batch", "-o", f"{WORK[scenario]}/out-{name}.txt", "--chdir", WORK[scenario],
                *args)
        job = job_submit(cluster=cluster, user=alice, now=recorded_time(scenario, name, "SubmitTime"),
                         submission=Submission(argv=argv, script=SCRIPT, script_path=f"{WORK[scenario]}/job.sh",
                                               alloc_node="localhost"))
        shown_at = dt.datetime.fromisoformat(real(scenario, f"date-{name}").strip()).replace(tzinfo=dt.UTC)
        run_pass(cluster, recorded_time(scenario, name, "LastSchedEval"))
        job.refresh_from_db()
        outcomes[name] = {
            "sbatch": submitted_message(job, Submission(argv=argv)) + "\n",
            "squeue": reports.squeue(cluster, now=shown_at, format="%i|%T|%D|%C|%b|%N").text,
            "scontrol": reports.scontrol_jobs(cluster, now=shown_at, job=str(job.job_id)).text,
            "gpus": {job_node.node.name: job_node.gpu_indices
                     for job_node in JobNode.objects.filter(job=job).select_related("node")}}
        if job.state == "RUNNING":
            outcomes[name].update(environment=batch_environment(job), srun=srun_layout(job, shown_at),
                                  srun_gpus=step_gpus(job))
        if keep:
            kept.append(job)
            continue
        for done in [job, *kept]:
            end(done, harness, shown_at + dt.timedelta(seconds=1))
        kept = []
    return cluster, outcomes


@pytest.fixture(params=["gpus-spread", "gpus-mem"])
def replayed(request, cast, now):
    config = {"SelectTypeParameters": "CR_CPU_Memory"} if request.param == "gpus-mem" else {}
    return request.param, *replay_cases(request.param, cast, now, **config)


def test_sbatch_answers_as_slurm(replayed):
    scenario, _, outcomes = replayed
    assert {name: outcome["sbatch"] for name, outcome in outcomes.items()} == {
        name: real(scenario, f"sbatch-{name}") for name in outcomes}


def unordered(squeue: str) -> list[str]:
    """squeue's lines, in any order: beside the holding jobs (busy-*) the order is by priority, which the
    fair-share decay run between their submissions changed (busy-g6-mpg's Priority=1428), not replayed here."""
    return sorted(squeue.splitlines())


def test_each_job_runs_on_slurms_nodes_with_its_gpus(replayed):
    """``--gpus=12`` on gpu[1-2] (8 and 4 GPUs), ``--gpus=6`` where every node has 5 free 5 and 1 (GPUs 3-7
    and 3 beside the holding jobs' 0-2); gpus-mem's job of 15000 MB runs beside ``-N 2 --gpus=3
    --mem-per-gpu=1000``."""
    scenario, _, outcomes = replayed
    assert {name: unordered(outcome["squeue"]) for name, outcome in outcomes.items()} == {
        name: unordered(real(scenario, f"squeue-{name}")) for name in outcomes}
    assert {name: outcome["gpus"] for name, outcome in outcomes.items()} == {
        name: recorded_step_gpus(real(scenario, f"out-{name}")) for name in outcomes}


def test_scontrol_show_job_prints_what_it_printed(replayed):
    scenario, _, outcomes = replayed
    shown = {f"scontrol-{name}": outcome["scontrol"] for name, outcome in outcomes.items()}
    # busy-g6-mpg's Priority=1428: after the fair-share decay run (see unordered)
    assert scontrol_differences(shown, FIXTURES / scenario) == ({"scontrol-busy-g6-mpg": [
        "-   Priority=1428 Nice=0 Account=physics QOS=normal", "+   Priority=10000 Nice=0 Account=physics QOS=normal"]}
        if scenario == "gpus-spread" else {})


def test_the_batch_script_sees_slurms_nodes_tasks_and_gpus(replayed):
    """out-NAME.txt's variables: ``-N 1-3 -n 5`` SLURM_TASKS_PER_NODE=3,1(x2); ``--gpus=12`` SLURM_GPUS=12 and
    gpu1's 8 GPUs on the batch host."""
    scenario, _, outcomes = replayed
    for name, outcome in outcomes.items():
        recorded = dict(line.split("=", 1) for line in real(scenario, f"out-{name}").split("== ")[0].splitlines())
        recorded.pop("SLURM_MEM_PER_GPU", None)  # sbatch's input variable: trainhub gives no SLURM_MEM_PER_*
        assert {env: outcome["environment"].get(env) for env in recorded} == recorded, name


def test_srun_inside_runs_each_nodes_tasks_on_its_gpus(replayed):
    """out-NAME.txt's ``srun -l``: ``-N 2 -n 4 --gpus=3`` tasks 0-2 on gpu1 (GPUs 0,1) and 3 on gpu2 (0)."""
    scenario, _, outcomes = replayed
    for name, outcome in outcomes.items():
        output = real(scenario, f"out-{name}").split("== srun -l sh -c")[1]
        assert (outcome["srun"], outcome["srun_gpus"]) == (recorded_srun_layout(output),
                                                           recorded_step_gpus(output)), name


def test_sacct_shows_the_nodes_gpus_and_memory_they_got(replayed):
    """sacct.txt: AllocTRES is each job's nodes, CPUs (billed: ``--gpus=12`` billing=2 on its 2 nodes), --gpus's
    count and (CR_CPU_Memory) its GPUs' memory, mem=3000M for ``-N 2 --gpus=3 --mem-per-gpu=1000``; ReqTRES
    what it asked, ``--gpus=12`` without -N one node and one CPU. Not compared: State's canceller (the replay
    cancels as alice, the recording as root)."""
    scenario, cluster, _ = replayed
    fields = ["JobID", "JobName", "NNodes", "NodeList", "ReqTRES", "AllocTRES"]
    records = reports.sacct(cluster, now=dt.datetime(2026, 12, 5, 22, tzinfo=dt.UTC), viewer="root",
                            all_users=True, allocations=True, fields=fields).items
    shown = sacct_text([record for record, _ in records], fields=fields, parsable="plain")
    recorded = [line.split("|") for line in _as_trainhubs(real(scenario, "sacct"), cluster).splitlines()]
    assert shown.splitlines() == ["|".join(row[:2] + row[3:]) for row in recorded]



@pytest.mark.parametrize(("select", "held"), [("CR_CPU", 0), ("CR_CPU_Memory", 8000)])
def test_mem_per_gpu_holds_memory_only_where_memory_is_consumable(cast, now, select, held):
    """Under the harness's CR_CPU (gpus-spread mpg-N2-g3: no mem= in TRES) the scheduler takes no memory
    for --mem-per-gpu's GPUs; under CR_CPU_Memory each node its own GPUs' (gpus-mem)."""
    cluster, _ = harness_cluster(cast, now, SelectTypeParameters=select)
    job = job_submit(cluster=cluster, user=Replay(cluster, cast).users["alice"], now=now, submission=Submission(
        argv=("-A", "physics", "-p", "batch", "-N", "2", "--gpus=3", "--mem-per-gpu=8000"), script="#!/bin/sh\n",
        alloc_node="localhost", submit_dir="/tmp"))
    state = snapshot.load_cluster(cluster, now=now)
    assert snapshot.pending_job(job, state, None).mem_per_gpu == held
