"""The agent API's step endpoints: srun's step credential is good for one run of one job only, a
node reports only its own tasks, and bad requests are clean 400s with srun's reasons."""

import json

import pytest
from django.test import Client

from tests.agent.harness import join_nodes
from tests.conftest import later
from tests.slurm.conftest import SRUN_FIXTURES, STEPS_FIXTURES, make_job, start_job
from trainhub.slurm import reports
from trainhub.inventory.models import Node
from trainhub.inventory.assignments import node_assignments
from trainhub.slurm.models import JobNode, JobRun, JobState, JobStep, NodePhase, SlurmJob, StepNode
from trainhub.slurm.services.steps import step_credential, step_node_finished

pytestmark = pytest.mark.django_db


#: The uid of the recordings' submitter, the harness's alice (scontrol show step's UserId=1001).
RECORDED_UID = 1001


def running(cluster, now, nodes=("a4-0", "a4-1"), **fields) -> SlurmJob:
    """A job whose batch script runs (every node past its prolog), submitted by a user of the recordings' uid."""
    job = make_job(cluster, num_nodes=len(nodes), now=now, **{"gpus_per_node": 2, "uid": RECORDED_UID, **fields})
    start_job(job, list(nodes), now=now)
    JobNode.objects.filter(job=job).update(phase=NodePhase.RUNNING)
    return job


def call(credential, method, path, body=None):
    client = Client()
    headers = {"HTTP_AUTHORIZATION": f"Bearer {credential}"}
    if method == "GET":
        return client.get(path, **headers)
    return client.post(path, json.dumps(body or {}), content_type="application/json", **headers)


def credential(job):
    return step_credential(job_pk=job.pk, run_index=job.restart_count)


def srun(job, **body):
    return call(credential(job), "POST", "/agent/v1/srun/steps", {"argv": ["hostname"], **body})


def test_srun_creates_numbered_steps_laid_out_over_the_allocation(cluster, now):
    job = running(cluster, now, num_tasks=4)
    first = srun(job, label=True)
    assert first.status_code == 200, first.content
    assert first.json() == {"stepId": 0, "jobId": job.job_id, "nodeList": "a4-[0-1]", "numTasks": 4,
                            "killWait": 30, "layout": [["a4-0", [0, 1]], ["a4-1", [2, 3]]]}
    assert srun(job, nodes=1, tasks=1, overlap=True).json()["stepId"] == 1
    assert [(p.job_node.node.name, p.task_ids, p.gpu_indices) for p in StepNode.objects.filter(step__step_id=0)] == [
        ("a4-0", [0, 1], [0, 1]), ("a4-1", [2, 3], [0, 1])]


def test_srun_m_deals_the_tasks_as_asked(cluster, now):
    job = running(cluster, now, num_tasks=4)
    assert srun(job, distribution="cyclic", overlap=True).json()["layout"] == [["a4-0", [0, 2]], ["a4-1", [1, 3]]]
    # a node takes no more tasks than its CPUs hold (2 here) while another has room
    assert srun(job, distribution="plane=3", overlap=True).json()["layout"] == [["a4-0", [0, 1]], ["a4-1", [2, 3]]]
    assert list(JobStep.objects.filter(job=job).values_list("distribution", flat=True)) == ["cyclic", "plane"]


def test_only_the_batch_host_gets_the_credential_and_every_node_its_tasks(cluster, now):
    job = running(cluster, now, num_tasks=4)
    srun(job, tasksPerNode=1, gpusPerNode=1)
    documents = {name: node_assignments(node=Node.objects.get(name=name))["slurm"][0] for name in ("a4-0", "a4-1")}
    assert documents["a4-0"]["stepCredential"] == credential(job)
    assert documents["a4-1"]["stepCredential"] is None
    assert [(d["steps"][0]["taskIds"], d["steps"][0]["gpuIndices"], d["steps"][0]["hosts"], d["steps"][0]["nodeIndex"])
            for d in documents.values()] == [([0], [0], ["a4-0", "a4-1"], 0), ([1], [0], ["a4-0", "a4-1"], 1)]


def finish(step_id, now):
    for part in StepNode.objects.filter(step__step_id=step_id):
        step_node_finished(step_node=part, exits=[(task, 0, 0) for task in part.task_ids], now=now)


def test_a_step_waits_while_running_steps_hold_what_it_needs(cluster, now):
    """fixtures/22.05/steps/out-1.txt: the second srun --gres=gpu:8 waits for the first to end, then
    gets the next step id."""
    job = running(cluster, now, nodes=("a4-0",), num_tasks=1, gpus_per_node=8)
    assert srun(job, tasks=1, gpusPerNode=8).json()["stepId"] == 0
    waiting = srun(job, tasks=1, gpusPerNode=8)
    assert (waiting.status_code, waiting.json()) == (
        202, {"jobId": job.job_id, "retry": True, "reason": "Requested nodes are busy", "stepsEnded": 0})
    assert JobStep.objects.filter(job=job).count() == 1
    finish(0, later(now, 8))
    assert srun(job, tasks=1, gpusPerNode=8).json()["stepId"] == 1


def test_exact_steps_share_the_cpus_and_take_different_gpus(cluster, now):
    """fixtures/22.05/steps/out-3.txt and sacct.txt: --exact steps of one CPU each run side by side."""
    job = running(cluster, now, nodes=("a4-0",), num_tasks=2, gpus_per_node=2)
    assert srun(job, tasks=1, exact=True, gpusPerNode=1).status_code == 200
    assert srun(job, tasks=1, exact=True, gpusPerNode=1).status_code == 200
    assert srun(job, tasks=1, exact=True, gpusPerNode=0).status_code == 202  # no CPU left
    assert [(p.step.step_id, p.cpus, p.gpu_indices) for p in StepNode.objects.order_by("step__step_id")] == [
        (0, 1, [0]), (1, 1, [1])]
    finish(0, now)
    assert srun(job, tasks=1, exact=True).status_code == 202  # without --gres: every GPU of the job
    assert srun(job, tasks=1, exact=True, gpusPerNode=1).json()["stepId"] == 2
    rows = reports.sacct(cluster, now=now, viewer="uma", jobs=str(job.job_id), fields=["JobID", "AllocCPUS"]).rows()
    assert [(row["JobID"], row["AllocCPUS"]) for row in rows] == [(str(job.job_id), 2)] + [
        (f"{job.job_id}.{n}", 1) for n in range(3)]


def test_a_step_that_can_never_fit_fails_with_sruns_lines(cluster, now):
    """fixtures/22.05/steps/out-5.txt (job 5: 2 CPUs, 2 GPUs): srun prints each line after ``srun: error: ``."""
    job = running(cluster, now, nodes=("a4-0",), num_tasks=2, gpus_per_node=2)
    recorded = (STEPS_FIXTURES / "out-5.txt").read_text().replace("job 5", f"job {job.job_id}").splitlines()
    errors = [line.removeprefix("srun: error: ") for line in recorded if line.startswith("srun: error: ")]
    assert srun(job, gpusPerNode=4).json()["error"]["message"] == "\n".join(errors[:2])
    assert srun(job, tasks=3).json()["error"]["message"] == errors[2]


def test_arbitrary_host_lists_are_expanded_and_a_count_other_than_n_refused(cluster, now):
    """srun sends SLURM_HOSTFILE's entries (fixtures/22.05/small-diffs/out-1.txt): ``a4-[0-1]`` is two
    tasks; ``a4-1*3`` read with -n 2 is three names, refused with srun's own line in an allocation srun
    did not make, with slurmctld's in its own (fixtures/22.05/hostfile-edge/alone-over.err)."""
    job = running(cluster, now, num_tasks=4)
    answer = srun(job, distribution="arbitrary", hosts=["a4-[1,0]", "a4-1"], overlap=True, inAllocation=True)
    assert (answer.json()["numTasks"], answer.json()["layout"]) == (3, [["a4-0", [1]], ["a4-1", [0, 2]]])
    over = {"distribution": "arbitrary", "hosts": ["a4-1", "a4-1", "a4-1"], "tasks": 2}
    refused = srun(job, **over, inAllocation=True)
    assert (refused.status_code, refused.json()["error"]["message"]) == (
        400, "You asked for 2 tasks but hostlist specified 3 nodes")
    alone = srun(job, **over)
    assert (alone.status_code, alone.json()["error"]["message"]) == (
        400, f"Unable to create step for job {job.job_id}: Unspecified error")


@pytest.mark.parametrize("hosts", [["a4-0," * 4096 + "a4-0"], ["a4-[0-4096]"], ["a4-0"] * 4097])
def test_more_arbitrary_hosts_than_a_step_places_are_a_clean_400(cluster, now, hosts):
    """MAX_HOSTFILE_ENTRIES names, in one entry of comma-separated names (counted before they are split
    apart), a host list's range or entries."""
    answer = srun(running(cluster, now), distribution="arbitrary", hosts=hosts, inAllocation=True)
    assert answer.status_code == 400
    assert "4096" in answer.json()["error"]["message"]


@pytest.mark.parametrize("body, reason", [
    ({"nodes": 3}, "Requested node configuration is not available"),
    ({"gpusPerNode": 3}, "Invalid generic resource (gres) specification"),
])
def test_a_step_the_allocation_cannot_hold_is_refused_with_sruns_reason(cluster, now, body, reason):
    job = running(cluster, now)
    answer = srun(job, **body)
    assert answer.status_code == 400
    assert answer.json()["error"]["message"].splitlines()[-1] == f"Unable to create step for job {job.job_id}: {reason}"


@pytest.mark.parametrize("body", [{"argv": []}, {"argv": [""]}, {"argv": "hostname"}, {"nodes": 0},
                                  {"tasks": "two"}, {"gpusPerNode": -1}, {"environment": {"A": 1}},
                                  {"srunPid": -1}, {"srunHost": 7}, {"distribution": "bogus"},
                                  {"distribution": "plane=0"}])
def test_bad_step_requests_are_clean_400s(cluster, now, body):
    answer = srun(running(cluster, now), **body)
    assert answer.status_code == 400 and answer.json()["error"]["status"] == "INVALID_ARGUMENT"


def test_a_credential_is_confined_to_its_own_run_of_its_own_job(cluster, now):
    mine = running(cluster, now, nodes=("a4-0",))
    other = running(cluster, now, nodes=("a4-1",))
    assert srun(other).json()["stepId"] == 0
    # mine has no step 0: another job's steps do not exist for its credential
    assert call(credential(mine), "GET", "/agent/v1/srun/steps/0").status_code == 404
    assert call(credential(other), "GET", "/agent/v1/srun/steps/0").json()["state"] == "RUNNING"
    forged = credential(mine).rsplit(".", 1)[0] + "." + "0" * 64
    assert call(forged, "POST", "/agent/v1/srun/steps", {"argv": ["x"]}).status_code == 401
    another_run = f"{other.pk}.1.{credential(other).rsplit('.', 1)[1]}"
    assert call(another_run, "GET", "/agent/v1/srun/steps/0").status_code == 401
    SlurmJob.objects.filter(pk=other.pk).update(state=JobState.COMPLETED)
    # the run has ended: srun may still read its steps (to follow one the job's end cancelled), nothing more
    assert call(credential(other), "GET", "/agent/v1/srun/steps/0").status_code == 200
    assert call(credential(other), "POST", "/agent/v1/srun/steps", {"argv": ["x"]}).status_code == 401
    assert call(credential(other), "POST", "/agent/v1/srun/steps/0:cancel", {}).status_code == 401
    SlurmJob.objects.filter(pk=other.pk).update(restart_count=1)  # requeued: the old run's credential is done
    assert call(credential(other), "GET", "/agent/v1/srun/steps/0").status_code == 401


def test_node_and_step_credentials_do_not_open_each_others_endpoints(cluster, now, tmp_path):
    job = running(cluster, now, num_tasks=2)
    srun(job)
    nodes = {identity["node"]: identity["credential"] for identity in join_nodes(tmp_path)}
    assert call(nodes["a4-0"], "POST", "/agent/v1/srun/steps", {"argv": ["x"]}).status_code == 401
    own, theirs = (StepNode.objects.get(job_node__node__name=name) for name in ("a4-0", "a4-1"))
    assert call(credential(job), "POST", f"/agent/v1/slurm/tasks/{own.pk}/exited",
                {"exits": [[0, 0, 0]]}).status_code == 401
    # a node reports only its own tasks: another node's answer 404 as a missing one
    assert call(nodes["a4-0"], "POST", f"/agent/v1/slurm/tasks/{theirs.pk}/exited",
                {"exits": [[1, 0, 0]]}).status_code == 404
    assert call(nodes["a4-0"], "POST", f"/agent/v1/slurm/tasks/{own.pk}/1/logs",
                {"first": 0, "lines": []}).status_code == 404
    assert call(nodes["a4-0"], "POST", f"/agent/v1/slurm/tasks/{own.pk}/exited",
                {"exits": [[5, 0, 0]]}).status_code == 400


def test_the_step_ends_with_the_worst_exit_when_every_node_has_reported(cluster, now, tmp_path):
    job = running(cluster, now, num_tasks=2)
    srun(job)
    nodes = {identity["node"]: identity["credential"] for identity in join_nodes(tmp_path)}
    own, theirs = (StepNode.objects.get(job_node__node__name=name) for name in ("a4-0", "a4-1"))
    assert call(nodes["a4-0"], "POST", f"/agent/v1/slurm/tasks/{own.pk}/0/logs",
                {"first": 0, "lines": [["stdout", now.timestamp(), "hello"]]}).status_code == 200
    call(nodes["a4-0"], "POST", f"/agent/v1/slurm/tasks/{own.pk}/exited", {"exits": [[0, 0, 0]]})
    assert call(credential(job), "GET", "/agent/v1/srun/steps/0").json() == {
        "state": "RUNNING", "exitCode": None, "signal": 0, "label": False, "numTasks": 2,
        "lines": [[0, "stdout", "hello"]], "next": own.step.log_lines.get().pk, "failed": [], "firstNode": None,
        "pendingNodes": 0, "endTime": None, "cause": None}
    call(nodes["a4-1"], "POST", f"/agent/v1/slurm/tasks/{theirs.pk}/exited", {"exits": [[1, 2, 0]]})
    answer = call(credential(job), "GET", "/agent/v1/srun/steps/0").json()
    assert (answer["state"], answer["exitCode"], answer["failed"]) == ("FAILED", 2, [[1, "a4-1", 2, 0]])


def test_squeue_s_lists_the_running_steps_as_slurm_does(cluster, now):
    """fixtures/22.05/srun/squeue-s-2.txt: job 2 (srun sleep 300 on two nodes), 3 s in."""
    job = make_job(cluster, job_id=2, user="alice", name="cancelme", partition="batch", num_nodes=2, num_tasks=2,
                   now=now)
    start_job(job, ["a4-0", "a4-1"], now=now)
    JobNode.objects.filter(job=job).update(phase=NodePhase.RUNNING)
    JobRun.objects.filter(job=job).update(batch_state=JobState.RUNNING)
    srun(job, argv=["sleep", "300"], time=now.timestamp())
    expected = (SRUN_FIXTURES / "squeue-s-2.txt").read_text().replace("gpu[1-2]", "a4-[0-1]").replace("gpu1", "a4-0")
    assert reports.squeue_steps(cluster, now=later(now, 3)).text == expected
    assert reports.squeue_steps(cluster, now=later(now, 3), jobs="3").text == expected.splitlines()[0] + "\n"


def test_the_accounting_page_lists_steps_below_their_job_unless_asked_for_allocations(cluster, now, browser):
    job = running(cluster, now, num_tasks=2)
    JobRun.objects.filter(job=job).update(batch_state=JobState.RUNNING)
    srun(job)
    page = "/slurm/projects/alpha/locations/us-central1/clusters/c1/accounting"
    shown = browser("uma").get(page, {"jobs": str(job.job_id)}).content.decode()
    assert f">{job.job_id}</a>.batch " in shown and f">{job.job_id}</a>.0 " in shown
    allocations = browser("uma").get(page, {"jobs": str(job.job_id), "allocations": "on"}).content.decode()
    assert ".batch" not in allocations and f">{job.job_id}</a> " in allocations


# --- scontrol show step (fixtures/22.05/steps/scontrol-step-*.txt, srun/scontrol-step-2.txt) ----

def as_recorded(text: str, job) -> str:
    """A recording with this cluster's values where they differ by nature: node names, the job id."""
    return (text.replace("gpu[1-2]", "a4-[0-1]").replace("gpu1", "a4-0")
            .replace("StepId=1.", f"StepId={job.job_id}.").replace("StepId=2.", f"StepId={job.job_id}."))


def recorded_start(text: str):
    import datetime as dt

    stamp = text.split("StartTime=", 1)[1].split()[0]
    return dt.datetime.fromisoformat(stamp).replace(tzinfo=dt.timezone.utc)


def gpu_job_with_a_step(cluster):
    """Job 1 of fixtures/22.05/steps.sh 4 s after its first srun: one node, 8 GPUs, the first step
    (srun -n1 --gres=gpu:8) running and a second srun asking the same, waiting. Returns the job,
    the recording of step 1.0 and the recording's moment."""
    text = (STEPS_FIXTURES / "scontrol-step-1.0.txt").read_text()
    start = recorded_start(text)
    job = running(cluster, start, nodes=("a4-0",), num_tasks=1, gpus_per_node=8, partition="batch")
    JobRun.objects.filter(job=job).update(batch_state=JobState.RUNNING, start_time=start)
    srun(job, argv=["sleep", "8"], tasks=1, gpusPerNode=8, srunHost="vm", srunPid=14426, time=start.timestamp())
    waiting = srun(job, argv=["hostname"], tasks=1, gpusPerNode=8, srunHost="vm", srunPid=14598,
                   time=later(start, 4).timestamp())
    assert waiting.status_code == 202
    return job, text, later(start, 4)


def test_scontrol_show_step_prints_a_running_step_as_slurm_does(cluster, now):
    job, text, moment = gpu_job_with_a_step(cluster)
    assert reports.scontrol_steps(cluster, now=moment, step=f"{job.job_id}.0").text == as_recorded(text, job)


def test_scontrol_show_step_of_a_job_lists_its_batch_script_first_and_a_waiting_srun_last(cluster, now):
    """scontrol-step-1.txt and scontrol-step-all.txt, byte for byte but for names, ids and times."""
    job, _, moment = gpu_job_with_a_step(cluster)
    expected = as_recorded((STEPS_FIXTURES / "scontrol-step-1.txt").read_text(), job)
    assert reports.scontrol_steps(cluster, now=moment, step=str(job.job_id)).text == expected
    assert reports.scontrol_steps(cluster, now=moment).text == as_recorded(
        (STEPS_FIXTURES / "scontrol-step-all.txt").read_text(), job)
    assert reports.scontrol_steps(cluster, now=moment, step=f"{job.job_id}.batch").text == (
        expected.split("\n\n")[0] + "\n\n")
    # an srun that stopped asking is no longer waiting; one whose step was created neither
    assert "TDB" not in reports.scontrol_steps(cluster, now=later(moment, 11)).text
    finish(0, later(moment, 4))
    srun(job, argv=["hostname"], tasks=1, gpusPerNode=8, srunHost="vm", srunPid=14598, time=later(moment, 4).timestamp())
    assert "TDB" not in reports.scontrol_steps(cluster, now=later(moment, 4)).text


def test_scontrol_show_step_without_srun_options_has_no_tres_per_lines(cluster, now):
    """srun/scontrol-step-2.txt: ``srun sleep 300`` in a two-node job."""
    text = (SRUN_FIXTURES / "scontrol-step-2.txt").read_text()
    start = recorded_start(text)
    job = running(cluster, start, num_tasks=2, gpus_per_node=0, partition="batch")
    srun(job, argv=["sleep", "300"], srunHost="vm", srunPid=14151, time=start.timestamp())
    assert reports.scontrol_steps(cluster, now=start, step=f"{job.job_id}.0").text == as_recorded(text, job)


def test_scontrol_show_step_of_a_missing_step_says_so(cluster, now):
    """scontrol-step-missing.txt (exit status 1: no rows)."""
    job, _, moment = gpu_job_with_a_step(cluster)
    report = reports.scontrol_steps(cluster, now=moment, step=f"{job.job_id}.7")
    expected = (STEPS_FIXTURES / "scontrol-step-missing.txt").read_text().replace("1.7", f"{job.job_id}.7")
    assert (report.text, report.items) == (expected, [])
    with pytest.raises(ValueError, match="Invalid job step id: 1.x"):
        reports.scontrol_steps(cluster, now=moment, step="1.x")


def test_scontrol_show_step_over_rest_needs_membership_and_a_valid_id(cluster, now, api):
    job, _, _ = gpu_job_with_a_step(cluster)
    url = "/v1/projects/alpha/locations/us-central1/slurmClusters/c1/steps"
    answer = api("uma").get(url, {"step": f"{job.job_id}.0"})
    assert answer.status_code == 200
    assert [(row["stepId"], row["tresPerNode"]) for row in answer.json()["rows"]] == [(f"{job.job_id}.0", "gres:gpu:8")]
    assert answer.json()["text"].startswith(f"StepId={job.job_id}.0 ")
    assert api("mallory").get(url).status_code == 404
    bad = api("uma").get(url, {"step": "x.0"})
    assert bad.status_code == 400 and bad.json()["error"]["details"][0]["fieldViolations"][0]["field"] == "step"


# --- fixtures/22.05/release: step resources freed per step, --overlap steps, TresPer* lines ----------

RELEASE_FIXTURES = STEPS_FIXTURES.parent / "release"


def release_recorded(text: str, job, recorded_job: int) -> str:
    return (text.replace("gpu[1-2]", "a4-[0-1]").replace("gpu1", "a4-0")
            .replace(f"StepId={recorded_job}.", f"StepId={job.job_id}."))


def test_overlapping_steps_take_the_lowest_gpus_and_print_as_slurm_does(cluster, now):
    """release job 3 (-n 2 --gres=gpu:4): step 0 holds the four GPUs; --overlap steps start beside it
    with the lowest GPUs of the job (gpu:2 -> 0,1; -n2 gpu:4 and no --gres -> all four), a step
    without --overlap waits; scontrol show step byte for byte (Dist Block for two tasks on one
    node, TresPerNode inherited from the job without --gres, TresPerStep only with -n and --gres)."""
    text = (RELEASE_FIXTURES / "scontrol-step-3.txt").read_text()
    start = recorded_start(text)
    job = running(cluster, start, nodes=("a4-0",), num_tasks=2, gpus_per_node=4, partition="batch")
    JobRun.objects.filter(job=job).update(batch_state=JobState.RUNNING, start_time=start)
    overlap = {"argv": ["bash", "-c", "x"], "overlap": True, "srunHost": "vm", "time": later(start, 3).timestamp()}
    assert srun(job, argv=["bash", "-c", "x"], tasks=1, gpusPerNode=4, srunHost="vm", srunPid=4411,
                time=start.timestamp()).json()["stepId"] == 0
    assert srun(job, **overlap, tasks=1, gpusPerNode=2, srunPid=5151).json()["stepId"] == 1
    assert srun(job, **overlap, tasks=2, gpusPerNode=4, srunPid=5153).json()["stepId"] == 2
    assert srun(job, **overlap, tasks=1, srunPid=5152).json()["stepId"] == 3
    waiting = srun(job, argv=["bash", "-c", "x"], tasks=1, gpusPerNode=1, srunHost="vm", srunPid=5276,
                   time=later(start, 4).timestamp())
    assert (waiting.status_code, waiting.json()["reason"]) == (202, "Requested nodes are busy")
    assert [(p.step.step_id, p.gpu_indices) for p in StepNode.objects.order_by("step__step_id")] == [
        (0, [0, 1, 2, 3]), (1, [0, 1]), (2, [0, 1, 2, 3]), (3, [0, 1, 2, 3])]
    assert reports.scontrol_steps(cluster, now=later(start, 5), step=str(job.job_id)).text == release_recorded(
        text, job, 3)
    finish(1, later(start, 11))  # an overlapping step ends: srun tries again and still does not fit
    assert srun(job, argv=["bash"], tasks=1, gpusPerNode=1).json()["stepsEnded"] == 1


def test_a_plain_srun_in_a_job_without_gpus_has_no_tres_per_lines(cluster, now):
    """release out-16.txt: ``srun -n1 sleep 6`` in a job of two CPUs and no GPUs."""
    text = (RELEASE_FIXTURES / "out-16.txt").read_text()
    start = recorded_start(text)
    job = running(cluster, start, nodes=("a4-0",), num_tasks=2, gpus_per_node=0, partition="batch")
    srun(job, argv=["sleep", "6"], tasks=1, srunHost="vm", srunPid=13796, time=start.timestamp())
    assert reports.scontrol_steps(cluster, now=start, step=f"{job.job_id}.0").text == release_recorded(
        text, job, 16)


def test_a_steps_resources_are_freed_when_the_whole_step_ends_not_node_by_node(cluster, now):
    """release job 1 (out-1.txt, scontrol-step-1.0.txt): step 0's task on the first node ended, yet a
    step asking for that node waited for step 0's task on the second node; --overlap did not wait."""
    job = running(cluster, now, num_tasks=2, gpus_per_node=0)
    assert srun(job, tasksPerNode=1).json()["stepId"] == 0
    first = StepNode.objects.get(step__step_id=0, job_node__node__name="a4-0")
    step_node_finished(step_node=first, exits=[(0, 0, 0)], now=later(now, 2))
    waiting = srun(job, nodes=1, tasks=1)
    assert (waiting.status_code, waiting.json()["reason"]) == (202, "Requested nodes are busy")
    shown = reports.scontrol_steps(cluster, now=later(now, 9), step=f"{job.job_id}.0").text
    assert "NodeList=a4-[0-1]\n   Nodes=2 CPUs=2 Tasks=2" in shown
    assert srun(job, nodes=1, tasks=1, overlap=True).json()["stepId"] == 1
    second = StepNode.objects.get(step__step_id=0, job_node__node__name="a4-1")
    step_node_finished(step_node=second, exits=[(1, 0, 0)], now=later(now, 15))
    assert srun(job, nodes=1, tasks=1).json()["stepId"] == 2


# srun --pty: input for task 0's terminal ----------------------------------------------------------

def _b64(data: bytes) -> str:
    import base64

    return base64.b64encode(data).decode()


def test_a_pty_steps_input_reaches_only_task_0s_node_until_it_is_delivered(cluster, now, tmp_path):
    job = running(cluster, now, num_tasks=2)
    assert srun(job, pty={"rows": 24, "cols": 80}).status_code == 200
    step = JobStep.objects.get()
    assert step.pty == {"rows": 24, "cols": 80}
    for body in ({"data": _b64(b"ls\r")}, {"rows": 50, "cols": 132}):
        answer = call(credential(job), "POST", "/agent/v1/srun/steps/0:input", body)
        assert (answer.status_code, answer.json()) == (200, {"accepted": True})
    documents = {name: node_assignments(node=Node.objects.get(name=name))["slurm"][0]["steps"][0]
                 for name in ("a4-0", "a4-1")}
    first, second = step.inputs.values_list("pk", flat=True)
    assert (documents["a4-0"]["pty"], documents["a4-0"]["input"]) == (
        {"rows": 24, "cols": 80}, [[first, _b64(b"ls\r"), None, None], [second, "", 50, 132]])
    assert (documents["a4-1"]["pty"], documents["a4-1"]["input"]) == (None, [])
    nodes = {identity["node"]: identity["credential"] for identity in join_nodes(tmp_path)}
    own, theirs = (StepNode.objects.get(job_node__node__name=name) for name in ("a4-0", "a4-1"))
    assert call(nodes["a4-0"], "POST", f"/agent/v1/slurm/tasks/{theirs.pk}/input", {"through": second}
                ).status_code == 404
    assert call(nodes["a4-0"], "POST", f"/agent/v1/slurm/tasks/{own.pk}/input", {"through": first}
                ).status_code == 200
    assert list(step.inputs.values_list("pk", flat=True)) == [second]


def test_a_full_input_buffer_makes_srun_wait(cluster, now):
    from trainhub.slurm.services.steps import MAX_PENDING_INPUT

    job = running(cluster, now, num_tasks=1, nodes=("a4-0",))
    srun(job, pty={"rows": 24, "cols": 80})
    step = JobStep.objects.get()
    step.inputs.bulk_create([step.inputs.model(step=step, data=_b64(b"x"))] * MAX_PENDING_INPUT)
    answer = call(credential(job), "POST", "/agent/v1/srun/steps/0:input", {"data": _b64(b"y")})
    assert (answer.status_code, answer.json()) == (200, {"accepted": False})
    assert step.inputs.count() == MAX_PENDING_INPUT


def test_input_to_a_step_without_a_terminal_is_dropped(cluster, now):
    job = running(cluster, now, num_tasks=1, nodes=("a4-0",))
    srun(job)
    answer = call(credential(job), "POST", "/agent/v1/srun/steps/0:input", {"data": _b64(b"y")})
    assert (answer.status_code, answer.json()) == (200, {"accepted": True})
    assert not JobStep.objects.get().inputs.exists()


@pytest.mark.parametrize("body", [{"data": "not base64!"}, {"data": ""}, {"data": _b64(b"x" * 2049)},
                                  {"rows": -1, "cols": 80}, {"rows": 24}, {}])
def test_bad_input_is_a_clean_400(cluster, now, body):
    job = running(cluster, now, num_tasks=1, nodes=("a4-0",))
    srun(job, pty={"rows": 24, "cols": 80})
    assert call(credential(job), "POST", "/agent/v1/srun/steps/0:input", body).status_code == 400


@pytest.mark.parametrize("pty", [{"rows": 24}, {"rows": "24", "cols": 80}, {"rows": 70000, "cols": 80}])
def test_a_bad_window_size_is_a_clean_400(cluster, now, pty):
    job = running(cluster, now, num_tasks=1, nodes=("a4-0",))
    assert srun(job, pty=pty).status_code == 400


def test_a_cancel_says_which_signal_the_tasks_get_first(cluster, now):
    """srun's second Ctrl-C: the tasks get SIGINT (SIGKILL after the grace period); SIGTERM by default;
    no other signal."""
    job = running(cluster, now, num_tasks=2)
    srun(job)
    assert call(credential(job), "POST", "/agent/v1/srun/steps/0:cancel", {"signal": 9}).status_code == 400
    assert call(credential(job), "POST", "/agent/v1/srun/steps/0:cancel", {"signal": 2}).status_code == 200
    assert sorted(StepNode.objects.values_list("stop_requested", "stop_signal")) == [(True, 2), (True, 2)]
    documents = [node_assignments(node=Node.objects.get(name=name))["slurm"][0] for name in ("a4-0", "a4-1")]
    assert [document["steps"][0]["stopSignal"] for document in documents] == [2, 2]
