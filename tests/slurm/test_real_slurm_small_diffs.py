"""trainhub replays fixtures/22.05/small-diffs.sh: small srun and scontrol details of Slurm 22.05.

- ``srun -m arbitrary`` with SLURM_HOSTFILE in a ``-N 3 -n 3`` job (out-1.txt, one CPU on each of
  gpu[1-3]): host lists, ``NAME*K``, several names a line, blank lines and comments, -n shorter than
  the file (reading stops there; more distinct nodes than -n are cut to the first in node-list
  order), and every refusal with srun's lines and exit status; outside a job (alone-*.txt) the
  allocation is made on the file's nodes, and a file of more names than -n (alone-over) fails its
  step there (fixtures/22.05/hostfile-edge replays it with the job's records).
- ``srun --cpu-bind=map_cpu:0*N`` with N so large the variables cannot be set (out-1.txt): srun and
  each task's slurmstepd say so and the task runs without them; bad multipliers are refused.
- ``scontrol show node``'s CfgTRES billing under partitions' TRESBillingWeights (node-*.txt).
- sbatch of a job whose nodes would each need more CPUs than any has (sbatch-5 ... sbatch-10):
  slurmctld's extra line where the CPUs per task say so, the job kept FAILED.
- The finished and refused jobs (squeue-all.txt, scontrol-5.txt, sacct-5.txt): ``squeue -t all`` lists them
  COMPLETED before FAILED with their nodes, CPUs and reasons; the refused ``-n 3 --gpus-per-task=1
  --cpus-per-gpu=100`` keeps its priority, NumNodes=3, CPUs/Task=100 and MinCPUsNode=100 beside NumCPUs=3
  and its TRES's one node (sacct's ReqTRES too).

Known differences, kept: 22.05 writes out ``map_cpu:0*2147483647`` for minutes before it launches
anything (killed after 20 s: rc=137), where trainhub sees at once that no variable can hold it and
runs the step without them. A job refused before the cluster's first decay run keeps
Priority=0 in trainhub (a job's priority waits for that run, and it never runs a finished job's), where
slurmctld computes it as it makes the record (the replay runs a pass first).
"""

from __future__ import annotations

import contextlib
import datetime as dt
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model

from trainhub.agent import srun
from trainhub.cli import srun as srun_cli
from trainhub.cli.client import CliError
from trainhub.common.errors import ApiError
from trainhub.slurm import reports
from trainhub.slurm.formats import sacct_text
from trainhub.slurm.models import JobNode, JobStep, NodePhase, SlurmCluster, SlurmJob
from trainhub.slurm.services import lifecycle
from trainhub.slurm.services.allocations import allocation_submit
from trainhub.slurm.services.clusters import partition_update
from trainhub.slurm.services.jobs import Submission, job_submit
from trainhub.slurm.steps import StepRefused, StepRequest, arbitrary_hosts

from .conftest import run_pass
from .test_real_slurm import harness_cluster, scontrol_differences
from .test_real_slurm_node import masked
from .test_real_slurm_ntasks import recorded_srun_layout, srun_layout
from .test_real_slurm_srun_plane import started

REAL = Path(__file__).parent / "fixtures" / "22.05" / "small-diffs"


def sections() -> dict[str, tuple[str, list[str], list[str], int]]:
    """out-1.txt's ``== HEADER`` sections: NAME (the header up to its colon, or the whole
    header) -> (the header's rest, stdout lines, stderr lines, srun's exit status)."""
    found = {}
    for part in ("\n" + (REAL / "out-1.txt").read_text()).split("\n== ")[1:]:
        header, _, body = part.partition("\n")
        lines = body.splitlines()
        status = int(lines.pop().removeprefix("rc="))
        stdout, stderr = (lines[:lines.index("-- stderr")], lines[lines.index("-- stderr") + 1:]) \
            if "-- stderr" in lines else ([], lines)
        name, _, rest = header.partition(": ") if not header.startswith("srun") else (header, "", "")
        found[name] = (rest, stdout, stderr, status)
    return found


SECTIONS = sections()


def hostfile_case(name: str, tmp_path: Path) -> tuple[Path, list[str]]:
    """A case's SLURM_HOSTFILE (its header's lines joined by |) written under ``tmp_path`` as job.sh
    named it (h-NAME, no slash: srun reads ./h-NAME), and srun's arguments."""
    header = SECTIONS[name][0]
    content, _, args = header.partition(" srun ")
    (tmp_path / f"h-{name}").write_text(content.replace("|", "\n"))
    return tmp_path / f"h-{name}", [*args.split(), "-l", "true"]


#: What job 1's batch script has that srun reads: its node and task counts.
JOB_ENVIRONMENT = {"SLURM_NNODES": "3", "SLURM_NTASKS": "3"}


def step_request(name: str, tmp_path: Path) -> StepRequest:
    """The step trainhub's srun asks for (SLURM_HOSTFILE's entries) as the control plane takes it
    (host lists expanded: trainhub.inventory.step_api)."""
    path, argv = hostfile_case(name, tmp_path)
    options, environ = srun.parse(argv), {"SLURM_HOSTFILE": str(path), **JOB_ENVIRONMENT}
    srun.hostfile_alone(options, environ)
    tasks, entries = srun.arbitrary_tasks(options, environ)
    hosts, tasks = arbitrary_hosts(entries, tasks, 3)
    return StepRequest(tasks=tasks, distribution="arbitrary", hosts=hosts)


@pytest.fixture
def in_job(tmp_path, monkeypatch):
    """srun's environment in job 1's batch script (a credential, an unreachable control plane: the
    refusals here are srun's own), in the directory of the hostfiles."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TRAINHUB_STEP_CREDENTIAL", "credential")
    monkeypatch.setenv("TRAINHUB_URL", "http://127.0.0.1:9")
    for name, value in JOB_ENVIRONMENT.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("SLURM_CPU_BIND", raising=False)
    return tmp_path


@pytest.fixture
def running(cast, now):
    """Job 1 (``-N 3 -n 3``) running on gpu[1-3], one CPU on each, as Slurm gave it."""
    job = started(cast, now, "-N", "3", "-n", "3")
    assert (job.node_list, sorted(job.job_nodes.values_list("cpus", flat=True))) == ("gpu[1-3]", [1, 1, 1])
    return job, now


RAN = sorted(name for name, (_, stdout, _, _) in SECTIONS.items() if stdout and not name.startswith("srun"))


def test_the_recording_has_every_case():
    assert RAN == ["blank", "comma", "comma-n", "comma-over", "comment", "more", "no-m-more", "no-m-n", "range",
                   "range-n-short", "trailing-space"]


@pytest.mark.parametrize("name", RAN)
def test_each_task_runs_where_slurm_ran_it(running, name, tmp_path):
    """Node, SLURM_LOCALID and SLURM_NODEID of each task (by its label, SLURM_PROCID), the step's
    SLURM_STEP_NODELIST and task count, and SLURM_DISTRIBUTION (arbitrary, SLURM_HOSTFILE alone too:
    no-m-*)."""
    job, moment = running
    header, stdout, _, status = SECTIONS[name]
    assert srun_layout(job, moment, step_request(name, tmp_path)) == recorded_srun_layout("\n".join(stdout))
    step = JobStep.objects.filter(job=job).latest("pk")
    options = srun.parse(hostfile_case(name, tmp_path)[1])
    srun.hostfile_alone(options, {"SLURM_HOSTFILE": "hosts", **JOB_ENVIRONMENT})
    fields = {(*line.split()[5:8], line.split()[-1]) for line in stdout}
    assert fields == {(step.node_list, str(len(step.step_nodes.all())), str(step.num_tasks),
                       srun.own_environment(options, {})["SLURM_DISTRIBUTION"])} and status == 0


@pytest.mark.parametrize("name", ["range-n-short", "comma-over", "no-m-n"])
def test_fewer_tasks_than_the_jobs_nodes_say_so(name, in_job):
    """srun takes -N from SLURM_NNODES (the job's 3 nodes) and lowers it to -n, with its warning."""
    options = srun.parse(hostfile_case(name, in_job)[1])
    assert [srun.nodes_within_tasks(options, {"SLURM_NNODES": "3"})] == SECTIONS[name][2]
    assert options.nodes is None


@pytest.mark.parametrize("name", ["range-n", "fewer", "leading-space", "empty", "missing", "no-m"])
def test_a_hostfile_srun_cannot_read_is_refused_by_srun(name, in_job, monkeypatch, capsys):
    """slurm_read_hostfile's line, then srun's; exit 1 (``gpu[1-2]`` counts as one line's name
    there: with -n 3 the file is short; without -m the file is read for the job's 3 tasks)."""
    path, argv = (Path("nosuch"), ["-m", "arbitrary", "-n", "2", "true"]) if name == "missing" \
        else hostfile_case(name, in_job)
    monkeypatch.setenv("SLURM_HOSTFILE", path.name)
    code = srun.main(argv)
    out, err = capsys.readouterr()
    _, stdout, stderr, status = SECTIONS[name]
    assert (code, out.splitlines(), err.splitlines()) == (status, stdout, stderr)


def test_more_names_than_tasks_on_a_line_is_refused_with_srun_line(tmp_path):
    """star-over: ``gpu3*3`` with -n 2 is read whole (three names), and -n differs."""
    path, argv = hostfile_case("star-over", tmp_path)
    tasks, entries = srun.arbitrary_tasks(srun.parse(argv), {"SLURM_HOSTFILE": str(path)})
    with pytest.raises(ValueError) as refused:
        arbitrary_hosts(entries, tasks, 3)
    assert [f"srun: error: {refused.value}"] == SECTIONS["star-over"][2] and SECTIONS["star-over"][3] == 1


@pytest.mark.parametrize("name", ["star", "star-n", "star-zero", "outside"])
def test_a_step_slurmctld_refuses_is_refused_with_its_reason(running, name, tmp_path):
    """More tasks than the job's CPUs on the step's nodes (``gpu2*2``: 3 tasks over 2 CPUs), a name
    no node of the job has (``gpu1*0``, gpu4)."""
    job, moment = running
    with pytest.raises(StepRefused) as refused:
        srun_layout(job, moment, step_request(name, tmp_path))
    assert [f"srun: error: Unable to create step for job 1: {refused.value}"] == SECTIONS[name][2]


BINDS = {name.removeprefix("srun --cpu-bind="): section for name, section in SECTIONS.items()
         if name.startswith("srun --cpu-bind=")}


def test_the_recording_has_every_bind():
    assert len(BINDS) == 14 and sum(status == 0 for _, _, _, status in BINDS.values()) == 8


@pytest.mark.parametrize("given", sorted(given for given, section in BINDS.items() if section[3] == 0))
def test_a_list_too_long_for_its_variable_is_not_set(given, in_job):
    """The task's SLURM_CPU_BIND_LIST and SLURM_CPU_BIND lengths (0: unset), type and verbosity; srun's
    lines (after its warning that -n 1 is fewer than the job's nodes) and the task's slurmstepd's."""
    _, stdout, stderr, _ = BINDS[given]
    options = srun.parse([f"--cpu-bind={given}", "-n", "1", "true"])
    environment = srun.own_environment(options, {})
    assert [" ".join([str(len(environment.get("SLURM_CPU_BIND_LIST", ""))), str(len(environment.get("SLURM_CPU_BIND", ""))),
                      environment["SLURM_CPU_BIND_TYPE"], environment["SLURM_CPU_BIND_VERBOSE"]])] == stdout
    unset = srun.cpu_bind_environment(given)[1]
    step = {"numTasks": 1, "layout": [["gpu1", [0]]]}
    assert [srun.NO_CPU_BINDING, srun.nodes_within_tasks(options, {"SLURM_NNODES": "3"}),
            *srun.unset_lines(unset, "srun"), *srun.stepd_unset_lines(step, unset, label=False)] == stderr


def test_each_task_says_so_with_its_label():
    step = {"numTasks": 12, "layout": [["gpu2", [1, 11]], ["gpu1", [0]]]}
    assert srun.stepd_unset_lines(step, ["SLURM_CPU_BIND"], label=True) == [
        " 0: slurmstepd-gpu1: error: environment variable SLURM_CPU_BIND is too long",
        " 0: slurmstepd-gpu1: error: Unable to set SLURM_CPU_BIND",
        " 1: slurmstepd-gpu2: error: environment variable SLURM_CPU_BIND is too long",
        " 1: slurmstepd-gpu2: error: Unable to set SLURM_CPU_BIND",
        "11: slurmstepd-gpu2: error: environment variable SLURM_CPU_BIND is too long",
        "11: slurmstepd-gpu2: error: Unable to set SLURM_CPU_BIND"]


def test_a_billion_values_are_not_written_out():
    """22.05 was still writing out map_cpu:0*2147483647 when killed (rc=137, nothing launched);
    trainhub knows without writing it that neither variable can hold it."""
    assert BINDS["map_cpu:0*2147483647"][2:] == ([srun.NO_CPU_BINDING], 137)
    variables, unset = srun.cpu_bind_environment("map_cpu:0*2147483647")
    assert unset == ["SLURM_CPU_BIND", "SLURM_CPU_BIND_LIST"] and variables == {
        "SLURM_CPU_BIND_VERBOSE": "quiet", "SLURM_CPU_BIND_TYPE": "map_cpu:"}


@pytest.mark.parametrize("given", sorted(given for given, section in BINDS.items() if section[3] == 1))
def test_a_bad_multiplier_is_refused_with_srun_lines(given, in_job, capsys):
    code = srun.main([f"--cpu-bind={given}", "-n", "1", "true"])
    out, err = capsys.readouterr()
    _, stdout, stderr, status = BINDS[given]
    assert (code, out.splitlines(), err.splitlines()) == (status, stdout, stderr)


def alone(name: str) -> tuple[str, str, int]:
    recorded = (REAL / f"alone-{name}.err").read_text().rsplit("rc=", 1)
    return (REAL / f"alone-{name}.txt").read_text(), recorded[0], int(recorded[1])


@pytest.mark.parametrize(("name", "hostfile", "given", "node_list"), [
    ("range", "gpu[3-4]\ngpu3*2\n", ["-m", "arbitrary"], "gpu[3-4]"),
    ("more", "gpu4\ngpu2\ngpu1\n", ["-m", "arbitrary", "-n", "2"], "gpu[2,4]"),
    ("no-m", "gpu4\ngpu2\ngpu4\n", [], "gpu[2,4]")])
def test_outside_a_job_the_allocation_is_the_files_nodes(cast, now, tmp_path, monkeypatch, name, hostfile, given,
                                                         node_list):
    """range: four tasks, three on gpu3; more: the first two lines, gpu4 and gpu2; no-m: SLURM_HOSTFILE
    alone is -m arbitrary."""
    cluster, _ = harness_cluster(cast, now)
    (tmp_path / "hosts").write_text(hostfile)
    monkeypatch.setenv("SLURM_HOSTFILE", str(tmp_path / "hosts"))
    job_options, step = srun_cli.split(["-A", "physics", "-p", "batch", *given, "-l", "sh"])
    job = allocation_submit(cluster=cluster, user=get_user_model().objects.get(username="alice"), is_admin=False,
                            submission=Submission(argv=tuple(job_options), allocation=True), now=now)
    run_pass(cluster, now)
    job = SlurmJob.objects.get(pk=job.pk)
    text, err, status = alone(name)
    assert (job.node_list, job.num_tasks, err, status) == (node_list, len(text.splitlines()), "", 0)
    options = srun.parse(step[1:])
    environ = {"SLURM_HOSTFILE": str(tmp_path / "hosts"), "SLURM_NTASKS": str(job.num_tasks)}
    srun.hostfile_alone(options, environ)
    ntasks, entries = srun.arbitrary_tasks(options, environ)
    hosts, ntasks = arbitrary_hosts(entries, ntasks)
    assert srun_layout(job, now, StepRequest(tasks=ntasks, distribution="arbitrary", hosts=hosts)) == \
        recorded_srun_layout(text)


def test_outside_a_job_a_file_short_of_n_is_refused(tmp_path, monkeypatch):
    """fewer: slurm_read_hostfile's lines, as 22.05 printed them."""
    (tmp_path / "hosts").write_text("gpu4\n")
    monkeypatch.setenv("SLURM_HOSTFILE", str(tmp_path / "hosts"))
    with pytest.raises(CliError) as refused:
        srun_cli.split(["-A", "physics", "-p", "batch", "-m", "arbitrary", "-n", "2", "-l", "sh"])
    _, err, status = alone("fewer")
    assert (refused.value.message + "\n", status) == (err, 1)


def test_outside_a_job_a_file_over_n_is_allocated_and_its_step_fails(tmp_path, monkeypatch):
    """over: job 4 on gpu4, its step refused with slurmctld's reason (test_real_slurm_hostfile_edge replays
    the same case with the job's records)."""
    (tmp_path / "hosts").write_text("gpu4*3\n")
    monkeypatch.setenv("SLURM_HOSTFILE", str(tmp_path / "hosts"))
    job_options, _ = srun_cli.split(["-A", "physics", "-p", "batch", "-m", "arbitrary", "-n", "2", "-l", "sh"])
    assert job_options[-2:] == ["--nodelist=gpu4", "--nodes=1"]
    assert alone("over")[1:] == ("srun: error: Unable to create step for job 4: Unspecified error\n", 1)


def partition_lines(name: str) -> dict[str, dict[str, str]]:
    """partitionnames-NAME.txt: each PartitionName line's options (Nodes and Default left out, as
    test_real_slurm_partition reads them)."""
    found = {}
    for line in (REAL / f"partitionnames-{name}.txt").read_text().splitlines():
        words = dict(word.split("=", 1) for word in line.replace('"', "").split())
        name = words.pop("PartitionName")
        found[name] = {key: value for key, value in words.items() if key not in ("Nodes", "Default")}
    return found


@pytest.mark.parametrize("name", ["batch", "urgent", "half"])
def test_a_nodes_billing_is_its_partitions_highest_weighted(cast, now, name):
    """gpu1 runs a 4-CPU, 2-GPU job (its AllocTRES has no billing), gpu2 is idle."""
    cluster, _ = harness_cluster(cast, now)
    argv = ("-A", "physics", "-p", "batch", "-n", "4", "--gres=gpu:2", "-w", "gpu1", "--wrap", "sleep 900")
    job_submit(cluster=cluster, user=get_user_model().objects.get(username="alice"),
               submission=Submission(argv=argv, alloc_node="localhost"), now=now)
    run_pass(cluster, now)
    for partition in cluster.partitions.all():
        partition_update(partition=partition, config=partition_lines(name)[partition.name], actor="root", now=now)
    shown = reports.scontrol_nodes(cluster, now=now, nodes="gpu1,gpu2").text.replace("Gres=gpu:v100:8", "Gres=gpu:8")
    recorded = (REAL / f"node-{name}.txt").read_text()
    assert [line for line in masked(shown).splitlines() if "TRES" in line] == \
        [line for line in masked(recorded).splitlines() if "TRES" in line]
    assert masked(reports.scontrol_partitions(cluster, now=now).text) == masked(
        (REAL / f"partition-{name}.txt").read_text())


def sbatch_args(name: str) -> list[str]:
    """small-diffs.sh's ``rec NAME as alice sbatch ARGS`` (the -o left out)."""
    line = next(line for line in (REAL.parent / "small-diffs.sh").read_text().splitlines()
                if line.startswith(f"rec {name} as alice sbatch "))
    words = line.split(" sbatch ", 1)[1].split()
    return [word for index, word in enumerate(words) if word != "-o" and words[index - 1] != "-o"]


def submitted(cluster, args: list[str], now) -> str:
    """What sbatch prints for ARGS (the --wrap'd command quoted as the shell gave it), its stdout or
    its refusal."""
    wrap = args.index("--wrap")
    argv = (*args[:wrap], "--wrap", " ".join(args[wrap + 1:]))
    try:
        job = job_submit(cluster=cluster, user=get_user_model().objects.get(username="alice"),
                         submission=Submission(argv=argv, alloc_node="localhost"), now=now)
    except ApiError as exc:
        return exc.message + "\n"
    return f"Submitted batch job {job.job_id}\n"


@pytest.mark.parametrize("name", ["sbatch-5", "sbatch-7", "sbatch-8", "sbatch-9", "sbatch-10"])
def test_a_job_no_node_has_the_cpus_for_is_refused_and_kept_failed(cast, now, name):
    """slurmctld's ``CPU count per node can not be satisfied`` where each node would need more CPUs than
    any has (a task's -c or --gpus-per-task x --cpus-per-gpu, times --ntasks-per-node), none for ``-N 1
    -n 17``; the job keeps its id, FAILED (BadConstraints, 1:0): the next job's id is one more."""
    cluster, _ = harness_cluster(cast, now)
    recorded = (REAL / f"{name}.err").read_text().rsplit("rc=", 1)
    assert submitted(cluster, sbatch_args(name), now) == recorded[0] and recorded[1] == "1\n"
    failed = SlurmJob.objects.get(cluster=cluster, job_id=1)
    assert (failed.state, failed.reason, failed.exit_code) == ("FAILED", "BadConstraints", 1)
    assert submitted(cluster, sbatch_args("sbatch-6"), now) == "Submitted batch job 2\n"
    assert (REAL / "sbatch-6.txt").read_text() == "Submitted batch job 6\n"


@pytest.mark.parametrize("content", ["gpu1*99999999999999", "gpu1*4000,gpu2*97", "gpu1\n" * 4097])
def test_a_hostfile_of_more_names_than_the_control_plane_takes_is_refused_before_it_is_written_out(
        content, in_job, monkeypatch, capsys):
    """``NAME*K`` is K names: a K beyond what a step may have (MAX_HOSTFILE_ENTRIES) is refused with
    srun's hostfile failure, not written out (a MemoryError, or gigabytes, for a K of 22.05's int)."""
    (in_job / "h-big").write_text(content)
    monkeypatch.setenv("SLURM_HOSTFILE", "h-big")
    code = srun.main(["-m", "arbitrary", "true"])
    _, err = capsys.readouterr()
    assert (code, err.splitlines()) == (1, [f"srun: error: Hostfile ./h-big gives more than "
                                            f"{srun.MAX_HOSTFILE_ENTRIES} names", srun.HOSTFILE_FAILED])


#: The recording's clock: job 5's submission (scontrol-5's SubmitTime), squeue -t all 3 s later.
REFUSED_AT = dt.datetime(2026, 12, 6, 1, 8, 2, tzinfo=dt.UTC)
#: Where its sbatch ran (scontrol-5's WorkDir).
WORK = "/tmp/small-diffs.cAZcB0"


@pytest.fixture
def finished(cast, now):
    """The recording's jobs on its clock, all ended: 1 (``-N 3 -n 3``) ran on gpu[1-3]; srun's allocations 2
    and 3 on gpu[3-4] (4 tasks) and gpu[2,4] (2), in one second; 4 (alone-over) on gpu4 with 2 CPUs in the
    second jobs 5-10 came, its step refused (FAILED, JobLaunchFailure); jobs 5-10 as small-diffs.sh submitted them, 6 run and ended at
    once. No decay run in between: every job's priority is the first pass's."""
    cluster, _ = harness_cluster(cast, now)
    alice = get_user_model().objects.get(username="alice")
    start = REFUSED_AT - dt.timedelta(seconds=30)
    run_pass(cluster, start - dt.timedelta(seconds=10))
    SlurmCluster.objects.filter(pk=cluster.pk).update(last_decay_time=start, last_priority_time=start)
    first = job_submit(cluster=cluster, user=alice, now=start,
                       submission=Submission(argv=("-A", "physics", "-p", "batch", "-N", "3", "-n", "3", "--wrap", "true"),
                                             alloc_node="localhost", submit_dir=WORK))
    run_pass(cluster, start)
    lifecycle.job_batch_finished(job_node=first.job_nodes.get(node__name="gpu1"), exit_code=0, signal=0,
                                 max_rss_kb=None, now=start)
    moment = start + dt.timedelta(seconds=10)
    for nodes, tasks in (("gpu[3-4]", "4"), ("gpu[2,4]", "2")):
        job = allocation_submit(cluster=cluster, user=alice, is_admin=False, now=moment, submission=Submission(
            argv=("-A", "physics", "-p", "batch", "-w", nodes, "-n", tasks), allocation=True, alloc_node="localhost"))
        run_pass(cluster, moment)
        lifecycle.job_allocation_ended(job=SlurmJob.objects.get(pk=job.pk), exit_code=0, signal=0, now=moment)
    over = allocation_submit(cluster=cluster, user=alice, is_admin=False, now=REFUSED_AT, submission=Submission(
        argv=("-A", "physics", "-p", "batch", "-w", "gpu4", "-N", "1", "-n", "2"), allocation=True,
        alloc_node="localhost"))
    run_pass(cluster, REFUSED_AT)
    lifecycle.job_launch_failed(job=SlurmJob.objects.get(pk=over.pk), now=REFUSED_AT)
    for name in ("sbatch-5", "sbatch-6", "sbatch-7", "sbatch-8", "sbatch-9", "sbatch-10"):
        args = sbatch_args(name)
        wrap = args.index("--wrap")
        with contextlib.suppress(ApiError):
            job_submit(cluster=cluster, user=alice, now=REFUSED_AT, submission=Submission(
                argv=(*args[:wrap], "-o", "/dev/null", "--wrap", " ".join(args[wrap + 1:])), alloc_node="localhost",
                submit_dir=WORK))
    run_pass(cluster, REFUSED_AT)
    sixth = SlurmJob.objects.get(cluster=cluster, job_id=6)
    lifecycle.job_batch_finished(job_node=sixth.job_nodes.get(), exit_code=0, signal=0, max_rss_kb=None,
                                 now=REFUSED_AT)
    for job_node in JobNode.objects.filter(job__cluster=cluster, phase=NodePhase.EPILOG):
        lifecycle.job_node_epilog_finished(job_node=job_node, exit_code=0, now=REFUSED_AT)
    return cluster


def test_a_refused_jobs_record_keeps_its_request(finished):
    """scontrol-5: ``-n 3 --gpus-per-task=1 --cpus-per-gpu=100`` kept FAILED with its priority, 3 nodes (one a
    task: no node has a task's 100 CPUs), CPUs/Task=100 and MinCPUsNode=100 beside NumCPUs=3 and TRES's
    one node."""
    shown = {"scontrol-5": reports.scontrol_jobs(finished, now=REFUSED_AT, job="5").text}
    assert scontrol_differences(shown, REAL) == {}


def test_sacct_shows_the_refused_job_beside_one_that_ran(finished):
    """sacct-5: the FAILED record's ReqTRES (one node), no AllocTRES, ``None assigned``."""
    fields = ["JobID", "State", "ExitCode", "ReqTRES", "AllocTRES", "NodeList"]
    records = reports.sacct(finished, now=REFUSED_AT, viewer="root", all_users=True, allocations=True, jobs="5,6",
                            fields=fields).items
    assert sacct_text([record for record, _ in records], fields=fields, parsable="plain") == (
        REAL / "sacct-5.txt").read_text()


def test_squeue_all_lists_the_finished_jobs_in_slurms_order(finished):
    """squeue-all: COMPLETED before FAILED (squeue's ``t`` compares the short codes), each with its nodes
    and CPUs, a refused job its node count and reason."""
    shown = reports.squeue(finished, now=REFUSED_AT + dt.timedelta(seconds=3), states="all",
                           format="%i|%T|%D|%C|%b|%N|%r").text
    recorded = (REAL / "squeue-all.txt").read_text()
    assert shown == recorded
