"""trainhub replays fixtures/22.05/hostfile-edge.sh (issue 19): SLURM_HOSTFILE's edges for srun outside a
job on the slurm-harness cluster (4 nodes x 16 CPUs).

What Slurm did: a file of more names than -n (``gpu4*3`` with -n 2, with or without -m arbitrary; 300 names
on one line without a newline) is allocated on the file's nodes with -n CPUs, and its step then fails
(``Unable to create step for job N: Unspecified error``, exit 1): srun completes its job with 1, the job
FAILED with Reason JobLaunchFailure, scontrol's ExitCode 0:1, sacct's 1:0 and no step record. More distinct
nodes than -n (``gpu4,gpu2,gpu1`` with -n 2) are cut to the first in node-list order, with srun's warning.
slurm_read_hostfile reads 1023 characters at a time: such a piece without a comma is refused (``Line N, of
hostfile F too long``, N the lines before it), one with a comma is cut there and the rest carried on (a
name of 1100 characters then reaches slurmctld: Invalid node name specified), and a comment ends its piece
only (comment-chunk: the text after the piece is a line of its own, gpu1).
``gpu4*5000`` with -n 2 (many) is allocated and its step fails the same: trainhub counts the names, it
does not list them (fixtures/22.05/srun-range replays more such files).
"""

from __future__ import annotations

import datetime as dt
import re
import shlex
import tracemalloc
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone

from trainhub.agent import srun
from trainhub.cli import srun as srun_cli
from trainhub.cli.client import CliError
from trainhub.common.errors import ApiError
from trainhub.slurm import reports
from trainhub.slurm.models import JobState, SlurmJob
from trainhub.slurm.services.allocations import ALLOCATE_FAILED, allocation_relinquish, allocation_submit
from trainhub.slurm.services.jobs import Submission
from trainhub.slurm.steps import ArbitraryCountDiffers, StepRequest, arbitrary_hosts

from .conftest import run_pass
from .test_real_slurm import harness_cluster, scontrol_differences
from .test_real_slurm_ntasks import recorded_srun_layout, srun_layout

REAL = Path(__file__).parent / "fixtures" / "22.05" / "hostfile-edge"
SCRIPT = REAL.parent / "hostfile-edge.sh"

#: Each case's SLURM_HOSTFILE, as the script's python expression writes it.
CONTENTS = {
    "over": "gpu4*3\n",
    "over-no-m": "gpu4*3\n",
    "comma-over": "gpu4,gpu2,gpu1\n",
    "one-line": "gpu4," * 299 + "gpu4",
    "many": "gpu4*5000\n",
    "comment-chunk": "gpu2#" + "x" * 1018 + "gpu1\n",
    "line-number": "gpu4," * 250 + "gpu4\n" + " gpu2\n",
    "long-1022": "g" * 1022 + "\n",
    "long-1023": "g" * 1023 + "\n",
    "long-line2": "gpu1\n" + "g" * 1500 + "\n",
    "long-nonl": "g" * 5000,
    "carry": "gpu1," + "g" * 1100 + "\n",
    "carry-long": "gpu1," + "g" * 3000 + "\n",
}


def script_cases() -> dict[str, list[str]]:
    """The script's ``alone NAME CONTENT ARGS...`` lines: NAME -> srun's arguments."""
    return {words[1]: words[3:] for words in (shlex.split(line) for line in SCRIPT.read_text().splitlines()
                                              if line.startswith("alone "))}


CASES = script_cases()


def recorded(name: str) -> tuple[str, str, int]:
    """alone-NAME's stdout, stderr and exit status."""
    err, _, status = (REAL / f"alone-{name}.err").read_text().rpartition("rc=")
    return (REAL / f"alone-{name}.txt").read_text(), err, int(status)


@pytest.fixture
def hostfile(tmp_path, monkeypatch):
    """Write case NAME's file as h-NAME in srun's working directory and name it in SLURM_HOSTFILE as the
    recording did (srun shows it as ./h-NAME); srun's arguments."""
    monkeypatch.chdir(tmp_path)

    def write(name: str) -> list[str]:
        (tmp_path / f"h-{name}").write_bytes(CONTENTS[name].encode())
        monkeypatch.setenv("SLURM_HOSTFILE", f"h-{name}")
        return ["-A", "physics", "-p", "batch", *CASES[name], "-l", "sh"]
    return write


def test_the_cases_are_the_scripts():
    assert sorted(CASES) == sorted(CONTENTS)
    assert all(f"alone {name} " in SCRIPT.read_text() for name in CASES)


@pytest.mark.parametrize("name", ["long-1023", "long-line2", "long-nonl", "carry-long", "line-number"])
def test_a_file_slurm_read_hostfile_refuses_is_refused_with_its_lines(hostfile, name):
    """A piece of 1023 characters without a comma, and a line not starting with a letter or digit: no job."""
    with pytest.raises(CliError) as refused:
        srun_cli.split(hostfile(name))
    _, err, status = recorded(name)
    assert (refused.value.message + "\n", 1) == (err, status)


#: The recording's $WORK, srun's working directory (its jobs' WorkDir).
WORK = "/tmp/hostfile-edge.vFuPH9"


def allocated(cast, now, argv: list[str]) -> tuple[SlurmJob, list[str]]:
    """srun's allocation of ``argv`` on the harness's cluster, made from the recording's host and directory,
    started by the scheduler; srun's step launcher's arguments."""
    cluster, _ = harness_cluster(cast, now)
    job_options, step = srun_cli.split(argv)
    submission = Submission(argv=tuple(job_options), allocation=True, alloc_node="localhost", submit_dir=WORK)
    job = allocation_submit(cluster=cluster, user=get_user_model().objects.get(username="alice"), is_admin=False,
                            submission=submission, now=now)
    run_pass(cluster, now)
    return SlurmJob.objects.get(pk=job.pk), step


@pytest.mark.parametrize(("name", "job_id"), [("long-1022", None), ("carry", None)])
def test_a_name_slurmctld_does_not_know_is_refused_at_allocation(cast, now, hostfile, name, job_id):
    """A name of 1022 characters fits a piece; one of 1100 after a comma is carried whole: both reach the
    allocation, which refuses them (no job id taken: the recording's next job is the one after)."""
    cluster, _ = harness_cluster(cast, now)
    job_options, _ = srun_cli.split(hostfile(name))
    with pytest.raises(ApiError) as refused:
        allocation_submit(cluster=cluster, user=get_user_model().objects.get(username="alice"), is_admin=False,
                          submission=Submission(argv=tuple(job_options), allocation=True), now=now)
    _, err, status = recorded(name)
    assert (refused.value.message.replace(ALLOCATE_FAILED, srun_cli.SRUN.allocate_failed) + "\n", 1) == (err, status)
    assert not SlurmJob.objects.exists()


def step_hosts(step: list[str], environ: dict[str, str]) -> tuple[int | None, list[str]]:
    """What srun's step launcher sends for ``-m arbitrary`` (or SLURM_HOSTFILE alone): -n and the file's entries."""
    options = srun.parse(step[1:])
    srun.hostfile_alone(options, environ)
    return srun.arbitrary_tasks(options, environ)


@pytest.mark.parametrize(("name", "job_id"), [("over", 1), ("over-no-m", 2), ("one-line", 4), ("many", 5)])
def test_more_names_than_n_are_allocated_and_the_step_fails(cast, now, hostfile, name, job_id):
    """The job gets the file's node and -n CPUs (scontrol-N.txt: NodeList=gpu4, NumCPUs=2); its step
    cannot be laid out (srun's line); the allocation then ends FAILED, JobLaunchFailure, 0:1 in scontrol,
    1:0 in sacct, no step."""
    job, step = allocated(cast, now, hostfile(name))
    assert (job.node_list, job.num_tasks, job.state) == ("gpu4", 2, JobState.RUNNING)
    ntasks, entries = step_hosts(step, {"SLURM_HOSTFILE": f"h-{name}"})
    with pytest.raises(ArbitraryCountDiffers):
        arbitrary_hosts(entries, ntasks, job.num_nodes)
    _, err, status = recorded(name)
    assert (err, status) == (f"srun: error: Unable to create step for job {job_id}: Unspecified error\n", 1)
    SlurmJob.objects.filter(pk=job.pk).update(job_id=job_id)  # the recording's id (jobs before it took theirs)
    job = allocation_relinquish(job=job, actor=get_user_model().objects.get(username="alice"), exit_code=1,
                                signal=0, now=now, launch_failed=True)
    assert (job.state, job.reason) == (JobState.FAILED, "JobLaunchFailure")
    shown = reports.scontrol_jobs(job.cluster, now=now, job=str(job_id)).text.splitlines()
    assert shown[3:5] == (REAL / f"scontrol-{job_id}.txt").read_text().splitlines()[3:5]
    text = reports.sacct(job.cluster, now=now, viewer="alice", jobs=str(job_id), parsable=True,
                         fields=["JobID", "JobName", "State", "ExitCode", "NNodes", "NTasks", "NodeList"]).text
    rows = [line.split("|")[:7] for line in (REAL / "sacct.txt").read_text().splitlines()]
    assert [line.split("|")[:7] for line in text.splitlines()] == [rows[0], *[row for row in rows
                                                                              if row[0] == str(job_id)]]


def test_the_failed_jobs_scontrol_is_slurms(cast, hostfile):
    """scontrol show job of job 1 after its step failed, at the recording's moment (submitted, started and
    ended in the same second): every line but its Command, which trainhub's allocation does not record."""
    moment = dt.datetime.fromisoformat(re.search(r"SubmitTime=(\S+)", (REAL / "scontrol-1.txt").read_text())[1])
    moment = moment.replace(tzinfo=dt.UTC)
    job, _ = allocated(cast, moment, hostfile("over"))
    job = allocation_relinquish(job=job, actor=get_user_model().objects.get(username="alice"), exit_code=1,
                                signal=0, now=moment, launch_failed=True)
    shown = reports.scontrol_jobs(job.cluster, now=moment, job="1").text
    assert scontrol_differences({"scontrol-1": shown}, REAL) == {"scontrol-1": ["-   Command=sh", "+   Command=(null)"]}


@pytest.mark.parametrize(("name", "node_list"), [("comma-over", "gpu[1-2]"), ("comment-chunk", "gpu[1-2]")])
def test_the_allocation_is_the_files_first_nodes_and_the_tasks_run_where_slurm_ran_them(cast, now, hostfile, name,
                                                                                       node_list):
    """comma-over: three nodes for -n 2 are the first two in node-list order, with srun's warning;
    comment-chunk: the comment ends its piece, and gpu1 after it is the second task's node."""
    argv = hostfile(name)
    job_options, _ = srun_cli.split(argv)
    text, err, status = recorded(name)
    warnings = Submission(argv=tuple(job_options), allocation=True).warnings
    assert ([f"srun: {line}\n" for line in warnings], status) == ([line for line in [err] if line], 0)
    job, step = allocated(cast, now, argv)
    assert (job.node_list, job.num_tasks) == (node_list, len(text.splitlines()))
    ntasks, entries = step_hosts(step, {"SLURM_HOSTFILE": f"h-{name}", "SLURM_NTASKS": str(job.num_tasks)})
    hosts, ntasks = arbitrary_hosts(entries, ntasks, job.num_nodes)
    assert srun_layout(job, now, StepRequest(tasks=ntasks, distribution="arbitrary", hosts=hosts)) == \
        recorded_srun_layout(text)


def written(path: Path, piece: str, times: int) -> Path:
    """A file of ``piece`` ``times`` over, written a piece at a time."""
    with path.open("w") as handle:
        for _ in range(times):
            handle.write(piece)
    return path


def peak_memory(action) -> int:
    """The most bytes Python held while ``action()`` ran."""
    tracemalloc.start()
    try:
        action()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_file_without_newlines_is_read_a_piece_at_a_time(tmp_path):
    """50 MB of one name without a newline: refused at its first piece, with no more than a piece held."""
    path = written(tmp_path / "hosts", "g" * 1_000_000, 50)

    def read():
        with pytest.raises(ValueError, match="Line 0, of hostfile"):
            srun.read_hostfile(str(path), 1)
    assert peak_memory(read) < 1_000_000


def test_millions_of_comma_separated_names_are_refused_before_they_are_split(now):
    """A step body whose one entry names 2,000,000 nodes: refused with the bound's message, without a list of them."""
    entry = "gpu1," * 2_000_000

    def split():
        with pytest.raises(ValueError, match=f"more than {srun.MAX_HOSTFILE_ENTRIES} nodes"):
            arbitrary_hosts([(entry, 1)], None)
    assert peak_memory(split) < 1_000_000


def test_srun_completes_its_job_failed_when_its_step_is_refused(slurm_cli_as_uma, tmp_path, monkeypatch):
    """End to end on the test cluster (a4-0, a4-1): ``SLURM_HOSTFILE=a4-1*3 srun -m arbitrary -n 2``:
    srun's one line, exit 1, the job FAILED with JobLaunchFailure (alone-over, scontrol-1.txt)."""
    (tmp_path / "hosts").write_text("a4-1*3\n")
    monkeypatch.setenv("SLURM_HOSTFILE", str(tmp_path / "hosts"))
    code, out, err = slurm_cli_as_uma("srun", "-m", "arbitrary", "-n", "2", "-l", "true")
    job = SlurmJob.objects.get()
    _, recorded_err, status = recorded("over")
    assert (code, out, err) == (status, "", recorded_err.replace("job 1:", f"job {job.job_id}:"))
    assert (job.state, job.reason, job.node_list, job.steps.count()) == (JobState.FAILED, "JobLaunchFailure", "a4-1", 0)
    shown = reports.scontrol_jobs(job.cluster, now=timezone.now(), job=str(job.job_id)).text.splitlines()
    assert shown[3:5] == (REAL / "scontrol-1.txt").read_text().splitlines()[3:5]
