"""trainhub replays fixtures/22.05/srun-range.sh (issue 19) on the slurm-harness cluster (4 nodes x 16 CPUs,
CR_CPU): srun's steps as Slurm 22.05.8 ran them.

``srun -N MIN-MAX`` inside an allocation of 3 nodes of one CPU each (an ``sbatch -N 3`` batch script, job 1,
batch-*; ``salloc -N 3``'s command, job 2, salloc-*): the step runs on MAX of the job's nodes, all 3 where
MAX is more (``-N 1-2``: 2 tasks on gpu[1-2]; ``-N 2-4``: 3 on gpu[1-3]), one task a node without -n; with
-n its tasks over those nodes' CPUs (``-N 2-3 -n 3`` runs, ``-N 2-3 -n 4`` and ``-N 1-2 -n 3`` are refused:
``More processors requested than permitted``); MIN over the job's nodes is refused by srun itself (``-N
4-5``: ``Only allocated 3 nodes asked for 4``); -n below MIN lowers it with srun's warning naming MIN;
``-v`` lists ``nodes : 1-2``. A refused step takes no step id (sacct: 1.0 to 1.5 for the six that ran).

The recording's noise: srun -v's ``_task_start`` and ``_task_finish`` lines come as the nodes' messages
race (salloc-N1-2-v.err has gpu1's task finish before gpu2's start, batch-N1-2-v.err each node's start
first, as trainhub prints them); that case of salloc's is compared as a set of lines.
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest
from django.test import Client

from trainhub.agent import srun
from trainhub.slurm import reports
from trainhub.slurm.models import JobNode, NodePhase, SlurmJob, StepNode
from trainhub.slurm.services.steps import step_credential, step_node_finished

from .test_real_slurm_srun_plane import started

REAL = Path(__file__).parent / "fixtures" / "22.05" / "srun-range"
SCRIPT = REAL.parent / "srun-range.sh"


def step_cases() -> dict[str, list[str]]:
    """The script's ``step NAME ARGS...`` lines: NAME -> srun's arguments."""
    return {words[1]: words[2:] for words in (shlex.split(line) for line in SCRIPT.read_text().splitlines()
                                              if line.startswith("step "))}


CASES = step_cases()
#: Each allocation's job id and name (srun -v shows the name), by its cases' prefix.
ALLOCATIONS = {"batch": (1, "steps"), "salloc": (2, "interactive")}
#: The recording's $WORK: the tasks ran $WORK/where.
WORK = re.search(r"WorkDir=(\S+)", (REAL / "scontrol-6.txt").read_text())[1]


def recorded(name: str) -> tuple[str, str, int]:
    """NAME's stdout (sorted), stderr and exit status."""
    err, _, status = (REAL / f"{name}.err").read_text().rpartition("rc=")
    return (REAL / f"{name}.txt").read_text(), err, int(status)


def test_the_recording_has_every_case():
    assert list(CASES) == ["N1-2", "N2-4", "N2-3-n4", "N2-3-n3", "N4-5", "N1-2-n3", "N2-3-n1", "N1-2-l", "N1-2-v"]


class InProcess:
    """trainhub's srun (trainhub.agent.srun.main) in the allocation, its requests to the step API
    served in process at ``moment``; each step it creates ends at once, every task exiting 0, and
    srun prints each task's line of the recording's ``where`` (its node, SLURM_PROCID,
    SLURM_STEP_NUM_NODES, SLURM_STEP_NUM_TASKS, SLURM_STEP_NODELIST) from the step's record."""

    def __init__(self, job: SlurmJob, moment):
        self.job = job
        self.moment = moment
        self.credential = step_credential(job_pk=job.pk, run_index=job.restart_count)

    def create(self, client, body: dict) -> dict:
        answer = Client().post("/agent/v1/srun/steps", json.dumps({**body, "time": self.moment.timestamp()}),
                               content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {self.credential}")
        if answer.status_code != 200:
            raise srun.Refused(answer.json()["error"]["message"])
        return answer.json()

    def follow(self, client, step_id: int, *, label: bool, num_tasks: int, **_) -> dict:
        parts = list(StepNode.objects.filter(step__job=self.job, step__step_id=step_id)
                     .select_related("step", "job_node__node").order_by("node_index"))
        step = parts[0].step
        for part in parts:
            for task in part.task_ids:
                line = f"{part.job_node.node.name} {task} {len(parts)} {step.num_tasks} {step.node_list}"
                print(f"{task}: {line}" if label else line)
            step_node_finished(step_node=part, exits=[(task, 0, 0) for task in part.task_ids], now=self.moment)
        return {"state": "COMPLETED", "failed": []}


@pytest.fixture
def allocation(cast, now, monkeypatch):
    """A job of 3 nodes of one CPU each (``sbatch -N 3``) running on the harness's cluster, srun's
    environment in it; given a prefix, the job takes that allocation's id."""
    job = started(cast, now, "-N", "3")
    assert (job.node_list, sorted(job.job_nodes.values_list("cpus", flat=True))) == ("gpu[1-3]", [1, 1, 1])
    JobNode.objects.filter(job=job).update(phase=NodePhase.RUNNING)
    served = InProcess(job, now)
    monkeypatch.setattr(srun, "create", served.create)
    monkeypatch.setattr(srun, "follow", served.follow)
    monkeypatch.setenv("TRAINHUB_STEP_CREDENTIAL", served.credential)
    monkeypatch.setenv("TRAINHUB_URL", "http://127.0.0.1:9")
    for name, value in {"SLURM_JOB_NUM_NODES": "3", "SLURM_NNODES": "3", "SLURM_JOB_NODELIST": "gpu[1-3]",
                        "SLURM_JOB_CPUS_PER_NODE": "1(x3)"}.items():
        monkeypatch.setenv(name, value)

    def as_allocation(prefix: str) -> SlurmJob:
        job_id, name = ALLOCATIONS[prefix]
        SlurmJob.objects.filter(pk=job.pk).update(job_id=job_id)
        monkeypatch.setenv("SLURM_JOB_ID", str(job_id))
        monkeypatch.setenv("SLURM_JOB_NAME", name)
        job.refresh_from_db()
        return job
    return as_allocation


@pytest.mark.parametrize("prefix", list(ALLOCATIONS))
def test_each_step_runs_where_slurm_ran_it_and_srun_prints_what_it_printed(allocation, capsys, prefix):
    """The cases in the script's order in one allocation: each one's tasks' lines, srun's stderr (the
    refusals, the warning, -v's lines with the step's id) and exit status, byte for byte."""
    job = allocation(prefix)
    for name, args in CASES.items():
        code = srun.main([*args, f"{WORK}/where"])
        out, err = capsys.readouterr()
        real_out, real_err, real_code = recorded(f"{prefix}-{name}")
        if (prefix, name) == ("salloc", "N1-2-v"):  # the module's docstring: its nodes' messages raced
            err, real_err = sorted(err.splitlines()), sorted(real_err.splitlines())
        assert ("".join(sorted(out.splitlines(keepends=True))), err, code) == (real_out, real_err, real_code), name
    assert job.steps.count() == 6


@pytest.mark.parametrize("prefix", list(ALLOCATIONS))
def test_sacct_lists_the_steps_that_ran_as_slurm(allocation, capsys, now, prefix):
    """sacct's rows of the six steps (JobID.0 to .5): name, state, exit code, NNodes, NTasks, NodeList,
    AllocCPUS and AllocTRES."""
    job = allocation(prefix)
    for args in CASES.values():
        srun.main([*args, f"{WORK}/where"])
    fields = ["JobID", "JobName", "State", "ExitCode", "NNodes", "NTasks", "NodeList", "AllocCPUS", "ReqTRES",
              "AllocTRES"]
    text = reports.sacct(job.cluster, now=now, viewer="alice", jobs=str(job.job_id), parsable=True,
                         fields=fields).text
    steps = [line.split("|")[:10] for line in text.splitlines() if re.match(rf"{job.job_id}\.\d", line)]
    recorded_steps = [line.split("|") for line in recorded("sacct")[0].splitlines()
                      if re.match(rf"{job.job_id}\.\d", line)]
    assert steps == recorded_steps and len(steps) == 6


def test_a_node_range_is_min_and_max():
    options = srun.parse(["-N", "1-2", "true"])
    assert (options.nodes, options.max_nodes) == (1, 2)
    options = srun.parse(["-N", "3", "true"])
    assert (options.nodes, options.max_nodes) == (3, None)
    options = srun.parse(["-N", "1-4", "-n", "2", "true"])
    assert srun.nodes_within_tasks(options) is None and (options.nodes, options.max_nodes) == (1, 2)


@pytest.mark.django_db(transaction=True)
def test_a_batch_script_runs_a_node_range_on_every_node_it_has(cluster, real_pools, now, tmp_path, live_server):
    """End to end on the test cluster's 2 nodes (real agents, srun and tasks): ``-N 1-4`` runs on both
    (as ``-N 2-4`` on the recording's 3), ``-N 3-4`` is refused by srun as ``-N 4-5`` was."""
    from .test_srun import output, run_job

    script = ("#!/bin/bash\nsrun -N 1-4 -l sh -c 'echo $SLURMD_NODENAME $SLURM_PROCID $SLURM_STEP_NUM_NODES "
              "$SLURM_STEP_NUM_TASKS $SLURM_STEP_NODELIST'\nsrun -N 3-4 true; echo \"rc=$?\"\n")
    job = run_job(cluster, tmp_path, live_server, now, script, num_nodes=2)
    refused = recorded("batch-N4-5")[1].replace("3 nodes asked for 4", "2 nodes asked for 3").splitlines()
    assert sorted(output(tmp_path, job)) == sorted(["0: a4-0 0 2 2 a4-[0-1]", "1: a4-1 1 2 2 a4-[0-1]", *refused,
                                                    "rc=1"])


@pytest.mark.parametrize("body", [{"maxNodes": 2}, {"nodes": 3, "maxNodes": 2}])
def test_a_range_without_its_min_or_below_it_is_a_clean_400(allocation, body):
    job = allocation("batch")
    answer = Client().post("/agent/v1/srun/steps", json.dumps({"argv": ["true"], **body}),
                           content_type="application/json",
                           HTTP_AUTHORIZATION=f"Bearer {step_credential(job_pk=job.pk, run_index=0)}")
    assert (answer.status_code, answer.json()["error"]["details"][0]["fieldViolations"][0]["field"]) == (
        400, "maxNodes")
