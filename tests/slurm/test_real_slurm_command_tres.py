"""trainhub replays fixtures/22.05/command-tres.sh (batch jobs of alice, bob and carol: scripts and
--wrap, running and pending, with --gres, --mem, --mem-per-cpu and -N) and prints squeue's uid, group,
command and tres-alloc columns and scontrol show job's UserId, GroupId, TRES and Command lines as Slurm
printed them.

The recording: everything submitted at 11:46:26; jobs 1-5 started at once, 6 (all four nodes' GPUs)
waits for Resources and 7 and 8 behind it; squeue and scontrol ran three seconds later.
"""

from __future__ import annotations

import datetime as dt
import shlex
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model

from trainhub.slurm import reports
from trainhub.slurm.models import SlurmCluster
from trainhub.slurm.sbatch_argv import script_path, split_options
from trainhub.slurm.scontrol_job import job_tres_text
from trainhub.slurm.services.jobs import Submission, job_submit

from .conftest import run_pass
from .test_real_slurm import harness_cluster

REAL = Path(__file__).parent / "fixtures" / "22.05" / "command-tres"
SUBMIT = dt.datetime(2026, 12, 5, 11, 46, 26, tzinfo=dt.UTC)
SECOND = dt.timedelta(seconds=1)
#: The recording's submit directory (command-tres.sh's WORK), as work.txt names it.
WORK = (REAL / "work.txt").read_text().strip()
#: command-tres.sh's job.sh and sub/j2.sh.
SCRIPT = "#!/bin/bash\nsleep 300\n"
RECORDED_FILES = {f"{WORK}/job.sh", f"{WORK}/sub/j2.sh"}


def sent_script_path(name: str, options: list[str]) -> str:
    """The scriptPath the CLI sends for ``name`` run in WORK (cli.slurm_submit.submitted_script_path)."""
    chdirs = [value for option, value in split_options(options)[0] if option == "chdir"]
    return script_path(name, chdir=chdirs[-1] if chdirs else WORK, search="/usr/local/bin:/usr/bin:/bin",
                       is_file=RECORDED_FILES.__contains__)


def _submissions() -> list[tuple[str, list[str], list[str] | None]]:
    """command-tres.sh's sbatch lines: (user, sbatch options, the script file and its arguments, or None
    for --wrap and the script read from stdin)."""
    found = []
    for line in (REAL.parent / "command-tres.sh").read_text().splitlines():
        if line.startswith("rec sbatch-"):
            words = [word.replace("$WORK", WORK) for word in shlex.split(line)]
            options, rest = split_options(words[5:])
            found.append((words[3], words[5:len(words) - len(rest)], rest or None))
        elif "<job.sh" in line:
            found.append(("carol", ["-A", "bio"], None))
    return found


@pytest.fixture
def cluster(cast, now):
    """The harness's cluster (its SelectTypeParameters=CR_CPU: memory is not consumable) with the jobs."""
    cluster, _ = harness_cluster(cast, now, SelectTypeParameters="CR_CPU")
    # slurmctld's main scheduler started 1-5 at once; its backfill, which would start 7 and 8 beside
    # 6's wait, had not run again before squeue did (bf_interval 30 s)
    SlurmCluster.objects.filter(pk=cluster.pk).update(last_backfill_time=SUBMIT)
    users = {user.username: user for user in get_user_model().objects.filter(username__in=["alice", "bob", "carol"])}
    for user, options, script in _submissions():
        wrapped = script is None and "--wrap" in options
        submission = Submission(argv=tuple(options), script=None if wrapped else SCRIPT,
                                script_args=tuple(script[1:]) if script else (),
                                script_path=sent_script_path(script[0], options) if script else "")
        job_submit(cluster=cluster, user=users[user], submission=submission, now=SUBMIT)
    run_pass(cluster, SUBMIT + SECOND)
    return cluster


def recorded(name: str) -> str:
    return (REAL / f"{name}.txt").read_text()


def test_squeue_prints_each_jobs_ids_command_and_tres_as_slurm_does(cluster):
    """%U %G %g: the submitter's; %o / Command: the script's file as sbatch found it and its arguments,
    (null) for --wrap and a script read from stdin; tres-alloc: a pending job's requested TRES (its --mem
    x nodes, --mem-per-cpu x CPUs, else the nodes' whole memory), a running one's allocation, which holds
    no memory under CR_CPU."""
    moment = SUBMIT + 3 * SECOND
    shown = reports.squeue(cluster, now=moment, format="%i|%u|%U|%G|%g|%T|%o").text
    assert sorted(shown.splitlines()) == sorted(recorded("squeue-o").splitlines())
    shown = reports.squeue(cluster, now=moment, format=reports.formats.squeue_long_format(
        "JobID:6,State,Command:50,tres-alloc:60")).text
    assert sorted(shown.splitlines()) == sorted(recorded("squeue-O-wide").splitlines())
    shown = reports.squeue(cluster, now=moment, format=reports.formats.squeue_long_format(
        "JobID:6,UserID,GroupID,GroupName,Command,tres-alloc")).text
    assert sorted(shown.splitlines()) == sorted(recorded("squeue-O").splitlines())


@pytest.mark.parametrize("job_id", range(1, 9))
def test_scontrol_prints_each_jobs_ids_tres_and_command_as_slurm_does(cluster, job_id):
    shown = reports.scontrol_jobs(cluster, now=SUBMIT + 3 * SECOND, job=str(job_id)).text.splitlines()
    wanted = ("   UserId=", "   TRES=", "   Command=")
    real = recorded(f"scontrol-{job_id}").splitlines()
    assert [line for line in shown if line.startswith(wanted)] == [line for line in real if line.startswith(wanted)]


def test_an_allocation_holds_memory_where_memory_is_consumable():
    """CR_*_Memory (trainhub's default CR_Core_Memory): a running job's TRES keep its --mem per node."""
    job = dict(cpus=2, nodes=2, gpus=6, mem_per_node=2000, mem_per_cpu=0, mem_per_gpu=0, node_memory_mb=16000)
    assert job_tres_text(requested=False, memory_is_consumable=True, **job) == (
        "cpu=2,mem=4000M,node=2,billing=2,gres/gpu=6")
    assert job_tres_text(requested=False, memory_is_consumable=False, **job) == "cpu=2,node=2,billing=2,gres/gpu=6"
