"""Job arrays: the --array expression, a task's environment and file names, and arrays in the
scheduler, squeue, scancel and REST (the byte-for-byte comparison with Slurm is test_real_slurm_array)."""

from __future__ import annotations

import datetime as dt
import re
import time
from pathlib import Path

import pytest

from tests.slurm.conftest import CLUSTERS, JOBS, run_pass, sbatch
from trainhub.inventory.assignments import _slurm_document
from trainhub.slurm import arrays, reports
from trainhub.slurm.models import JobNode, JobState, SlurmCluster, SlurmJob

RECORDED = Path(__file__).parent / "fixtures" / "22.05" / "array"


@pytest.mark.parametrize("text, ids, limit", [
    ("0-15", tuple(range(16)), 0),
    ("1,3,5", (1, 3, 5), 0),
    ("0-15:4", (0, 4, 8, 12), 0),
    ("1-7:2,20", (1, 3, 5, 7, 20), 0),
    ("1-5%2", (1, 2, 3, 4, 5), 2),
    ("7", (7,), 0),
    ("3,1,3", (1, 3), 0),
])
def test_an_array_expression_gives_its_indices_and_limit(text, ids, limit):
    assert arrays.parse_array(text) == arrays.ArraySpec(ids, limit)


@pytest.mark.parametrize("text", ["", "x", "5-1", "1-5:0", "1-", "-3", "1,,2", "1-5%", "1-5%x", "0-1001", "1001"])
def test_slurm_refuses_these_expressions(text):
    with pytest.raises(arrays.ArrayError, match="^Invalid job array specification$"):
        arrays.parse_array(text)


def test_max_array_size_bounds_every_index():
    assert arrays.parse_array("0-100000", max_array_size=100001).task_ids[-1] == 100000
    with pytest.raises(arrays.ArrayError):
        arrays.parse_array("0-100001", max_array_size=100001)
    with pytest.raises(arrays.ArrayError):  # MaxArraySize=0 turns arrays off
        arrays.parse_array("0", max_array_size=0)


def test_indices_print_as_slurm_compresses_them():
    assert arrays.compress([0, 4, 8, 9, 10, 12]) == "0,4,8-10,12"
    assert arrays.compress(list(range(10000))) == "0-9999"
    assert arrays.expand("0,4,8-10,12") == [0, 4, 8, 9, 10, 12]


def test_a_tasks_environment_is_what_slurm_gave_task_1():
    recorded = (RECORDED / "file-arr-1_1.out").read_text().splitlines()
    env = arrays.task_environment(array_job_id=1, task_id=1, tasks="1-5")
    assert [f"{name}={value}" for name, value in sorted(env.items())] == recorded[:-1]  # the last is SLURM_JOB_ID


@pytest.mark.parametrize("tasks, step", [("0,4,8,12", "4"), ("1,2,5", "1"), ("9", "1")])
def test_the_step_is_the_common_difference_or_1(tasks, step):
    assert arrays.task_environment(array_job_id=3, task_id=9, tasks=tasks)["SLURM_ARRAY_TASK_STEP"] == step


def test_percent_A_and_a_name_the_array_and_the_task():
    assert arrays.file_pattern("arr-%A_%a-%j.out", array_job_id=1, task_id=7) == "arr-1_7-%j.out"
    assert arrays.file_pattern("%%A-%A_%a", array_job_id=1, task_id=None) == "%%A-1_4294967294"
    assert arrays.file_pattern("out-%A", array_job_id=None, task_id=None) == "out-%A"


def test_a_large_array_is_one_record_and_submits_and_lists_quickly(api, accounts, now):
    """10,000 tasks: one row, so sbatch and squeue take what they take for one job (measured with
    PostgreSQL on the 2-core test machine: about 0.07 s and 0.01 s)."""
    SlurmCluster.objects.filter(pk=accounts.pk).update(config={**accounts.config, "MaxArraySize": "10000"})
    assert sbatch(api, "uma", "--wrap", "true").status_code == 200  # the first request pays for warming up
    started = time.perf_counter()
    response = sbatch(api, "uma", "--array=0-9999", "-H", "--wrap", "true")
    submitted = time.perf_counter() - started
    assert response.status_code == 200, response.content
    assert SlurmJob.objects.count() == 2
    started = time.perf_counter()
    text = reports.squeue(accounts, now=now).text
    listed = time.perf_counter() - started
    # both pending with priority 0 (no pass has yet left the fair-share and norms a submission's priority
    # comes from: services.jobs._submission_priority): squeue lists them in reverse (squeue_first_sort)
    assert [line.split()[0] for line in text.splitlines()[1:]] == ["2_[0-9999]", "1"]
    assert submitted < 1 and listed < 1
    assert sbatch(api, "uma", "--array=0-10000", "--wrap", "true").json()["error"]["message"] == (
        "sbatch: error: Batch job submission failed: Invalid job array specification")
    assert sbatch(api, "uma", "--wrap", "true").json()["jobId"] == 3  # the refused array took no id


def test_a_pass_starts_as_many_tasks_as_fit_and_the_rest_pend_as_one_record(api, accounts, now):
    """Two nodes of 8 GPUs: sixteen 1-GPU tasks start in one pass, each under a new job id."""
    job_id = sbatch(api, "uma", "--array=0-39%20", "--gres=gpu:1", "--wrap", "true").json()["jobId"]
    run_pass(accounts)
    running = SlurmJob.objects.filter(state=JobState.RUNNING).order_by("array_task_id")
    assert [job.array_task_id for job in running] == list(range(16))
    assert [job.job_id for job in running] == list(range(2, 18))
    record = SlurmJob.objects.get(job_id=job_id)
    assert (record.state, record.array_pending, record.reason) == (JobState.PENDING, "16-39", "Resources")
    document = _slurm_document(JobNode.objects.get(job=running[3]))["job"]
    assert document["stdoutPattern"] == "slurm-1_3.out"
    assert document["arrayEnvironment"]["SLURM_ARRAY_TASK_ID"] == "3"
    assert document["arrayEnvironment"]["SLURM_ARRAY_TASK_COUNT"] == "40"


def test_the_percent_limit_holds_tasks_back(api, accounts, now):
    sbatch(api, "uma", "--array=1-6%2", "--wrap", "true")
    run_pass(accounts)
    run_pass(accounts)
    record = SlurmJob.objects.get(job_id=1)
    assert SlurmJob.objects.filter(state=JobState.RUNNING).count() == 2
    assert (record.array_pending, record.reason) == ("3-6", "JobArrayTaskLimit")
    assert reports.squeue(accounts, now=now).text.splitlines()[1].split()[0] == "1_[3-6%2]"


def test_the_last_task_runs_under_the_arrays_own_job_id(api, accounts, now):
    sbatch(api, "uma", "--array=4,9", "--wrap", "true")
    run_pass(accounts)
    assert sorted(SlurmJob.objects.values_list("job_id", "array_task_id", "state")) == [
        (1, 9, JobState.RUNNING), (2, 4, JobState.RUNNING)]
    assert sorted(reports.squeue(accounts, now=now, format="%i %A").text.splitlines()[1:]) == ["1_4 2", "1_9 1"]


def test_scancel_of_one_pending_task_and_of_the_whole_array(api, accounts, now):
    sbatch(api, "alice", "--array=0-19", "--gres=gpu:8", "--wrap", "true")
    run_pass(accounts)  # tasks 0 and 1 run, 2-19 pend
    answer = api("alice").post(f"{JOBS}/1_7:cancel", {}, format="json")
    assert answer.status_code == 200, answer.content
    assert answer.json()["arrayTaskId"] == "2-6,8-19"
    assert api("alice").get(f"{JOBS}/1_8").json()["arrayTaskId"] == "8"
    assert api("alice").get(f"{JOBS}/1_7").status_code == 404
    assert api("uma").post(f"{JOBS}/1_8:cancel", {}, format="json").json()["error"]["message"] == (
        "scancel: error: Kill job error on job id 1_8: Access/permission denied")
    squeue = api("alice").get(f"{CLUSTERS}/c1/squeue", {"array": "true", "jobs": "1"}).json()["text"]
    assert [line.split()[0] for line in squeue.splitlines()[1:4]] == ["1_2", "1_3", "1_4"]
    assert api("alice").post(f"{JOBS}/1:cancel", {}, format="json").status_code == 200
    # the record and both running tasks (still in their prolog here, so they end at once)
    assert sorted(SlurmJob.objects.values_list("job_id", "state")) == [
        (1, JobState.CANCELLED), (2, JobState.CANCELLED), (3, JobState.CANCELLED)]


def test_sbatch_test_only_answers_on_stderr_and_queues_nothing(api, accounts):
    answer = sbatch(api, "uma", "--test-only", "--gres=gpu:8", "--wrap", "true").json()
    assert answer["message"] == ""
    assert re.fullmatch(r"sbatch: Job 1 to start at \S+ using 1 processors on nodes a4-0 in partition a4",
                        answer["stderr"])
    assert not SlurmJob.objects.exists()
    assert sbatch(api, "uma", "-N", "2", "--gres=gpu:8", "-t", "30", "--wrap", "true").json()["jobId"] == 2
    run_pass(accounts)
    end = SlurmJob.objects.get(job_id=2).start_time + dt.timedelta(minutes=30)
    answer = sbatch(api, "uma", "--test-only", "-n", "4", "--gres=gpu:8", "--wrap", "true").json()
    assert answer["stderr"] == (f"sbatch: Job 3 to start at {end:%Y-%m-%dT%H:%M:%S} using 4 processors on nodes "
                                "a4-0 in partition a4")


@pytest.mark.parametrize(("args", "message"), [
    (("-N", "3"), "allocation failure: Requested node configuration is not available"),
    (("--gres=gpu:9",), "allocation failure: Requested node configuration is not available"),
    (("-p", "nope"), "sbatch: error: invalid partition specified: nope\n"
                     "allocation failure: Invalid partition name specified")])
def test_sbatch_test_only_refused_says_allocation_failure(api, accounts, args, message):
    """22.05.8 sbatch --test-only prints slurm_job_will_run's refusal with slurm_perror("allocation failure")
    (``-N 5`` on 4 nodes, ``--gres=gpu:9``, ``-p nope``), not submission's line; no job id is taken."""
    answer = sbatch(api, "uma", "--test-only", *args, "--wrap", "true")
    assert (answer.status_code, answer.json()["error"]["message"]) == (400, message)
    assert not SlurmJob.objects.exists()


def test_a_dependency_on_an_array_waits_for_every_task(api, accounts):
    sbatch(api, "uma", "--array=0-1", "--gres=gpu:8", "--wrap", "true")
    after = sbatch(api, "uma", "--dependency=afterok:1", "--wrap", "true").json()["jobId"]
    run_pass(accounts)  # task 0 runs as job 3, task 1 (the last) as the array's own job 1
    SlurmJob.objects.filter(job_id=1).update(state=JobState.COMPLETED, exit_code=0)
    run_pass(accounts)
    assert SlurmJob.objects.get(job_id=after).dependency == "afterok:1(unfulfilled)"  # task 0 still runs
    SlurmJob.objects.filter(job_id=3).update(state=JobState.FAILED, exit_code=1)
    run_pass(accounts)
    assert SlurmJob.objects.get(job_id=after).dependency == "afterok:1(failed)"


@pytest.mark.parametrize("states, combined", [
    (["COMPLETED", "PENDING", "RUNNING"], "PENDING"), (["COMPLETED", "RUNNING"], "RUNNING"),
    (["COMPLETED", "COMPLETED"], "COMPLETED"), (["COMPLETED", "FAILED", "CANCELLED"], "FAILED"),
])
def test_an_arrays_state_for_a_dependency(states, combined):
    assert arrays.combined_state(states) == combined


def test_a_throttled_arrays_record_is_eligible_and_accrues_only_while_its_limit_leaves_it_room(accounts, cast, now):
    """job_mgr.c job_array_start_test: at its %N limit the record's begin time is zeroed (EligibleTime
    Unknown) and it accrues no age; its tasks start eligible from their start (fixtures/22.05/array
    scontrol-1..3); job_independent makes the record eligible again as a task's end leaves it room."""
    from trainhub.inventory.models import Node, NodeState
    from trainhub.slurm.services.jobs import Submission, job_submit
    from trainhub.slurm.services.lifecycle import job_batch_finished, job_node_epilog_finished

    later = now + dt.timedelta(seconds=10)
    record = job_submit(cluster=accounts, user=cast["uma"], now=now,
                        submission=Submission(argv=("--array=0-3%1", "--wrap", "true")))
    run_pass(accounts, now)
    record.refresh_from_db()
    assert (record.reason, record.accrue_time) == (arrays.TASK_LIMIT, None)
    assert "EligibleTime=Unknown" in reports.scontrol_jobs(accounts, now=now, job=str(record.job_id)).text
    task = SlurmJob.objects.get(cluster=accounts, array_job_id=record.job_id, array_task_id=0)
    assert (task.state, task.begin_time, task.accrue_time) == (JobState.RUNNING, now, None)
    Node.objects.filter(dedicated_to=accounts.owner_key).update(state=NodeState.DRAIN, state_reason="maintenance")
    job_node = JobNode.objects.get(job=task)
    job_batch_finished(job_node=job_node, exit_code=0, signal=0, max_rss_kb=None, now=later)
    job_node_epilog_finished(job_node=JobNode.objects.get(pk=job_node.pk), exit_code=0, now=later)
    run_pass(accounts, later)
    record.refresh_from_db()
    assert record.reason != arrays.TASK_LIMIT and (record.begin_time, record.accrue_time) == (later, None)
    run_pass(accounts, later + dt.timedelta(seconds=1))
    record.refresh_from_db()
    assert record.accrue_time == later
