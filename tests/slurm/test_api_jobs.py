"""Slurm jobs over REST: sbatch with Slurm's validation and messages, squeue-like listing,
scancel and scontrol hold / release / nice, with Slurm's permissions."""

import pytest

from tests.slurm.conftest import JOBS, run_pass, sbatch
from trainhub.iam.services import posix_identity_set
from trainhub.slurm.models import Hold, JobState, SlurmJob
from trainhub.slurm.services.clusters import cluster_config_set


def test_sbatch_wrap_queues_a_job_in_the_default_partition(api, accounts):
    response = sbatch(api, "uma", "--wrap", "hostname", "-t", "10")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["message"] == f"Submitted batch job {body['jobId']}"
    job = SlurmJob.objects.get(job_id=body["jobId"])
    assert (job.partition, job.account, job.qos, job.user_name, job.time_limit) == ("a4", "ml", "normal", "uma", 10)
    assert job.script == "#!/bin/sh\n# This script was created by sbatch --wrap.\n\nhostname\n"
    assert job.state == JobState.PENDING


def test_sbatch_and_salloc_record_where_they_ran(api, accounts):
    """AllocNode:Sid, and the working directory: the job's WorkDir without --chdir, the base of a
    relative one (scenario.sh ran sbatch in /tmp: scontrol-job-1-running's WorkDir=/tmp)."""
    place = {"allocNode": "login1", "allocSid": 4242, "submitDir": "/tmp"}
    job_id = api("uma").post(JOBS, {"sbatchArgs": ["--wrap", "x"], **place}, format="json").json()["jobId"]
    assert SlurmJob.objects.values_list("alloc_node", "alloc_sid", "work_dir").get(job_id=job_id) == (
        "login1", 4242, "/tmp")
    job_id = api("uma").post(JOBS, {"sbatchArgs": ["-D", "runs/a", "--wrap", "x"], **place},
                             format="json").json()["jobId"]
    assert SlurmJob.objects.get(job_id=job_id).work_dir == "/tmp/runs/a"
    body = {"sallocArgs": ["-N1"], "allocNode": "laptop", "allocSid": 7, "submitDir": "/home/uma/exp"}
    job_id = api("uma").post(JOBS.replace("/jobs", "/allocations"), body, format="json").json()["jobId"]
    assert SlurmJob.objects.values_list("alloc_node", "alloc_sid", "work_dir").get(job_id=job_id) == (
        "laptop", 7, "/home/uma/exp")
    # a submission that names no directory (the web form) runs in the user's home
    assert SlurmJob.objects.get(job_id=sbatch(api, "uma", "--wrap", "x").json()["jobId"]).work_dir == "/home/uma"


@pytest.mark.parametrize("place", [{"allocNode": 5}, {"allocSid": "1"}, {"allocSid": -1}, {"allocSid": True},
                                   {"submitDir": "tmp"}, {"submitDir": 3}])
def test_sbatch_refuses_a_place_that_is_not_a_host_and_session(api, accounts, place):
    answer = api("uma").post(JOBS, {"sbatchArgs": ["--wrap", "x"], **place}, format="json")
    assert answer.status_code == 400
    assert [v["field"] for v in answer.json()["error"]["details"][0]["fieldViolations"]] == list(place)


def test_a_job_keeps_its_submitters_uid_and_group_as_slurmctld_does(api, accounts, cast):
    """squeue %U %G %g and scontrol's UserId/GroupId show the submitter's ids when they submitted."""
    posix_identity_set(user=cast["uma"], uid=1001, gid=500, group="physics")
    job_id = sbatch(api, "uma", "--wrap", "true").json()["jobId"]
    posix_identity_set(user=cast["uma"], uid=1002)
    assert sbatch(api, "uma", "--wrap", "true").json()["jobId"] == job_id + 1
    squeue = api("uma").get(JOBS.replace("/jobs", "/squeue"), {"format": "%i %u %U %G %g"}).json()["text"]
    # (pending jobs without an expected start come in reverse job id order, as squeue lists them)
    assert squeue.splitlines()[1:] == [f"{job_id + 1} uma 1002 1002 uma", f"{job_id} uma 1001 500 physics"]
    scontrol = api("uma").get(JOBS.replace("/jobs", "/scontrolJobs"), {"job": str(job_id)}).json()["text"]
    assert "   UserId=uma(1001) GroupId=physics(500) MCS_label=N/A\n" in scontrol


def test_sbatch_keeps_the_script_files_path_as_the_jobs_command(api, accounts):
    body = {"sbatchArgs": ["-t", "5"], "script": "#!/bin/bash\nhostname\n", "scriptPath": "/home/uma/job.sh",
            "scriptArgs": ["a1", "b c"]}
    job_id = api("uma").post(JOBS, body, format="json").json()["jobId"]
    assert api("uma").get(f"{JOBS}/{job_id}").json()["command"] == "/home/uma/job.sh a1 b c"
    wrapped = sbatch(api, "uma", "--wrap", "hostname").json()["jobId"]
    assert api("uma").get(f"{JOBS}/{wrapped}").json()["command"] == "(null)"


def test_a_job_without_a_name_is_named_after_its_script_file_as_sbatch_names_it(api, accounts):
    """sbatch ./my.job.sh and sbatch /tmp/sj/my.job.sh make JobName=my.job.sh, a script on stdin
    JobName=sbatch, --wrap JobName=wrap (Slurm 22.05 on the harness; sbatch's opt.job_name defaults
    to base_name(script_name))."""
    script = "#!/bin/bash\nhostname\n"
    names = {}
    for key, body in (("file", {"script": script, "scriptPath": "/home/uma/runs/my.job.sh"}),
                      ("stdin", {"script": script}), ("wrap", {"sbatchArgs": ["--wrap", "hostname"]}),
                      ("named", {"script": script, "scriptPath": "/home/uma/job.sh", "sbatchArgs": ["-J", "mine"]})):
        job_id = api("uma").post(JOBS, body, format="json").json()["jobId"]
        names[key] = api("uma").get(f"{JOBS}/{job_id}").json()["name"]
    assert names == {"file": "my.job.sh", "stdin": "sbatch", "wrap": "wrap", "named": "mine"}


@pytest.mark.parametrize("body", [{"sbatchArgs": ["--wrap", "x"], "scriptPath": "/home/uma/job.sh"},
                                  {"script": "#!/bin/bash\n", "scriptPath": 7},
                                  {"script": "#!/bin/bash\n", "scriptPath": "/" + "x" * 4096},
                                  {"script": "#!/bin/bash\n", "scriptPath": "/home/uma/" + "x" * 256}])
def test_sbatch_refuses_a_script_path_without_its_script_or_not_a_path(api, accounts, body):
    answer = api("uma").post(JOBS, body, format="json")
    assert answer.status_code == 400
    assert answer.json()["error"]["details"][0]["fieldViolations"] == [
        {"field": "scriptPath", "description": "must be the path of the script file sent as script"}]


def test_job_ids_increase_per_cluster(api, accounts):
    ids = [sbatch(api, "uma", "--wrap", "true").json()["jobId"] for _ in range(3)]
    assert ids == [1, 2, 3]


def test_sbatch_directives_in_the_script_are_honoured_and_the_command_line_wins(api, accounts):
    script = "#!/bin/bash\n#SBATCH -J from-script\n#SBATCH --gres=gpu:4\n#SBATCH -t 30\nnvidia-smi\n"
    job_id = sbatch(api, "uma", "-t", "5", script=script).json()["jobId"]
    job = SlurmJob.objects.get(job_id=job_id)
    assert (job.name, job.gpus_per_node, job.time_limit) == ("from-script", 4, 5)


@pytest.mark.parametrize("args, message", [
    (["-A", "bio", "--wrap", "x"], "sbatch: error: Batch job submission failed: Invalid account or "
                                   "account/partition combination specified"),
    (["-q", "nope", "--wrap", "x"], "sbatch: error: Batch job submission failed: Invalid qos specification"),
    (["-p", "gpu", "--wrap", "x"], "sbatch: error: invalid partition specified: gpu\nsbatch: error: Batch job "
                                   "submission failed: Invalid partition name specified"),
    (["--gres=gpu:9", "--wrap", "x"], "sbatch: error: Batch job submission failed: Requested node configuration "
                                      "is not available"),
    (["--frobnicate"], "sbatch: unrecognized option '--frobnicate'"),
    ([], "sbatch: error: Batch job submission failed: a batch script or --wrap is required"),
    (["-o", "../../etc/x", "--wrap", "x"], "sbatch: error: --output=../../etc/x: the path may not leave the "
                                           "cluster's file system"),
    (["-D", "/home/../etc", "--wrap", "x"], "sbatch: error: chdir(/home/../etc): no such directory on the cluster"),
])
def test_sbatch_refuses_with_slurms_message(api, accounts, args, message):
    response = sbatch(api, "uma", *args)
    assert response.status_code == 400
    assert response.json()["error"]["message"] == message
    # only a job that fails slurmctld's node test takes a job id (and ends FAILED 1:0), as on real Slurm
    failed = [(job.state, job.exit_code, job.reason) for job in SlurmJob.objects.all()]
    assert failed == ([("FAILED", 1, "BadConstraints")] if "node configuration" in message else [])


def test_more_nodes_than_the_partition_has_pend_unless_partition_limits_are_enforced(api, accounts, now):
    """fixtures/22.05/finished-jobs nodes5: ``-N 5`` on 4 nodes is job 7, PENDING with PartitionNodeLimit;
    under EnforcePartLimits slurmctld refuses it at submission."""
    job_id = sbatch(api, "uma", "-N", "3", "--wrap", "x").json()["jobId"]
    run_pass(accounts)
    job = SlurmJob.objects.get(job_id=job_id)
    assert (job.state, job.reason, job.num_nodes) == (JobState.PENDING, "PartitionNodeLimit", 3)
    cluster_config_set(cluster=accounts, changes={"EnforcePartLimits": "ALL"}, actor="test", now=now)
    response = sbatch(api, "uma", "-N", "3", "--wrap", "x")
    assert response.status_code == 400
    assert response.json()["error"]["message"] == ("sbatch: error: Batch job submission failed: Node count "
                                                   "specification invalid")


def test_a_user_without_an_association_cannot_submit(api, accounts):
    response = sbatch(api, "vic", "--wrap", "x")
    assert response.status_code == 403  # viewers may not submit at all
    from trainhub.iam.models import Membership

    Membership.objects.filter(user__username="vic").update(role="user")
    response = sbatch(api, "vic", "--wrap", "x")
    assert response.json()["error"]["message"].endswith("Invalid account or account/partition combination specified")


def test_a_script_needs_a_shebang(api, accounts):
    response = sbatch(api, "uma", script="echo hi\n")
    assert "This does not look like a batch script" in response.json()["error"]["message"]


def test_hold_then_release(api, accounts):
    job_id = sbatch(api, "uma", "-H", "--wrap", "x").json()["jobId"]
    job = SlurmJob.objects.get(job_id=job_id)
    assert (job.hold, job.reason, job.priority) == (Hold.USER, "JobHeldUser", 0)
    response = api("uma").post(f"{JOBS}/{job_id}:release", {}, format="json")
    assert response.status_code == 200
    run_pass(accounts)
    job.refresh_from_db()
    assert job.hold == Hold.NONE and job.state == JobState.RUNNING
    response = api("uma").post(f"{JOBS}/{job_id}:hold", {}, format="json")
    assert response.json()["error"]["message"] == f"scontrol: error: Job is no longer pending execution for job {job_id}"
    later = sbatch(api, "uma", "--begin=now+1hours", "--wrap", "x").json()["jobId"]
    assert api("uma").post(f"{JOBS}/{later}:hold", {}, format="json").json()["reason"] == "JobHeldUser"


def test_an_admins_hold_only_an_admin_releases(api, accounts):
    job_id = sbatch(api, "uma", "--begin=now+1hours", "--wrap", "x").json()["jobId"]
    assert api("alice").post(f"{JOBS}/{job_id}:hold", {}, format="json").json()["reason"] == "JobHeldAdmin"
    response = api("uma").post(f"{JOBS}/{job_id}:release", {}, format="json")
    assert response.status_code == 403
    assert response.json()["error"]["message"] == f"scontrol: error: Access/permission denied for job {job_id}"
    assert api("alice").post(f"{JOBS}/{job_id}:release", {}, format="json").status_code == 200


def test_scancel_a_pending_job(api, accounts):
    job_id = sbatch(api, "uma", "--wrap", "x").json()["jobId"]
    body = api("uma").post(f"{JOBS}/{job_id}:cancel", {}, format="json").json()
    assert body["state"] == "CANCELLED" and body["stateDesc"] == "by uma"
    again = api("uma").post(f"{JOBS}/{job_id}:cancel", {}, format="json")
    assert again.json()["error"]["message"] == (
        f"scancel: error: Kill job error on job id {job_id}: Job/step already completing or completed")


def test_users_cannot_cancel_other_users_jobs(api, accounts, cast):
    from trainhub.iam.models import Membership

    Membership.objects.filter(user__username="vic").update(role="user")
    job_id = sbatch(api, "uma", "--wrap", "x").json()["jobId"]
    response = api("vic").post(f"{JOBS}/{job_id}:cancel", {}, format="json")
    assert response.status_code == 403
    assert response.json()["error"]["message"] == (
        f"scancel: error: Kill job error on job id {job_id}: Access/permission denied")


def test_nice_lowers_priority_and_only_admins_go_negative(api, accounts):
    job_id = sbatch(api, "uma", "--begin=now+1hours", "--wrap", "x").json()["jobId"]
    run_pass(accounts)
    before = SlurmJob.objects.get(job_id=job_id).priority
    assert api("uma").post(f"{JOBS}/{job_id}:update", {"nice": 50}, format="json").json()["nice"] == 50
    run_pass(accounts)
    assert SlurmJob.objects.get(job_id=job_id).priority == before - 50
    assert api("uma").post(f"{JOBS}/{job_id}:update", {"nice": -10}, format="json").status_code == 403
    assert api("alice").post(f"{JOBS}/{job_id}:update", {"nice": -10}, format="json").json()["nice"] == -10


def test_listing_and_getting_jobs(api, accounts):
    ids = [sbatch(api, "uma", "--wrap", "x").json()["jobId"] for _ in range(3)]
    page = api("vic").get(JOBS, {"pageSize": 2}).json()
    assert [job["jobId"] for job in page["jobs"]] == ids[:2]
    rest = api("vic").get(JOBS, {"pageSize": 2, "pageToken": page["nextPageToken"]}).json()
    assert [job["jobId"] for job in rest["jobs"]] == ids[2:]
    detail = api("vic").get(f"{JOBS}/{ids[0]}").json()
    assert detail["events"][0]["message"].startswith("Submitted by uma")
    assert api("mallory").get(f"{JOBS}/{ids[0]}").status_code == 404
    assert api("vic").get(f"{JOBS}/999").json()["error"]["message"] == (
        "slurm_load_jobs error: Invalid job id specified (999).")
