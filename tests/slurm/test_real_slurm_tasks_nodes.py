"""trainhub replays fixtures/22.05/tasks-nodes.sh: ``-n`` below ``-N``'s minimum on sbatch (the command
line's, or ``#SBATCH -N 3`` under ``-n 2``), salloc and srun. Every node runs a task, so the node
count is lowered to the task count with Slurm's ``Warning: can't run 2 processes on 3 nodes, setting
nnodes to 2``; ``-N 1-4 -n 2``'s maximum is lowered silently.

The recording's clock: the five sbatch at 21:19:12, slurmctld's main scheduler started them at
21:19:13; scontrol two seconds later (RunTime=00:00:02).
"""

from __future__ import annotations

import datetime as dt
import shlex
from pathlib import Path

import pytest

from trainhub.agent import srun
from trainhub.slurm import reports
from trainhub.slurm.models import SlurmCluster
from trainhub.slurm.services.allocations import allocation_submit
from trainhub.slurm.services.jobs import Submission, job_submit

from .conftest import run_pass
from .test_real_slurm import harness_cluster, scontrol_differences
from .test_real_slurm_sched import Replay

REAL = Path(__file__).parent / "fixtures" / "22.05" / "tasks-nodes"
SUBMIT = dt.datetime(2026, 12, 5, 21, 19, 12, tzinfo=dt.UTC)
SECOND = dt.timedelta(seconds=1)
WORK = "/tmp/tasks-nodes.StK9BR"
#: three.sh as the recording wrote it
THREE = "#!/bin/bash\n#SBATCH -N 3\nsleep 600\n"


def recorded_stderr(name: str) -> str:
    """NAME.err without the recording's ``rc=N`` line."""
    return "".join(line for line in (REAL / f"{name}.err").read_text().splitlines(keepends=True)
                   if not line.startswith("rc="))


def sbatch_lines() -> list[tuple[str, list[str]]]:
    """tasks-nodes.sh's sbatch lines: (fixture name, the arguments after ``$SB``)."""
    script = REAL.with_suffix(".sh").read_text()
    return [(words[1], words[5:]) for line in script.splitlines() if line.startswith("rec sbatch-")
            for words in [shlex.split(line.split("#")[0])]]


@pytest.fixture
def replay(cast, now):
    cluster, _ = harness_cluster(cast, now)
    SlurmCluster.objects.filter(pk=cluster.pk).update(last_backfill_time=SUBMIT)
    alice = Replay(cluster, cast).users["alice"]
    warned = {}
    for name, args in sbatch_lines():
        script_file = args[-1] == '"$WORK/three.sh"' or args[-1].endswith("three.sh")
        argv = ("-A", "physics", "-p", "batch", "-o", "/dev/null", *(args[:-1] if script_file else args))
        submission = Submission(argv=argv, script=THREE if script_file else None, alloc_node="localhost",
                                submit_dir=WORK, script_path=f"{WORK}/three.sh" if script_file else "")
        job_submit(cluster=cluster, user=alice, now=SUBMIT, submission=submission)
        warned[name] = "".join(f"sbatch: {warning}\n" for warning in submission.warnings)
    run_pass(cluster, SUBMIT + SECOND)
    return cluster, warned, alice


def test_sbatch_warns_as_slurm_did_and_lowers_the_node_count(replay):
    _, warned, _ = replay
    assert len(warned) == 5
    assert warned == {name: recorded_stderr(name) for name in warned}


def test_scontrol_show_job_prints_what_it_printed(replay):
    cluster, _, _ = replay
    moment = SUBMIT + 3 * SECOND
    shown = {f"scontrol-{job_id}": reports.scontrol_jobs(cluster, now=moment, job=str(job_id)).text
             for job_id in (1, 3, 4, 5)}
    assert scontrol_differences(shown, REAL) == {}


def test_a_node_range_keeps_its_maximum_within_the_tasks(replay):
    """scontrol-2: ``-N 1-4 -n 2`` is ``-N 1-2``, no warning (Slurm then gives it both nodes,
    trainhub one: a node range takes its minimum here)."""
    cluster, warned, _ = replay
    job = cluster.jobs.get(job_id=2)
    assert (warned["sbatch-2"], job.num_nodes, job.max_nodes) == ("", 1, 2)


def test_salloc_warns_in_its_own_name(replay):
    """salloc-6: ``salloc -N 3 -n 2`` runs its command on 2 nodes with 2 tasks."""
    cluster, _, alice = replay
    submission = Submission(argv=("-A", "physics", "-p", "batch", "-N", "3", "-n", "2"), allocation=True)
    job = allocation_submit(cluster=cluster, user=alice, submission=submission, is_admin=False, now=SUBMIT)
    assert f"salloc: {submission.warnings[0]}\n" == recorded_stderr("salloc-6").splitlines(keepends=True)[0]
    assert (job.num_nodes, job.num_tasks) == (2, 2)


def test_a_step_runs_on_as_many_nodes_as_it_has_tasks():
    """salloc-7: ``srun -N 3 -n 2`` and ``srun -N 2 -n 1`` inside a 3-node allocation."""
    warnings = []
    for argv in (["-N", "3", "-n", "2", "true"], ["-N", "2", "-n", "1", "true"], ["-N", "2", "-n", "2", "true"]):
        options = srun.parse(argv)
        warnings.append(srun.nodes_within_tasks(options))
        assert options.nodes == min(int(argv[1]), int(argv[3]))
    recorded = [line for line in recorded_stderr("salloc-7").splitlines() if line.startswith("srun:")]
    assert warnings == [*recorded, None]
