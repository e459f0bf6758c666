"""trainhub replays fixtures/22.05/srun-range.sh (issue 19) on the slurm-harness cluster (4 nodes x 16 CPUs,
CR_CPU): srun's steps as Slurm 22.05.8 ran them.

``srun -N MIN-MAX`` inside an allocation of 3 nodes of one CPU each (an ``sbatch -N 3`` batch script, job 1,
batch-*; ``salloc -N 3``'s command, job 2, salloc-*): the step runs on MAX of the job's nodes, all 3 where
MAX is more (``-N 1-2``: 2 tasks on gpu[1-2]; ``-N 2-4``: 3 on gpu[1-3]), one task a node without -n; with
-n its tasks over those nodes' CPUs (``-N 2-3 -n 3`` runs, ``-N 2-3 -n 4`` and ``-N 1-2 -n 3`` are refused:
``More processors requested than permitted``); MIN over the job's nodes is refused by srun itself (``-N
4-5``: ``Only allocated 3 nodes asked for 4``); -n below MIN lowers it with srun's warning naming MIN;
``-v`` lists ``nodes : 1-2``. A refused step takes no step id (sacct: 1.0 to 1.5 for the six that ran).

A task's exit line as it exits (out-3.txt, exit-order-alone-*.txt): task 0 exits 3 at once, task 1 prints
after 3 s: srun's ``srun: error: gpu1: task 0: Exited with exit code 3`` comes before task 1's line, in a
batch script's output file (two nodes; on one node of one CPU the step is refused) and in srun's output
outside a job, on two nodes and on one.

SLURM_HOSTFILE of 5000 names with ``srun -n 2 --distribution=arbitrary`` outside a job (many-*): on one line
(job 6) or as ``gpu4*5000`` (job 7) the job is allocated gpu4 with 2 CPUs and its step fails (``Unable to
create step for job N: Unspecified error``, exit 1; the job FAILED, JobLaunchFailure, no step); 5000 lines
are read only to the -n-th (job 8 runs on gpu4); ``gpu4*5000,gpu2`` with -n 1 is cut to its first node in
node-list order (job 9 runs on gpu2, with srun's warning). trainhub reads such a file as runs of one name
and counts them, holding no list of 5000.

The recording's noise: srun -v's ``_task_start`` and ``_task_finish`` lines come as the nodes' messages
race (salloc-N1-2-v.err has gpu1's task finish before gpu2's start, batch-N1-2-v.err each node's start
first, as trainhub prints them); that case of salloc's is compared as a set of lines.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import shlex
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from trainhub.agent import srun
from trainhub.cli import srun as srun_cli
from trainhub.slurm import reports
from trainhub.slurm.models import JobNode, JobState, NodePhase, SlurmCluster, SlurmJob
from trainhub.slurm.services.allocations import allocation_relinquish, allocation_submit
from trainhub.slurm.services.jobs import Submission
from trainhub.slurm.services.steps import step_create, step_credential, step_node_finished
from trainhub.slurm.steps import ArbitraryCountDiffers, StepRequest, arbitrary_hosts, node_step_status

from .conftest import run_pass
from .test_real_slurm import harness_cluster, scontrol_differences
from .test_real_slurm_hostfile_edge import peak_memory, written
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
        step = self.job.steps.get(step_id=step_id)
        for line in task_lines(step, label=label):
            print(line)
        finish(step, self.moment)
        return {"state": "COMPLETED", "failed": []}


def task_lines(step, *, label: bool) -> list[str]:
    """What the recording's ``where`` prints in each of the step's tasks, by task: its node, SLURM_PROCID,
    SLURM_STEP_NUM_NODES, SLURM_STEP_NUM_TASKS and SLURM_STEP_NODELIST (``N: `` before it with -l)."""
    parts = list(step.step_nodes.select_related("job_node__node"))
    lines = sorted((task, f"{part.job_node.node.name} {task} {len(parts)} {step.num_tasks} {step.node_list}")
                   for part in parts for task in part.task_ids)
    return [f"{task}: {line}" if label else line for task, line in lines]


def finish(step, moment) -> None:
    """Every task of the step exited 0."""
    for part in step.step_nodes.all():
        step_node_finished(step_node=part, exits=[(task, 0, 0) for task in part.task_ids], now=moment)


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
    steps = [row for row in sacct_rows(job, now) if re.match(rf"{job.job_id}\.\d", row[0])]
    assert steps == [row for row in recorded_sacct_rows(job.job_id) if re.match(rf"{job.job_id}\.\d", row[0])]
    assert len(steps) == 6


#: The recording's sacct fields.
SACCT_FIELDS = ["JobID", "JobName", "State", "ExitCode", "NNodes", "NTasks", "NodeList", "AllocCPUS", "ReqTRES",
                "AllocTRES"]


def sacct_rows(job: SlurmJob, now) -> list[list[str]]:
    """trainhub's sacct -P of the job: its rows' fields."""
    text = reports.sacct(job.cluster, now=now, viewer="alice", jobs=str(job.job_id), parsable=True,
                         fields=SACCT_FIELDS).text
    return [line.split("|")[:len(SACCT_FIELDS)] for line in text.splitlines()[1:]]


def recorded_sacct_rows(job_id: int) -> list[list[str]]:
    """The recording's sacct rows of job ``job_id`` and its steps."""
    return [line.split("|") for line in recorded("sacct")[0].splitlines() if line.split("|")[0].split(".")[0] == str(job_id)]


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


# SLURM_HOSTFILE of 5000 names outside a job ---------------------------------------------------------

#: Each many-NAME case's SLURM_HOSTFILE, as the script's python expression writes it, and its job id.
MANY = {
    "one-line": (",".join(["gpu4"] * 5000) + "\n", 6),
    "star": ("gpu4*5000\n", 7),
    "lines": ("gpu4\n" * 5000, 8),
    "star-cut": ("gpu4*5000,gpu2\n", 9),
}


def many_cases() -> dict[str, list[str]]:
    """The script's ``many NAME CONTENT ARGS...`` lines: NAME -> srun's arguments."""
    return {words[1]: words[3:] for words in (shlex.split(line.split("#")[0]) for line in SCRIPT.read_text().splitlines()
                                              if line.startswith("many "))}


def test_the_recording_has_every_hostfile():
    assert list(many_cases()) == list(MANY)


@pytest.fixture
def many(cast, monkeypatch, tmp_path):
    """Case NAME's hostfile h-NAME in srun's working directory, named in SLURM_HOSTFILE as the recording
    named it; its allocation on the harness's cluster at its recorded moment, with its
    recorded id, started by the scheduler: the job and srun's step launcher's arguments."""
    monkeypatch.chdir(tmp_path)
    cluster, _ = harness_cluster(cast, recorded_moment(6))

    def allocate(name: str) -> tuple[SlurmJob, list[str]]:
        content, job_id = MANY[name]
        moment = recorded_moment(job_id)
        (tmp_path / f"h-{name}").write_text(content)
        monkeypatch.setenv("SLURM_HOSTFILE", f"h-{name}")
        job_options, step = srun_cli.split(["-A", "physics", "-p", "batch", *many_cases()[name], "-l", f"{WORK}/where"])
        SlurmCluster.objects.filter(pk=cluster.pk).update(next_job_id=job_id)
        job = allocation_submit(cluster=cluster, user=get_user_model().objects.get(username="alice"), is_admin=False,
                                submission=Submission(argv=tuple(job_options), allocation=True, alloc_node="localhost",
                                                      submit_dir=WORK), now=moment)
        run_pass(cluster, moment)
        return SlurmJob.objects.get(pk=job.pk), step
    return allocate


def recorded_moment(job_id: int):
    """Job ``job_id``'s submission (scontrol-N.txt's SubmitTime; jobs 8 and 9, not shown, job 7's)."""
    text = (REAL / f"scontrol-{min(job_id, 7)}.txt").read_text()
    return dt.datetime.fromisoformat(re.search(r"SubmitTime=(\S+)", text)[1]).replace(tzinfo=dt.UTC)


def step_of(step: list[str], job: SlurmJob):
    """What the control plane makes of srun's -m arbitrary step in its own allocation: its hosts and task
    count (steps.arbitrary_hosts), from what the step launcher read (srun.arbitrary_tasks)."""
    options = srun.parse(step[1:])
    tasks, entries = srun.arbitrary_tasks(options, {"SLURM_HOSTFILE": os.environ["SLURM_HOSTFILE"]})
    return arbitrary_hosts(entries, tasks, job.num_nodes)


@pytest.mark.parametrize("name", ["one-line", "star"])
def test_5000_names_for_2_tasks_are_allocated_and_the_step_fails(many, now, name):
    """The job gets gpu4 and -n CPUs, its step is refused as slurmctld refuses it (``Unable to create step
    for job N: Unspecified error``, exit 1); the job then ends FAILED, JobLaunchFailure: scontrol show job
    (every line but its Command, which trainhub's allocation does not record), squeue -t all and sacct
    (no step)."""
    job, step = many(name)
    job_id = MANY[name][1]
    assert (job.job_id, job.node_list, job.num_tasks, job.state) == (job_id, "gpu4", 2, JobState.RUNNING)
    with pytest.raises(ArbitraryCountDiffers, match="hostlist specified 5000 nodes"):
        step_of(step, job)
    assert recorded(f"many-{name}") == ("", f"srun: error: Unable to create step for job {job_id}: Unspecified error\n", 1)
    moment = recorded_moment(job_id)
    job = allocation_relinquish(job=job, actor=get_user_model().objects.get(username="alice"), exit_code=1, signal=0,
                                now=moment, launch_failed=True)
    shown = reports.scontrol_jobs(job.cluster, now=moment, job=str(job_id)).text
    assert scontrol_differences({f"scontrol-{job_id}": shown}, REAL) == {
        f"scontrol-{job_id}": [f"-   Command={WORK}/where", "+   Command=(null)"]}
    JobNode.objects.filter(job=job).update(phase=NodePhase.DONE)  # its epilog done, as when squeue ran
    squeue = reports.squeue(job.cluster, now=moment, format="%i|%j|%T|%D|%C|%N|%r", states="all",
                            jobs=str(job_id)).text.splitlines()
    assert squeue[1] == next(line for line in recorded("squeue-all")[0].splitlines() if line.startswith(f"{job_id}|"))
    assert sacct_rows(job, moment) == recorded_sacct_rows(job_id)


@pytest.mark.parametrize("name", ["lines", "star-cut"])
def test_a_file_read_to_n_or_cut_to_n_nodes_runs(many, name):
    """lines: 5000 lines of gpu4, of which srun reads the first 2 for -n 2: 2 tasks on gpu4; star-cut:
    ``gpu4*5000,gpu2`` with -n 1: two distinct nodes for one task, cut to the first in node-list order,
    gpu2, with srun's warning. Each task's line, and sacct of the job and its step once it ended."""
    job, step = many(name)
    moment = recorded_moment(job.job_id)
    out, err, status = recorded(f"many-{name}")
    warnings = Submission(argv=tuple(srun_cli.split(["-A", "physics", "-p", "batch", *many_cases()[name], "where"])[0]),
                          allocation=True).warnings
    assert ("".join(f"srun: {line}\n" for line in warnings), 0) == (err, status)
    hosts, tasks = step_of(step, job)
    JobNode.objects.filter(job=job).update(phase=NodePhase.RUNNING)
    created = step_create(job=job, run_index=0, argv=[f"{WORK}/where"], environment={}, now=moment, label=True,
                          request=StepRequest(tasks=tasks, distribution="arbitrary", hosts=hosts))
    assert "".join(f"{line}\n" for line in task_lines(created, label=True)) == out
    finish(created, moment)
    allocation_relinquish(job=job, actor=get_user_model().objects.get(username="alice"), exit_code=0, signal=0,
                          now=moment)
    assert sacct_rows(job, moment) == recorded_sacct_rows(job.job_id)


def test_a_million_names_on_a_line_are_counted_not_held(tmp_path):
    """A line of 1,000,000 names ``gpu4`` read for -n 2: one run, a few pieces of the file held at a time."""
    path = written(tmp_path / "hosts", "gpu4," * 1000, 1000)
    entries = []

    def read():
        entries.extend(srun.read_hostfile(str(path), 2))
        with pytest.raises(ArbitraryCountDiffers, match="hostlist specified 1000000 nodes"):
            arbitrary_hosts(entries, 2, 1)
    assert peak_memory(read) < 1_000_000 and entries == [("gpu4", 1_000_000)]


def test_runs_of_thousands_of_names_reach_the_step_api_as_counts(allocation):
    """srun sends each run once with how many times it comes (``repeats``): refused in an allocation srun
    did not make with srun's own line; bad counts are a clean 400."""
    job = allocation("batch")

    def post(**body):
        return Client().post("/agent/v1/srun/steps", json.dumps({"argv": ["true"], **body}),
                             content_type="application/json",
                             HTTP_AUTHORIZATION=f"Bearer {step_credential(job_pk=job.pk, run_index=0)}")

    refused = post(distribution="arbitrary", tasks=2, hosts=["gpu1", "gpu2"], repeats=[4000, 1000], inAllocation=True)
    assert (refused.status_code, refused.json()["error"]["message"]) == (
        400, "You asked for 2 tasks but hostlist specified 5000 nodes")
    for repeats in ([0, 1], [1], ["2", 1], [True, 1]):
        answer = post(distribution="arbitrary", tasks=2, hosts=["gpu1", "gpu2"], repeats=repeats)
        assert answer.json()["error"]["details"][0]["fieldViolations"][0]["field"] == "repeats"


def test_srun_alone_allocates_5000_names_and_completes_its_job_failed(slurm_cli_as_uma, tmp_path, monkeypatch):
    """End to end on the test cluster (a4-0, a4-1): 5000 names ``a4-1`` on one line, ``srun -n 2
    --distribution=arbitrary``: srun's one line, exit 1, the job FAILED with JobLaunchFailure on a4-1, no
    step (many-one-line)."""
    from django.utils import timezone

    (tmp_path / "hosts").write_text(",".join(["a4-1"] * 5000) + "\n")
    monkeypatch.setenv("SLURM_HOSTFILE", str(tmp_path / "hosts"))
    code, out, err = slurm_cli_as_uma("srun", "-n", "2", "--distribution=arbitrary", "-l", "true")
    job = SlurmJob.objects.get()
    _, recorded_err, status = recorded("many-one-line")
    assert (code, out, err) == (status, "", recorded_err.replace("job 6:", f"job {job.job_id}:"))
    assert (job.state, job.reason, job.node_list, job.num_tasks, job.steps.count()) == (
        JobState.FAILED, "JobLaunchFailure", "a4-1", 2, 0)
    shown = reports.scontrol_jobs(job.cluster, now=timezone.now(), job=str(job.job_id)).text.splitlines()
    assert shown[3:5] == (REAL / "scontrol-6.txt").read_text().splitlines()[3:5]



# A task's exit line as it exits ----------------------------------------------------------------------

#: The recording's tasks: task 0 exits 3 at once, task 1 prints after 3 s.
EXIT3 = "if [ $SLURM_PROCID = 0 ]; then exit 3; fi; sleep 3; echo done"


def on_test_nodes(text: str, job_id: int, recorded_id: int) -> str:
    """A recorded output on the test cluster (gpu1 -> a4-0, gpu2 -> a4-1), its job id ``job_id``."""
    return (text.replace("gpu1", "a4-0").replace("gpu2", "a4-1")
            .replace(f"job {recorded_id}:", f"job {job_id}:"))


@pytest.mark.django_db(transaction=True)
def test_a_failed_tasks_line_comes_as_it_exits_in_the_output_file(cluster, real_pools, now, tmp_path, live_server):
    """End to end (real agents, srun and tasks) on the test cluster's 2 nodes of one CPU each, the
    recording's script of job 3: out-3.txt byte for byte (task 0's error line before task 1's ``done``;
    ``-N 1 -n 2`` refused: one CPU on a node)."""
    from .test_srun import output, run_job

    script = (REAL.parent / "srun-range.sh").read_text()
    assert f"EXIT3='{EXIT3}'" in script
    body = (f"#!/bin/bash\nsrun -N 2 -n 2 -l sh -c '{EXIT3}'; echo \"two nodes rc=$?\"\n"
            f"srun -N 1 -n 2 -l sh -c '{EXIT3}'; echo \"one node rc=$?\"\n")
    job = run_job(cluster, tmp_path, live_server, now, body, num_nodes=2)
    assert output(tmp_path, job) == on_test_nodes((REAL / "out-3.txt").read_text(), job.job_id, 3).splitlines()


@pytest.mark.parametrize(("name", "nodes"), [("exit-order-alone-4", "2"), ("exit-order-alone-5", "1")])
def test_a_failed_tasks_line_comes_as_it_exits_outside_a_job(slurm_cli_as_uma, name, nodes):
    """End to end, srun from a login shell on a terminal (its stdout and stderr in one stream, as the
    recording's 2>&1): ``srun -N {2,1} -n 2 -l``: the error line, then task 1's, exit 3. sacct's job
    FAILED 3:0 (srun completes it with the worst task's status) and its step the worst node's: 3:0
    over two nodes, COMPLETED 0:0 on one (its last task's, steps.node_step_status)."""
    from django.utils import timezone

    from .test_srun_alone import on_trainhub_nodes, terminal_lines

    code, shown = slurm_cli_as_uma.on_terminal("srun", "-N", nodes, "-n", "2", "-l", "sh", "-c", EXIT3,
                                               react=lambda terminal, shown: None)
    out, _, status = recorded(name)
    assert (code, terminal_lines(shown)) == (status, on_test_nodes(out, 0, 0).splitlines())
    job = SlurmJob.objects.get()
    rows = [row[:7] for row in sacct_rows(job, timezone.now())]
    recorded_rows = ["|".join(row[:7]) for row in recorded_sacct_rows(int(name.rsplit("-", 1)[1]))]
    assert rows == [row.split("|") for row in on_trainhub_nodes(recorded_rows, 1, job.job_id)]


class Answers:
    """A control plane whose step answers ``answers`` in turn (lines as [task, stream, text])."""

    def __init__(self, *answers: dict):
        self.answers = list(answers)

    def call(self, method, path, body=None):
        return {"state": "RUNNING", "next": 0, "lines": [], "failed": [], **self.answers.pop(0)}


def test_exits_read_together_share_a_line_per_node_and_exit_and_are_not_said_again(capsys):
    """srun's follow prints a failure where its ``exit`` line comes among the tasks' lines; tasks of a
    node that failed alike in one answer share a line, as slurmstepd's one message for them."""
    client = Answers({"lines": [[0, "exit", "3 0"], [1, "exit", "3 0"], [2, "stdout", "done"], [3, "exit", "0 9"]],
                      "next": 4},
                     {"state": "FAILED", "next": 4, "failed": [[0, "gpu1", 3, 0], [1, "gpu1", 3, 0],
                                                             [3, "gpu2", 0, 9]]})
    ended = srun.follow(client, 0, label=True, num_tasks=4, poll=0, nodes={0: "gpu1", 1: "gpu1", 2: "gpu2", 3: "gpu2"})
    out, err = capsys.readouterr()
    assert (out, err.splitlines(), ended["said"]) == ("2: done\n", [
        "srun: error: gpu1: tasks 0-1: Exited with exit code 3", "srun: error: gpu2: task 3: Killed"], [0, 1, 3])


def test_a_nodes_step_status_is_its_first_killed_task_else_its_last_tasks_exit():
    """sacct.txt: 5.0 (task 0 exit 3, task 1 exit 0 on one node) COMPLETED 0:0; a signal wins."""
    assert node_step_status([(1, 0, 0), (0, 3, 0)], [0, 1]) == (0, 0)
    assert node_step_status([(0, 0, 0), (1, 3, 0)], [0, 1]) == (3, 0)
    assert node_step_status([(0, 3, 0), (1, 0, 9), (2, 0, 15)], [0, 1, 2]) == (0, 9)
