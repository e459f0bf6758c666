"""Every sacctmgr name and text, and every sbatch name, comment and path, is checked against what
its column holds before the database sees it (PostgreSQL answered DataError 500s), with Slurm's
message; the limits agree with the models."""

import pytest

from tests.slurm.conftest import CLUSTERS, sbatch
from trainhub.slurm import sacctmgr, sbatch as sbatch_syntax
from trainhub.slurm.models import Account, Qos, SlurmJob, SlurmUser

URL = f"{CLUSTERS}/c1:sacctmgr"
LONG_PATH = "/" + "d" * 1030


def run(api, command):
    return api("alice").post(URL, {"command": command}, format="json")


def test_the_limits_agree_with_the_models():
    assert sacctmgr.NAME_MAX_LENGTH == {"account": Account._meta.get_field("name").max_length,
                                        "qos": Qos._meta.get_field("name").max_length,
                                        "user": SlurmUser._meta.get_field("name").max_length,
                                        "partition": 63}
    assert sacctmgr.TEXT_MAX_LENGTH == Account._meta.get_field("description").max_length
    assert sacctmgr.TEXT_MAX_LENGTH == Qos._meta.get_field("description").max_length
    columns = {"job_name": "name", "comment": "comment", "chdir": "work_dir", "output": "stdout_pattern",
               "error": "stderr_pattern", "export": "export", "mail_user": "mail_user", "mail_type": "mail_type",
               "signal": "signal", "gpu_request": "gpu_request"}
    assert sbatch_syntax.MAX_LENGTH == {option: SlurmJob._meta.get_field(column).max_length
                                        for option, column in columns.items()}


@pytest.mark.parametrize("command, fits", [
    ("sacctmgr -i add account " + "a" * 65, "sacctmgr -i add account " + "a" * 64),
    ("sacctmgr -i add account " + "a" * 10_000, None),
    ("sacctmgr -i add qos " + "q" * 65, "sacctmgr -i add qos " + "q" * 64),
    ("sacctmgr -i add user " + "u" * 151 + " accounts=ml", "sacctmgr -i add user " + "u" * 150 + " accounts=ml"),
    ("sacctmgr -i add account a2 description=" + "d" * 1000, "sacctmgr -i add account a2 description=" + "d" * 255),
    ("sacctmgr -i add account a3 organization=" + "o" * 256, None),
    ("sacctmgr -i modify account ml set description=" + "d" * 1000, None),
    ("sacctmgr -i modify qos normal set description=" + "d" * 256, None),
    ("sacctmgr -i modify user uma set defaultaccount=" + "a" * 65, None),
])
def test_an_overlong_sacctmgr_name_or_text_is_refused_before_the_database(api, accounts, command, fits):
    answer = run(api, command)
    assert answer.status_code == 200, answer.content
    assert answer.json()["exitCode"] == 1
    assert "is too long" in answer.json()["output"]
    if fits:
        assert run(api, fits).json()["exitCode"] == 0


@pytest.mark.parametrize("args", [
    ["-J", "n" * 256, "--wrap", "x"],
    ["--comment", "c" * 256, "--wrap", "x"],
    ["-o", LONG_PATH, "--wrap", "x"],
    ["-e", LONG_PATH, "--wrap", "x"],
    ["-D", LONG_PATH, "--wrap", "x"],
    ["-D", "d/" * 510, "--wrap", "x"],  # fits as given, not under /home/uma/
    ["--mail-user", "m" * 256, "--wrap", "x"],
    ["--mail-type", ",".join(["END"] * 40), "--wrap", "x"],
    ["--export", "A=" + "x" * 1030, "--wrap", "x"],
    ["--gres", "gpu:" + "t" * 256 + ":1", "--wrap", "x"],
    ["--gpus", "t" * 256, "--wrap", "x"],
])
def test_an_overlong_sbatch_name_comment_or_path_is_refused_with_slurms_message(api, accounts, args):
    response = sbatch(api, "uma", *args)
    assert response.status_code == 400, response.content
    assert response.json()["error"]["message"] == (
        "sbatch: error: Batch job submission failed: Pathname of a file, directory or other parameter too long")
    assert not SlurmJob.objects.exists()


@pytest.mark.parametrize("option", ["--ntasks", "--ntasks-per-node", "--cpus-per-task", "--nodes", "--mem",
                                    "--mem-per-cpu", "--mem-per-gpu", "--gpus", "--gpus-per-node", "--gres"])
@pytest.mark.parametrize("number, shown", [(2**31, 2**31), (10**30, 2**63 - 1)])
def test_a_count_or_size_beyond_a_c_int_is_refused_with_slurms_message(api, accounts, option, number, shown):
    # PostgreSQL's integer columns (and the billing's float) answered 500 to these.
    value = f"gpu:{number}" if option == "--gres" else str(number)
    response = sbatch(api, "uma", f"{option}={value}", "--wrap", "x")
    assert response.status_code == 400, response.content
    assert response.json()["error"]["message"] == f"sbatch: error: Numeric argument ({shown}) to big for {option}."
    assert not SlurmJob.objects.exists()


DIGITS_5000 = "1" * 5000  # past Python's int() guard of 4,300 digits: a bare ValueError, a 500


@pytest.mark.parametrize("option", ["--ntasks", "--nodes", "--mem", "--gpus", "--gres=gpu:", "--time", "--nice",
                                    "--signal=", "--begin=now+"])
@pytest.mark.parametrize("where", ["command line", "#SBATCH"])
def test_a_number_of_5000_digits_in_any_option_is_refused_not_a_500(api, accounts, option, where):
    argument = (option if option.endswith((":", "=", "+")) else option + "=") + DIGITS_5000
    response = (sbatch(api, "uma", argument, "--wrap", "x") if where == "command line"
                else sbatch(api, "uma", script=f"#!/bin/bash\n#SBATCH {argument}\necho\n"))
    assert response.status_code == 400, response.content[:300]
    assert response.json()["error"]["message"].startswith("sbatch: error: ")
    assert not SlurmJob.objects.exists()


@pytest.mark.parametrize("array", [f"0-3%{DIGITS_5000}", f"{DIGITS_5000}-3", "0-3%3000000000", "0-3:" + DIGITS_5000])
def test_an_array_with_a_huge_number_is_refused_not_a_500(api, accounts, array):
    response = sbatch(api, "uma", f"--array={array}", "--wrap", "x")
    assert response.status_code == 400, response.content[:300]
    assert "Invalid job array specification" in response.json()["error"]["message"]
    assert not SlurmJob.objects.exists()


@pytest.mark.parametrize("setting, shown", [
    (f"maxjobs={DIGITS_5000}", "Bad MaxJobs value"), (f"maxwall={DIGITS_5000}", "Bad MaxWall time format"),
    (f"fairshare={DIGITS_5000}", "Bad FairShare value"), ("fairshare=3000000000", "Bad FairShare value"),
    (f"grptres=cpu={DIGITS_5000}", "Bad GrpTRES value"),
])
def test_a_huge_sacctmgr_number_is_refused_with_sacctmgrs_message(api, accounts, setting, shown):
    answer = run(api, f"sacctmgr -i modify user uma set {setting}")
    assert answer.status_code == 200, answer.content[:300]
    assert answer.json()["exitCode"] == 1 and shown in answer.json()["output"]


def test_the_longest_sbatch_values_are_kept(api, accounts):
    response = sbatch(api, "uma", "-J", "n" * 255, "--comment", "c" * 255, "-o", "/" + "o" * 1023, "--wrap", "x")
    assert response.status_code == 200, response.content
    job = SlurmJob.objects.get()
    assert (len(job.name), len(job.comment), len(job.stdout_pattern)) == (255, 255, 1024)


def test_an_audit_subject_longer_than_its_column_is_cut(api, accounts):
    from trainhub.slurm.models import ClusterAuditEntry

    user = "u" * 150
    assert run(api, f"sacctmgr -i add user {user} accounts=ml").json()["exitCode"] == 0
    answer = run(api, f"sacctmgr -i modify user {user} set maxjobs=3").json()
    assert answer["exitCode"] == 0, answer
    subjects = ClusterAuditEntry.objects.values_list("subject", flat=True)
    assert any(subject.startswith("association ") and subject.endswith("...") and len(subject) == 128
               for subject in subjects), list(subjects)
