"""trainhub replays fixtures/22.05/nsplit.sh (``-N`` with ``-n`` and no ``--ntasks-per-node``, each job
alone on an idle slurm-harness cluster of 4 nodes x 16 CPUs x 8 GPUs, busy-*: beside a job holding 14
CPUs of gpu1) and gives each node Slurm's CPUs and tasks: in node order as many as it holds, leaving one
for each node after it (3,1 for ``-N 2 -n 4``), not an even share."""

from __future__ import annotations

import datetime as dt
import re
import shlex
from pathlib import Path

import pytest

from trainhub.slurm import reports
from trainhub.slurm.models import JobNode, JobState, SlurmCluster, SlurmJob
from trainhub.slurm.services.jobs import Submission, job_cancel, job_submit, submitted_message
from trainhub.slurm.services.lifecycle import job_batch_finished

from .conftest import run_pass
from .test_real_slurm import harness_cluster, scontrol_differences
from .test_real_slurm_ntasks import ENV_NAMES, batch_environment, recorded_srun_layout, srun_layout
from .test_real_slurm_ntasks_nodes import cpus_by_node
from .test_real_slurm_sched import Replay

REAL = Path(__file__).parent / "fixtures" / "22.05" / "nsplit"
#: The recording's $WORK (its sbatch's working directory, -o $WORK/out-NAME.txt).
WORK = "/tmp/nsplit.BbpsMr"
SCRIPT = (REAL / "job.sh").read_text()


def real(name: str) -> str:
    return (REAL / f"{name}.txt").read_text()


def cases() -> list[tuple[str, list[str]]]:
    """nsplit.sh's cases in order, (name, the sbatch arguments after ``-o``), the job holding gpu1's
    14 CPUs as ``hold``."""
    found = []
    for line in REAL.with_suffix(".sh").read_text().splitlines():
        if line.startswith("case_ "):
            words = shlex.split(line.split("#")[0])
            found.append((words[1], words[2:]))
        elif line.startswith("rec sbatch-hold "):
            words = shlex.split(line)
            found.append(("hold", words[words.index("/dev/null") + 1:]))
    return found


def recorded_time(name: str, field: str) -> dt.datetime:
    found = re.search(rf"\b{field}=(\S+)", real(f"scontrol-{name}"))
    return dt.datetime.fromisoformat(found[1]).replace(tzinfo=dt.UTC)


def end(job: SlurmJob, replay: Replay, moment: dt.datetime) -> None:
    """scancel JOB, and its end on every node."""
    job_cancel(job=job, actor=replay.users["alice"], is_admin=True, now=moment)
    for job_node in JobNode.objects.filter(job=job, job__state=JobState.RUNNING):
        job_batch_finished(job_node=job_node, exit_code=0, signal=15, max_rss_kb=None, now=moment)
    replay.epilogs_done(moment)


#: The recording's backfill iterations ran at hh:mm:08 and :38 (bf_interval 30 s after the harness's start):
#: busy-N2-n4 (job 8), submitted at 18:27:37 less than batch_sched_delay after the main scheduler started
#: the job holding gpu1, was started by backfill at 18:27:38 (Scheduler=Backfill, a year's time limit).
BACKFILL_RUN = dt.datetime(2026, 12, 5, 18, 27, 8, tzinfo=dt.UTC)
#: sbatch-hold: 2 s (nsplit.sh's sleep) before job 8's submission, within 18:27:35.
HOLD_SUBMITTED = dt.datetime(2026, 12, 5, 18, 27, 35, 500000, tzinfo=dt.UTC)


@pytest.fixture
def replay(cast, now):
    cluster, _ = harness_cluster(cast, now)
    SlurmCluster.objects.filter(pk=cluster.pk).update(last_backfill_time=BACKFILL_RUN)
    harness = Replay(cluster, cast)
    alice = harness.users["alice"]
    outcomes = {}
    for name, args in cases():
        if name == "hold":
            argv = ("-A", "physics", "-p", "batch", "-o", "/dev/null", *args)
            job_submit(cluster=cluster, user=alice, now=HOLD_SUBMITTED,
                       submission=Submission(argv=argv, alloc_node="localhost", submit_dir=WORK))
            run_pass(cluster, HOLD_SUBMITTED)
            continue
        argv = ("-A", "physics", "-p", "batch", "-o", f"{WORK}/out-{name}.txt", "--chdir", WORK, *args)
        submitted = recorded_time(name, "SubmitTime")
        job = job_submit(cluster=cluster, user=alice, now=submitted,
                         submission=Submission(argv=argv, script=SCRIPT, script_path=f"{WORK}/job.sh",
                                               alloc_node="localhost"))
        shown_at = dt.datetime.fromisoformat(real(f"date-{name}").strip()).replace(tzinfo=dt.UTC)
        run_pass(cluster, recorded_time(name, "LastSchedEval"))
        job.refresh_from_db()
        outcomes[name] = {
            "sbatch": submitted_message(job, Submission(argv=argv)) + "\n",
            "squeue": reports.squeue(cluster, now=shown_at, format="%i|%T|%D|%C|%N").text,
            "scontrol": reports.scontrol_jobs(cluster, now=shown_at, job=str(job.job_id)).text,
            "cpus": dict(JobNode.objects.filter(job=job).values_list("node__name", "cpus")),
            "environment": batch_environment(job), "srun": srun_layout(job, shown_at)}
        end(job, harness, shown_at + dt.timedelta(seconds=1))
    return outcomes


def test_sbatch_answers_as_slurm(replay):
    assert {name: outcome["sbatch"] for name, outcome in replay.items()} == {
        name: real(f"sbatch-{name}") for name in replay}


def test_each_node_gets_slurms_cpus(replay):
    """In node order each node takes as many tasks as it holds, leaving one for each node after it:
    ``-N 2 -n 4`` 3,1, ``-N 3 -n 7`` 5,1,1, ``-N 2 -n 20`` 16,4, ``-N 2 -n 3 -c 2`` 4,2 CPUs; with 2 CPUs
    free on gpu1 ``-N 2 -n 4`` runs 2,2 and ``-n 5`` 2,3."""
    assert {name: outcome["cpus"] for name, outcome in replay.items()} == {
        name: cpus_by_node(real(f"scontrol-d-{name}")) for name in replay}
    assert {name: outcome["squeue"] for name, outcome in replay.items()} == {
        name: real(f"squeue-{name}") for name in replay}


def test_scontrol_show_job_prints_what_it_printed(replay):
    shown = {f"scontrol-{name}": outcome["scontrol"] for name, outcome in replay.items()}
    assert scontrol_differences(shown, REAL) == {}


def recorded_environment(name: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in real(f"out-{name}").split("== ")[0].splitlines())


def test_the_batch_script_sees_slurms_cpus_and_tasks_per_node(replay):
    """out-N2-n4.txt: SLURM_JOB_CPUS_PER_NODE=3,1 SLURM_TASKS_PER_NODE=3,1; out-N3-n7.txt 5,1(x2)."""
    for name, outcome in replay.items():
        recorded = recorded_environment(name)
        names = [env for env in ENV_NAMES + ("SLURM_NTASKS", "SLURM_NNODES") if env in recorded]
        assert {env: outcome["environment"].get(env) for env in names} == {env: recorded[env] for env in names}, name


def test_srun_inside_runs_each_nodes_tasks(replay):
    """out-NAME.txt's ``srun -l``: tasks 0-2 on gpu1 and 3 on gpu2 for ``-N 2 -n 4``, 0-1 on gpu1 and 2-4
    on gpu2 beside the job holding gpu1's other CPUs."""
    assert {name: outcome["srun"] for name, outcome in replay.items()} == {
        name: recorded_srun_layout(real(f"out-{name}").split("== srun -l sh -c")[1]) for name in replay}
