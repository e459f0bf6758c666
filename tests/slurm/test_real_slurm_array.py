"""trainhub replays fixtures/22.05/array.sh (job arrays and --test-only, recorded on a fresh slurm-harness
cluster with MaxArraySize=100001) and prints what Slurm printed, byte for byte.

The recording's clock: job 1 (five whole-node tasks, two at a time) submitted, its tasks 1 and 2
started two seconds later (20:24:57); jobs 4 (a stepped range), 5 (a held list), the refused specifications, two --test-only
probes (ids 6 and 7) and job 8 (held) submitted; then job 4's first two tasks started on the two
free nodes, three seconds before the recordings (job 1's tasks six seconds before).
"""

from __future__ import annotations

import datetime as dt
import shlex
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model

from trainhub.common.errors import ApiError
from trainhub.slurm import reports
from trainhub.slurm.models import JobNode, SlurmCluster, SlurmJob
from trainhub.slurm.render import render_job
from trainhub.slurm.services.lifecycle import job_batch_finished, job_node_epilog_finished
from trainhub.slurm.services.jobs import Submission, job_cancel, job_submit, submitted_message, will_run_message

from .conftest import run_pass
from .test_real_slurm import harness, in_any_tie_order, scontrol_differences  # noqa: F401 (a fixture)

REAL = Path(__file__).parent / "fixtures" / "22.05" / "array"
START = dt.datetime(2026, 12, 4, 20, 24, 57, tzinfo=dt.UTC)
SECOND = dt.timedelta(seconds=1)


def real(name: str) -> str:
    return (REAL / f"{name}.txt").read_text()


def real_err(name: str) -> str:
    return (REAL / f"{name}.err").read_text().rsplit("rc=", 1)[0]


def _submissions() -> list[tuple[str, str, list[str]]]:
    """array.sh's sbatch lines before the recordings: (fixture name, user, sbatch arguments)."""
    text = (REAL.parent / "array.sh").read_text().replace("\\\n", " ")
    found = []
    for line in text.splitlines():
        words = shlex.split(line) if line.startswith("rec ") else []
        if words[2:3] == ["as"] and words[4] == "sbatch" and words[1] != "sbatch-large":
            found.append((words[1], words[3], words[5:]))
    return found


@pytest.fixture
def replay(harness, cast):
    cluster, _ = harness
    config = {**cluster.config, "MaxArraySize": "100001"}
    SlurmCluster.objects.filter(pk=cluster.pk).update(config=config)
    cluster.refresh_from_db()
    users = {name: cast.get(name) or get_user_model().objects.get(username=name) for name in ("alice", "bob", "carol")}
    printed = {}
    for index, (name, user, args) in enumerate(_submissions()):
        moment = START - 2 * SECOND if index == 0 else START + 2 * SECOND
        # where the recording's sbatch ran: its working directory and AllocNode:Sid
        submission = Submission(argv=tuple(args), alloc_node="localhost", alloc_sid=7213,
                                submit_dir="/tmp/slurmh.6T0rsj/jobs")
        try:
            job = job_submit(cluster=cluster, user=users[user], submission=submission, now=moment)
            out = submitted_message(job, submission)
            printed[name] = (out + "\n" if out else "", will_run_message(job) + "\n" if job.pk is None else "")
        except ApiError as error:
            printed[name] = ("", error.message + "\n")
        if index == 0:
            run_pass(cluster, START)
    run_pass(cluster, START + 3 * SECOND)
    return cluster, printed, users, START + 6 * SECOND


def test_sbatch_array_and_test_only_print_what_they_printed(replay):
    _, printed, _, _ = replay
    assert set(printed) == {"sbatch-1", "sbatch-2", "sbatch-3", "sbatch-too-big", "sbatch-bad", "sbatch-reversed",
                            "sbatch-zero-step", "test-only-gpu", "test-only-cpu", "sbatch-after"}
    for name, (out, err) in printed.items():
        assert out == real(name), name
        recorded = real_err(name)
        if name.startswith("test-only"):  # its time is the recording's "now"
            recorded = recorded.replace("2026-12-04T20:29:58", f"{START + 2 * SECOND:%Y-%m-%dT%H:%M:%S}")
        assert err == recorded, name


def test_squeue_shows_the_arrays_as_slurm(replay):
    cluster, _, _, moment = replay
    assert in_any_tie_order(reports.squeue(cluster, now=moment).text) == in_any_tie_order(real("squeue"))
    assert in_any_tie_order(reports.squeue(cluster, now=moment, array_tasks=True).text) == in_any_tie_order(
        real("squeue-r"))
    text = reports.squeue(cluster, now=moment, format="%i|%F|%K|%A|%j|%T|%r|%N").text
    assert in_any_tie_order(text) == in_any_tie_order(real("squeue-o"))
    assert in_any_tie_order(reports.squeue(cluster, now=moment, jobs="1").text) == in_any_tie_order(
        real("squeue-j1"))
    assert in_any_tie_order(reports.squeue(cluster, now=moment, jobs="1", array_tasks=True).text) == (
        in_any_tie_order(real("squeue-j1r")))
    assert reports.squeue(cluster, now=moment, jobs="1_4").text == real("squeue-j1-4")


def test_sacct_has_a_row_per_started_task_and_the_eligible_pending_records(replay):
    cluster, _, _, moment = replay
    fields = ["JobID", "JobIDRaw", "JobName", "State", "ExitCode", "AllocTRES%40"]
    assert reports.sacct(cluster, now=moment, viewer="root", all_users=True, fields=fields).text == real("sacct")


def without_time(text: str) -> str:
    """squeue's default layout without its TIME cells (the tasks ran for different times)."""
    return "\n".join(line[:50] + line[61:] for line in text.splitlines())


def _scontrol(text: str, job_id: int) -> dict[str, str]:
    record = next(block for block in text.split("\n\n") if block.startswith(f"JobId={job_id} "))
    return dict(word.split("=", 1) for word in record.split() if "=" in word)


def test_scontrol_array_fields_are_slurms(replay):
    cluster, _, _, _ = replay
    for fixture, job_id in (("scontrol-1", 1), ("scontrol-1", 2), ("scontrol-1", 3)):
        recorded = _scontrol(real(fixture), job_id)
        job = render_job(SlurmJob.objects.get(cluster=cluster, job_id=job_id))
        assert (str(job["arrayJobId"]), job["arrayTaskId"], str(job["arrayTaskThrottle"]), job["reason"]) == (
            recorded["ArrayJobId"], recorded["ArrayTaskId"], recorded["ArrayTaskThrottle"], recorded["Reason"])
    recorded = _scontrol(real("scontrol-1-4"), 1)
    assert render_job(SlurmJob.objects.get(cluster=cluster, job_id=1), task_id=4)["arrayTaskId"] == (
        recorded["ArrayTaskId"])


def test_scontrol_show_job_of_an_array_and_its_tasks_is_slurms(replay):
    """scontrol show job 1 (the array's record, then its started tasks, the last first), 1_4 (the record
    standing for a pending task), 2 and 3 (started tasks)."""
    cluster, _, _, moment = replay

    shown = {fixture: reports.scontrol_jobs(cluster, now=moment, job=job).text
             for fixture, job in (("scontrol-1", "1"), ("scontrol-1-4", "1_4"), ("scontrol-2", "2"), ("scontrol-3", "3"))}
    # a throttled array: its record at its limit eligible Unknown, its started tasks from their start,
    # none of them accruing (services.arrays.throttle_changes)
    assert scontrol_differences(shown, REAL) == {}
    assert reports.scontrol_jobs(cluster, now=moment, job="1_9").stderr == (
        "slurm_load_jobs error: Invalid job id specified\n")


def test_scancel_of_a_pending_task_a_running_task_and_a_whole_array_is_slurms(replay):
    cluster, _, users, moment = replay
    record = SlurmJob.objects.get(cluster=cluster, job_id=1)
    job_cancel(job=record, task_id=4, actor=users["carol"], is_admin=False, now=moment)
    running = SlurmJob.objects.get(cluster=cluster, array_job_id=4, array_task_id=0)
    job_cancel(job=running, actor=users["bob"], is_admin=False, now=moment)
    job_cancel(job=SlurmJob.objects.get(cluster=cluster, job_id=5), actor=users["alice"], is_admin=False, now=moment)
    with pytest.raises(ApiError) as denied:
        job_cancel(job=SlurmJob.objects.get(cluster=cluster, job_id=4), task_id=8, actor=users["carol"],
                   is_admin=False, now=moment)
    assert denied.value.message + "\n" == real_err("scancel-other")
    # the cancelled task's node is free once its script has gone and its epilog has run (the agent's reports)
    job_node = JobNode.objects.get(job=running)
    job_batch_finished(job_node=job_node, exit_code=0, signal=15, max_rss_kb=None, now=moment)
    job_node_epilog_finished(job_node=JobNode.objects.get(pk=job_node.pk), exit_code=0, now=moment)
    run_pass(cluster, moment + SECOND)
    text = reports.squeue(cluster, now=moment + 4 * SECOND, array_tasks=True).text
    assert in_any_tie_order(without_time(text)) == in_any_tie_order(without_time(real("squeue-r-after")))
    # 4_8 started under the next job id, as on the harness (job 11; the large array then got 12)
    assert SlurmJob.objects.get(cluster=cluster, array_job_id=4, array_task_id=8).job_id == 11
    assert scontrol_differences({"scontrol-1-after": reports.scontrol_jobs(cluster, now=moment + 3 * SECOND,
                                                                           job="1").text}, REAL) == {}
