"""sacctmgr over REST (the CLI and web console use it): Slurm's syntax, confirmations and tables;
admins change, everyone shows; the changes reach submission and scheduling."""

from django.utils import timezone

from tests.slurm.conftest import CLUSTERS, SCHED_DELAY, run_pass, sbatch
from trainhub.slurm.models import Account, Association, JobState, Qos, SlurmJob, SlurmUser

URL = f"{CLUSTERS}/c1:sacctmgr"


def run(api, command, user="alice"):
    return api(user).post(URL, {"command": command}, format="json").json()


def test_the_seeds_add_user_command_creates_a_partition_association(api, cluster):
    run(api, "sacctmgr -i add account ml")
    answer = run(api, "sudo sacctmgr -i add User Accounts=ml Partition=a4 uma")
    assert answer["exitCode"] == 0
    assert answer["output"].splitlines()[:3] == [" Adding User(s)", "  uma", " Associations ="]
    assert "  U = uma       A = ml         C = c1         P = a4        " in answer["output"].splitlines()
    assoc = Association.objects.get(user="uma")
    assert (assoc.account.name, assoc.partition, assoc.parent.account.name) == ("ml", "a4", "ml")
    assert SlurmUser.objects.get(name="uma").default_account == "ml"


def test_accounts_form_a_tree_with_defaults_as_sacctmgr_fills_them(api, cluster):
    assert run(api, 'sacctmgr -i add account science Description="science accounts" Organization=science'
               )["exitCode"] == 0
    assert run(api, "sacctmgr -i add account chemistry,physics parent=science fairshare=30")["exitCode"] == 0
    physics = Account.objects.get(name="physics")
    assert (physics.description, physics.organization) == ("physics", "science")
    assoc = Association.objects.get(account=physics, user="")
    assert (assoc.parent.account.name, assoc.shares) == ("science", 30)
    tree = run(api, "sacctmgr show assoc tree format=account,user,share", user="vic")["output"].splitlines()
    assert [(line[:20].rstrip(), line.split()[-1]) for line in tree[2:]] == [
        ("root", "1"), (" root", "1"), (" science", "1"), ("  chemistry", "30"), ("  physics", "30")]


def test_a_format_width_past_the_limit_is_refused_and_other_digits_keep_the_default(api, cluster):
    """user%99999999999 was a MemoryError (a 500), user%\u00b2 a ValueError."""
    answer = run(api, "sacctmgr show assoc format=user%99999999999", user="vic")
    assert answer["exitCode"] == 1
    assert answer["output"] == ' Invalid field width requested: "user%99999999999" (at most 1000)\n'
    assert run(api, "sacctmgr show assoc format=user%\u00b2", user="vic")["output"].splitlines()[0] == (
        run(api, "sacctmgr show assoc format=user", user="vic")["output"].splitlines()[0])


def test_without_i_the_change_is_shown_and_not_committed(api, cluster):
    answer = run(api, "sacctmgr add account ml")
    assert answer["needsConfirmation"] and answer["output"].endswith("(N/y): ")
    assert not Account.objects.filter(name="ml").exists()


def test_modify_where_set_changes_limits_and_qos(api, cluster):
    run(api, "sacctmgr -i add account ml")
    run(api, "sacctmgr -i add user uma account=ml")
    run(api, "sacctmgr -i add qos high priority=100 preempt=normal preemptmode=requeue gracetime=120")
    answer = run(api, "sacctmgr -i modify user where name=uma set maxjobs=2 maxwall=30:00 qos+=high")
    assert answer["output"] == (" Modified user associations...\n"
                                "  C = c1         A = ml                   U = uma      \n")
    settings = Association.objects.get(user="uma").settings
    # qos+= adds to the QOS the user inherited (fixtures/22.05/assoc-order/show-assoc-1.txt: high,normal)
    assert (settings["max_jobs"], settings["max_wall_minutes"], settings["qos"]) == (2, 30, ["normal", "high"])
    high = Qos.objects.get(name="high").settings
    assert (high["priority"], high["preempt"], high["preempt_mode"].upper(), high["grace_time"]) == (
        100, ["normal"], "REQUEUE", 120)
    run(api, "sacctmgr -i modify user uma set maxjobs=-1")
    assert "max_jobs" not in Association.objects.get(user="uma").settings


def test_show_qos_prints_sacctmgrs_table(api, cluster):
    run(api, "sacctmgr -i add qos high priority=100")
    lines = run(api, "sacctmgr show qos format=name,priority", user="vic")["output"].splitlines()
    # by id, as slurmdbd lists them (fixtures/22.05/qos_tres_mins/show-qos.txt): normal came first
    assert lines == ["      Name   Priority ", "---------- ---------- ", "    normal          0 ", "      high        100 "]
    parsable = run(api, "sacctmgr -P -n show qos format=name,priority", user="vic")["output"]
    assert parsable == "normal|0\nhigh|100\n"


def test_the_wrong_form_is_refused_as_sacctmgr_refuses_it(api, cluster):
    answer = run(api, "sacctmgr modify user name=adam set fairshare=10 cluster=tux")
    assert answer["exitCode"] == 1 and "Unknown option: cluster=tux" in answer["output"]


def test_only_admins_change_accounting(api, cluster):
    answer = run(api, "sacctmgr -i add account ml", user="uma")
    assert answer["exitCode"] == 1
    assert answer["output"] == " Your user doesn't have privilege to perform this action\n"
    assert run(api, "sacctmgr show account", user="uma")["exitCode"] == 0
    assert api("mallory").post(URL, {"command": "sacctmgr show account"}, format="json").status_code == 404


def test_deleting_an_account_removes_its_users_and_cancels_their_jobs(api, accounts):
    job_id = sbatch(api, "uma", "--begin=now+1hours", "--wrap", "x").json()["jobId"]
    answer = run(api, "sacctmgr -i delete account ml")
    assert answer["output"] == " Deleting accounts...\n  ml\n"
    assert not Association.objects.filter(user="uma").exists()
    assert SlurmJob.objects.get(job_id=job_id).state == "CANCELLED"
    assert not SlurmUser.objects.filter(name="uma").exists()


def test_deny_on_limit_makes_a_qos_limit_reject_at_submission(api, accounts):
    run(api, "sacctmgr -i modify qos normal set maxwall=60 flags=DenyOnLimit")
    answer = sbatch(api, "uma", "-t", "120", "--wrap", "x").json()
    assert answer["error"]["message"] == ("sbatch: error: Batch job submission failed: Job violates accounting/QOS "
                                          "policy (job submit limit, user's size and/or time limits)")
    run(api, "sacctmgr -i modify qos normal set flags-=DenyOnLimit")
    job_id = sbatch(api, "uma", "-t", "120", "--wrap", "x").json()["jobId"]
    assert SlurmJob.objects.get(job_id=job_id).reason == "QOSMaxWallDurationPerJobLimit"


def test_default_qos_minus_one_clears_it_and_jobs_get_the_default_again(api, accounts):
    run(api, "sacctmgr -i add qos high priority=100")
    run(api, "sacctmgr -i modify user uma set qos=normal,high defaultqos=high")
    assert Association.objects.get(user="uma").settings["default_qos"] == "high"
    assert SlurmJob.objects.get(job_id=sbatch(api, "uma", "--hold", "--wrap", "x").json()["jobId"]).qos == "high"
    answer = run(api, "sacctmgr -i modify user uma set defaultqos=-1")
    assert answer["exitCode"] == 0
    assert "default_qos" not in Association.objects.get(user="uma").settings
    shown = run(api, "sacctmgr -P -n show assoc where user=uma format=user,defaultqos", user="vic")["output"]
    assert shown == "uma|\n"
    assert not Qos.objects.filter(name="-1").exists()
    assert SlurmJob.objects.get(job_id=sbatch(api, "uma", "--hold", "--wrap", "x").json()["jobId"]).qos == "normal"


def test_a_default_qos_or_qos_list_naming_no_qos_is_refused(api, accounts):
    answer = run(api, "sacctmgr -i modify user uma set defaultqos=ghost")
    assert (answer["exitCode"], answer["output"]) == (
        1, "You gave a bad default qos 'ghost'.  Use 'list qos' to get complete list.\n")
    answer = run(api, "sacctmgr -i modify account ml set qos+=ghost")
    assert (answer["exitCode"], answer["output"]) == (1, "You gave a bad qos 'ghost'. Valid QOS's are normal\n")
    assert run(api, "sacctmgr -i add qos high preempt=ghost")["exitCode"] == 1
    assert Association.objects.get(user="uma").settings == {}
    assert not Qos.objects.filter(name="high").exists()


def test_clearing_limits_with_minus_one_lets_the_pending_job_start(api, accounts):
    run(api, "sacctmgr -i modify account ml set GrpTRES=gres/gpu=8,cpu=1000 MaxJobs=1")
    jobs = [sbatch(api, "uma", "--gres=gpu:8", "--wrap", "x").json()["jobId"] for _ in range(2)]
    moment = timezone.now()
    run_pass(accounts, moment)
    waiting = SlurmJob.objects.get(job_id=jobs[1])
    assert (waiting.state, waiting.reason) == (JobState.PENDING, "AssocMaxJobsLimit")
    run(api, "sacctmgr -i modify account ml set MaxJobs=-1")
    run_pass(accounts, moment + SCHED_DELAY)  # the main scheduler's next run
    waiting.refresh_from_db()
    assert (waiting.state, waiting.reason) == (JobState.PENDING, "AssocGrpGRES")
    run(api, "sacctmgr -i modify account ml set GrpTRES=gres/gpu=-1")
    assert Association.objects.get(account__name="ml", user="").settings == {"grp_tres": {"cpu": 1000}}
    run_pass(accounts, moment + 2 * SCHED_DELAY)
    waiting.refresh_from_db()
    assert waiting.state == JobState.RUNNING
