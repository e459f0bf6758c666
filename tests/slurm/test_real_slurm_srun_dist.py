"""trainhub replays fixtures/22.05/srun-dist.sh: srun -m/--distribution (block, cyclic, plane=N, with
a socket level after ``:``) inside a ``-N 2 -n 5`` and a ``-N 3 -n 7`` batch job. Every task runs on
the node, with the SLURM_LOCALID and SLURM_NODEID, that Slurm gave it (out-N.txt, ``srun -l``), and
scontrol show step says the distribution.

Slurm packed those jobs' allocations 4 + 1 and 5 + 1 + 1 CPUs (srun -v's ``cpu counts``) where
trainhub's scheduler gives ``-N`` with ``-n`` an even 3 CPUs a node (not yet Slurm's); the replay
gives the jobs Slurm's allocations, so that what it compares is the step layout.
"""

from __future__ import annotations

import dataclasses
import re
import shlex
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model

from trainhub.agent.srun import parse, parse_distribution
from trainhub.slurm import reports
from trainhub.slurm.models import JobNode, NodePhase, SlurmJob
from trainhub.slurm.services.jobs import Submission, job_submit
from trainhub.slurm.steps import StepRequest

from .conftest import run_pass
from .test_real_slurm import harness_cluster
from .test_real_slurm_ntasks import assert_srun_layout

REAL = Path(__file__).parent / "fixtures" / "22.05" / "srun-dist"
JOBS = {1: ["-N", "2", "-n", "5"], 2: ["-N", "3", "-n", "7"]}


def sections(job_id: int) -> dict[str, str]:
    """out-N.txt's ``== COMMAND`` sections: COMMAND (``srun ARGS``) -> what followed."""
    text = (REAL / f"out-{job_id}.txt").read_text()
    return {part.split("\n", 1)[0].strip(): part.split("\n", 1)[1] for part in text.split("\n== ")[1:]}


def step_request(command: str) -> StepRequest:
    """The step ``srun ARGS`` asks for, as trainhub's srun sends it (--overlap: the recorded steps
    ran one after another, these all at once)."""
    options = parse([*shlex.split(command)[1:], "true"])
    kind, plane_size = parse_distribution(options.distribution) if options.distribution else (None, 1)
    return StepRequest(nodes=options.nodes, tasks=options.ntasks, overlap=True, distribution=kind,
                       plane_size=plane_size)


@pytest.fixture
def running(cast, now):
    """The harness's cluster with srun-dist.sh's two jobs running."""
    cluster, _ = harness_cluster(cast, now)
    alice = get_user_model().objects.get(username="alice")
    for options in JOBS.values():
        argv = ("-A", "physics", "-p", "batch", *options, "--wrap", "true")
        job_submit(cluster=cluster, user=alice, submission=Submission(argv=argv, alloc_node="localhost"), now=now)
    run_pass(cluster, now)
    for job_id in JOBS:
        counts = re.search(r"cpu counts: (\S+)", sections(job_id)["srun -v -m cyclic"]).group(1)
        cpus = [int(count) for count, repeat in re.findall(r"(\d+)\(x(\d+)\)", counts) for _ in range(int(repeat))]
        for node, node_cpus in zip(JobNode.objects.filter(job__cluster=cluster, job__job_id=job_id)
                                   .order_by("node__name"), cpus, strict=True):
            JobNode.objects.filter(pk=node.pk).update(cpus=node_cpus)
    return cluster, now


@pytest.mark.parametrize("job_id", sorted(JOBS))
def test_each_distribution_places_the_tasks_as_slurm(running, job_id):
    cluster, moment = running
    job = SlurmJob.objects.get(cluster=cluster, job_id=job_id)
    laid_out = {command: output for command, output in sections(job_id).items()
                if command.startswith("srun") and not any(word in command for word in ("hostname", "-N 1", "bogus", "-v"))}
    assert len(laid_out) == 11
    for command, output in laid_out.items():
        assert_srun_layout(job, output, moment, step_request(command))


def test_scontrol_show_step_says_the_distribution(running):
    """job.sh's last two steps, ``srun -m cyclic`` and ``srun -m plane=2`` (in the order they took their ids)."""
    cluster, moment = running
    job = SlurmJob.objects.get(cluster=cluster, job_id=1)
    recorded = [line.strip() for line in sections(1)["scontrol show step"].splitlines() if "Dist=" in line]
    commands = {"CPUFreqReq=Default Dist=Cyclic": "srun -m cyclic", "CPUFreqReq=Default Dist=Plane": "srun -m plane=2"}
    assert sorted(recorded) == sorted(commands)
    for line in recorded:
        assert_srun_layout(job, sections(1)[commands[line]], moment, step_request(commands[line]))
    shown = reports.scontrol_steps(cluster, now=moment, step="1").text
    assert [line.strip() for line in shown.splitlines() if "Dist=" in line] == recorded


def test_without_m_the_tasks_see_sruns_default_distribution_inside_a_job_only(running):
    """out-1.txt: ``srun`` (5 tasks, 2 nodes) block, ``srun -n 2`` cyclic; srun-alone-block.txt: srun
    outside a job, none."""
    from trainhub.slurm.services.steps import step_create

    cluster, moment = running
    job = SlurmJob.objects.get(cluster=cluster, job_id=1)
    JobNode.objects.filter(job=job).update(phase=NodePhase.RUNNING)
    for command in ("srun", "srun -n 2"):
        recorded = {line.split()[6] for line in sections(1)[command].splitlines()}
        for in_allocation, expected in ((True, recorded), (False, {"unset"})):
            request = dataclasses.replace(step_request(command), in_allocation=in_allocation)
            step = step_create(job=job, run_index=0, argv=["sh"], environment={}, request=request, label=True,
                               now=moment)
            assert {step.environment.get("SLURM_DISTRIBUTION", "unset")} == expected, command
    assert {line.split()[-1] for line in (REAL / "srun-alone-block.txt").read_text().splitlines()} == {"unset"}
