"""trainhub replays fixtures/22.05/srun-plane.sh: srun -m plane=N and -m arbitrary inside a ``-N 2 -n 5``
batch job (out-1.txt) and outside a job. -m arbitrary puts task N on SLURM_HOSTFILE's Nth node (one task
a line unless -n), over the node's CPUs if need be; outside a job the allocation is made on the file's
nodes, and without the file srun refuses it.

The job's allocation is replayed as Slurm gave the same job in srun-dist (4 + 1 CPUs, srun -v's ``cpu
counts: 4(x1),1(x1)``), where trainhub's scheduler gives -N with -n 3 + 2.
"""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model

from trainhub.agent import srun
from trainhub.cli import srun as srun_cli
from trainhub.cli.client import CliError
from trainhub.slurm.models import JobNode, SlurmJob
from trainhub.slurm.services.allocations import allocation_submit
from trainhub.slurm.services.jobs import Submission, job_submit
from trainhub.slurm.steps import StepRequest, arbitrary_hosts

from .conftest import run_pass
from .test_real_slurm import harness_cluster
from .test_real_slurm_ntasks import assert_srun_layout
from .test_real_slurm_srun_dist import step_request

REAL = Path(__file__).parent / "fixtures" / "22.05" / "srun-plane"
#: The SLURM_HOSTFILE job.sh writes (in the job) and srun-plane.sh (outside one).
IN_JOB, ALONE = "gpu2\ngpu1\ngpu2\n", "gpu3\ngpu1\ngpu3\n"


def sections() -> dict[str, str]:
    """out-1.txt's ``== COMMAND`` sections: COMMAND -> what followed."""
    text = (REAL / "out-1.txt").read_text()
    return {part.split("\n", 1)[0].strip(): part.split("\n", 1)[1] for part in text.split("\n== ")[1:]}


def started(cast, now, *options: str) -> SlurmJob:
    """Job 1: alice's ``sbatch -A physics -p batch OPTIONS --wrap true`` on the harness's cluster,
    started by the scheduler."""
    cluster, _ = harness_cluster(cast, now)
    argv = ("-A", "physics", "-p", "batch", *options, "--wrap", "true")
    job_submit(cluster=cluster, user=get_user_model().objects.get(username="alice"),
               submission=Submission(argv=argv, alloc_node="localhost"), now=now)
    run_pass(cluster, now)
    return SlurmJob.objects.get(cluster=cluster, job_id=1)


@pytest.fixture
def running(cast, now):
    job = started(cast, now, "-N", "2", "-n", "5")
    for node, cpus in zip(JobNode.objects.filter(job=job).order_by("node__name"), (4, 1), strict=True):
        JobNode.objects.filter(pk=node.pk).update(cpus=cpus)
    return job, now


@pytest.mark.parametrize("command", ["srun -m plane=2", "srun -m plane=3", "srun --distribution=plane=4", "srun -m block"])
def test_a_plane_places_the_tasks_as_slurm(running, command):
    job, moment = running
    assert_srun_layout(job, sections()[command], moment, step_request(command))


def _arbitrary_request(command: str, hostfile: Path | None) -> StepRequest:
    """The step ``[SLURM_HOSTFILE=F] srun ARGS`` asks for, as trainhub's srun sends it."""
    options = srun.parse([*shlex.split(command.split("srun ", 1)[1].split(" (")[0]), "true"])
    tasks, entries = srun.arbitrary_tasks(options, {"SLURM_HOSTFILE": str(hostfile)} if hostfile else {})
    hosts, tasks = arbitrary_hosts(entries, tasks)
    return StepRequest(tasks=tasks, overlap=True, distribution="arbitrary", hosts=hosts)


@pytest.mark.parametrize("command", ["SLURM_HOSTFILE=hosts srun -n 3 -m arbitrary",
                                     "SLURM_HOSTFILE=hosts srun -m arbitrary"])
def test_arbitrary_puts_each_task_on_its_hostfile_line(running, command, tmp_path):
    """gpu2, gpu1, gpu2: tasks 0 and 2 on gpu2 (one CPU of the job there), 1 on gpu1; SLURM_DISTRIBUTION
    arbitrary, no plane size."""
    job, moment = running
    (tmp_path / "hosts").write_text(IN_JOB)
    assert_srun_layout(job, sections()[command], moment, _arbitrary_request(command, tmp_path / "hosts"))
    environment = srun.own_environment(srun.parse(["-m", "arbitrary", "true"]), {})
    assert {tuple(line.split()[4:]) for line in sections()[command].splitlines()} == {
        (environment["SLURM_DISTRIBUTION"], environment.get("SLURM_DIST_PLANESIZE", "unset"))}


def test_arbitrary_without_a_hostfile_is_refused_by_srun_itself(capsys, monkeypatch):
    command = "srun -n 3 -m arbitrary (no SLURM_HOSTFILE)"
    with pytest.raises(ValueError, match="hostlist") as refused:
        _arbitrary_request(command, None)
    assert str(refused.value).splitlines() == sections()[command].splitlines()
    monkeypatch.setenv("TRAINHUB_STEP_CREDENTIAL", "x")
    monkeypatch.setenv("TRAINHUB_URL", "http://127.0.0.1:9")
    monkeypatch.delenv("SLURM_HOSTFILE", raising=False)
    assert srun.main(["-n", "3", "-m", "arbitrary", "true"]) == 1
    assert capsys.readouterr().err.splitlines() == sections()[command].splitlines()


def test_arbitrary_outside_a_job_is_allocated_the_hostfiles_nodes(cast, now, tmp_path, monkeypatch):
    """srun-alone-arbitrary.txt: ``SLURM_HOSTFILE=F srun -A physics -p batch -n 3 -m arbitrary`` over
    gpu3, gpu1, gpu3 runs on gpu[1,3], task 1 on gpu1."""
    cluster, _ = harness_cluster(cast, now)
    (tmp_path / "hosts").write_text(ALONE)
    monkeypatch.setenv("SLURM_HOSTFILE", str(tmp_path / "hosts"))
    job_options, step = srun_cli.split(["-A", "physics", "-p", "batch", "-n", "3", "-m", "arbitrary", "-l", "sh"])
    job = allocation_submit(cluster=cluster, user=get_user_model().objects.get(username="alice"), is_admin=False,
                            submission=Submission(argv=tuple(job_options), allocation=True), now=now)
    run_pass(cluster, now)
    job = SlurmJob.objects.get(pk=job.pk)
    assert job.node_list == "gpu[1,3]"
    options = srun.parse(step[1:])
    tasks, entries = srun.arbitrary_tasks(options, {"SLURM_HOSTFILE": str(tmp_path / "hosts")})
    hosts, tasks = arbitrary_hosts(entries, tasks)
    request = StepRequest(tasks=tasks, overlap=True, distribution="arbitrary", hosts=hosts)
    assert_srun_layout(job, (REAL / "srun-alone-arbitrary.txt").read_text(), now, request)


def test_arbitrary_outside_a_job_without_a_hostfile_is_refused(monkeypatch):
    monkeypatch.delenv("SLURM_HOSTFILE", raising=False)
    with pytest.raises(CliError) as refused:
        srun_cli.split(["-A", "physics", "-p", "batch", "-n", "3", "-m", "arbitrary", "-l", "sh"])
    assert refused.value.message + "\n" == (REAL / "srun-alone-arbitrary-nohost.err").read_text().rsplit("rc=", 1)[0]
