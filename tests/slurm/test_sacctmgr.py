"""sacctmgr: the commands of the seed and the Slurm docs parse into typed commands, wrong forms are
refused with sacctmgr's messages, nothing else ever escapes, and output looks like sacctmgr's."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.json_documents import NUMBER_EDGES, STRING_EDGES
from trainhub.slurm.sacctmgr import (
    COMMIT_PROMPT,
    NOTHING_MODIFIED,
    SacctmgrError,
    added_accounts_text,
    added_qos_text,
    added_users_text,
    association_object,
    changed_text,
    parse_sacctmgr,
    show_text,
)


def error(line):
    with pytest.raises(SacctmgrError) as caught:
        parse_sacctmgr(line)
    return caught.value.message


def test_the_seed_command_adds_a_user_to_an_account_and_partition():
    command = parse_sacctmgr("sudo sacctmgr add User Accounts=ml Partition=a4 alice")
    assert (command.verb, command.entity, command.names) == ("add", "user", ("alice",))
    assert command.set["Accounts"].value == ("ml",)
    assert command.set["Partitions"].value == ("a4",)


def test_options_and_verb_aliases():
    command = parse_sacctmgr("sacctmgr -iP create account science Description='science accounts' Organization=science")
    assert command.immediate and command.parsable == "plain" and command.verb == "add"
    assert command.set["Description"].value == "science accounts"
    assert parse_sacctmgr(["sacctmgr", "-n", "list", "assoc"]).header is False
    assert parse_sacctmgr("sacctmgr -p remove qos high").parsable == "ending"
    assert parse_sacctmgr("update qos high set priority=5").verb == "modify"


def test_modify_splits_where_and_set_in_either_order():
    first = parse_sacctmgr("sacctmgr modify user where name=adam cluster=tux account=physics set maxjobs=2 maxwall=30:00")
    assert first.names == ("adam",)
    assert first.where["Clusters"].value == ("tux",) and first.where["Accounts"].value == ("physics",)
    assert first.set["MaxJobs"].value == 2 and first.set["MaxWall"].value == 30
    second = parse_sacctmgr("sacctmgr modify user name=adam set fairshare=10 where cluster=tux")
    assert second.set["Fairshare"].value == 10 and second.where["Clusters"].value == ("tux",)


def test_the_documented_wrong_form_is_refused():
    message = error("sacctmgr modify user name=adam set fairshare=10 cluster=tux")
    assert message.startswith(" Unknown option: cluster=tux")


def test_keys_are_case_insensitive_prefixes_down_to_sacctmgrs_minimum():
    command = parse_sacctmgr("sacctmgr modify user bob set GRPTRES=cpu=1500,mem=200,gres/gpu=50 maxw=1-0 maxsub=5 f=parent")
    assert command.set["GrpTRES"].value == {"cpu": 1500, "mem": 200, "gres/gpu": 50}
    assert command.set["MaxWall"].value == 1440
    assert command.set["MaxSubmitJobs"].value == 5
    assert command.set["Fairshare"].value == "parent"
    assert parse_sacctmgr("show user where acc=ml").where["Accounts"].value == ("ml",)
    assert error("show user where a=ml").startswith(" Unknown condition: a=ml")


def test_minus_one_clears_limits_and_lists_take_plus_and_minus():
    command = parse_sacctmgr("sacctmgr modify account name=g1 set qos+=expedite GrpTRES=cpu=-1 MaxJobs=-1")
    assert command.set["QOS"].op == "+=" and command.set["QOS"].value == ("expedite",)
    assert command.set["GrpTRES"].value == {"cpu": None}
    assert command.set["MaxJobs"].value is None
    assert parse_sacctmgr("modify user u set qos=+high,-low").set["QOS"].value == ("+high", "-low")
    assert error("modify user u set maxjobs+=3").startswith(" MaxJobs does not take +=")


@pytest.mark.parametrize("entity,key,cleared", [
    ("user", "DefaultQOS", None), ("user", "GrpJobs", None), ("user", "GrpSubmitJobs", None),
    ("user", "GrpWall", None), ("user", "MaxJobs", None), ("user", "MaxSubmitJobs", None), ("user", "MaxWall", None),
    ("user", "Priority", None), ("user", "QOS", ()), ("account", "DefaultQOS", None), ("account", "MaxJobs", None),
    ("qos", "Flags", ()), ("qos", "GraceTime", None), ("qos", "GrpJobs", None), ("qos", "GrpWall", None),
    ("qos", "MaxJobsPerUser", None), ("qos", "MaxJobsPerAccount", None), ("qos", "MaxSubmitJobsPerUser", None),
    ("qos", "MaxSubmitJobsPerAccount", None), ("qos", "MaxWall", None), ("qos", "PreemptExemptTime", None),
    ("qos", "Preempt", ()), ("qos", "Priority", None), ("qos", "UsageFactor", None),
])
def test_minus_one_clears_every_clearable_value(entity, key, cleared):
    assert parse_sacctmgr(f"modify {entity} x set {key}=-1").set[key].value == cleared


@pytest.mark.parametrize("entity,key", [("user", "GrpTRES"), ("account", "GrpTRESMins"), ("user", "MaxTRES"),
                                        ("user", "MaxTRESPerNode"),
                                        ("qos", "GrpTRES"), ("qos", "MaxTRESPerUser"), ("qos", "MaxTRESPerAccount"),
                                        ("qos", "MinTRES")])
def test_minus_one_clears_one_tres_of_a_tres_limit(entity, key):
    assert parse_sacctmgr(f"modify {entity} x set {key}=gres/gpu=-1,cpu=4").set[key].value == {
        "gres/gpu": None, "cpu": 4}


def test_default_qos_minus_one_clears_it_and_other_values_stay_names():
    assert parse_sacctmgr("add user uma account=ml defaultqos=-1").set["DefaultQOS"].value is None
    assert parse_sacctmgr("modify user uma set defaultqos=High").set["DefaultQOS"].value == "high"
    assert parse_sacctmgr("modify user uma set fairshare=-1").set["Fairshare"].value == 1  # slurmdbd stores 1


def test_qos_options():
    command = parse_sacctmgr("sacctmgr add qos high Priority=100 Preempt=normal PreemptMode=requeue GraceTime=120 "
                             "PreemptExemptTime=00:10:00 Flags=DenyOnLimit,NoReserve MaxTRESPU=gres/gpu=8 "
                             "MaxJobsPA=4 UsageFactor=1.5 MaxWall=2:00:00")
    values = {key: spec.value for key, spec in command.set.items()}
    assert values == {"Priority": 100, "Preempt": ("normal",), "PreemptMode": "requeue", "GraceTime": 120,
                      "PreemptExemptTime": 600, "Flags": ("DenyOnLimit", "NoReserve"),
                      "MaxTRESPerUser": {"gres/gpu": 8}, "MaxJobsPerAccount": 4, "UsageFactor": 1.5,
                      "MaxWall": 120}
    assert "not supported" in error("sacctmgr add qos x PreemptMode=suspend")
    assert "Bad QOS Flags" in error("sacctmgr add qos x Flags=Fast")


def test_names_are_lower_cased_but_partitions_are_not():
    command = parse_sacctmgr("sacctmgr add user Alice Accounts=ML Partition=GPU")
    assert command.names == ("alice",) and command.set["Accounts"].value == ("ml",)
    assert command.set["Partitions"].value == ("GPU",)


def test_qos_takes_tres_minute_limits_max_tres_mins_per_job_being_max_tres_mins():
    command = parse_sacctmgr("sacctmgr -i add qos q GrpTRESMins=gres/gpu=2 MaxTRESMinsPerJob=cpu=100,gres/gpu=10")
    assert (command.set["GrpTRESMins"].value, command.set["MaxTRESMins"].value) == (
        {"gres/gpu": 2}, {"cpu": 100, "gres/gpu": 10})
    assert parse_sacctmgr("sacctmgr modify qos q set maxtresm=cpu=-1").set["MaxTRESMins"].value == {"cpu": None}


def test_show_takes_format_and_flags():
    command = parse_sacctmgr("sacctmgr list associations cluster=tux format=Account,Cluster,User,Fairshare tree withd")
    assert command.format == ("Account", "Cluster", "User", "Fairshare")
    assert command.flags == {"tree", "withdeleted"}


@pytest.mark.parametrize(("line", "start"), [
    ("", "No command given"),
    ("sacctmgr", "No command given"),
    ("sacctmgr frob user", "invalid keyword: frob"),
    ("sacctmgr add", " No entity given"),
    ("sacctmgr add thing x", " No valid entity in add command"),
    ("sacctmgr add wckeys x", " wckeys is not supported"),
    ("sacctmgr add user x", " Need name of account to add user to."),
    ("sacctmgr add account", " Need name of account to add."),
    ("sacctmgr modify user x", " You didn't give me anything to set"),
    ("sacctmgr delete user", " No conditions given to remove"),
    ("sacctmgr modify user x set fairshare", " Bad format on fairshare"),
    ("sacctmgr add user u account=a maxjobs=lots", " Bad MaxJobs value: lots"),
    ("sacctmgr add user u account=a grptres=gpu=4",
     "sacctmgr: error: slurmdb_format_tres_str: no TRES known by type gpu"),
    ("sacctmgr add user u account=a grptres=cpu=x", " Bad GrpTRES value"),
    ("sacctmgr modify qos q set maxtresmins=-1", "sacctmgr: error: slurmdb_format_tres_str: no TRES id found for -1"),
    ("sacctmgr add qos q MaxTRESMinsPJ=cpu=6", " Unknown option: MaxTRESMinsPJ=cpu=6"),
    ("sacctmgr add user u account=a maxtresmins=cpu=5", " maxtresmins is not supported"),
    ("sacctmgr add user 'bad name' account=a", " Invalid name 'bad name'"),
    ('sacctmgr add user "x', " Bad quoting"),
    ("sacctmgr -z show user", "sacctmgr: unrecognized option '-z'"),
    ("sacctmgr add user u account=a grptresrunmins=cpu=5", " grptresrunmins is not supported"),
])
def test_wrong_commands_get_a_clear_message(line, start):
    assert error(line).startswith(start)


@settings(deadline=None)
@given(st.lists(st.one_of(
    st.sampled_from(["sacctmgr", "-i", "-P", "add", "modify", "delete", "show", "user", "account", "qos", "assoc",
                     "cluster", "where", "set", "name=x", "acc=ml", "fairshare=parent", "maxjobs=-1", "qos+=a",
                     "grptres=cpu=4", "format=user%20", "tree", "maxwall=1-0", "PreemptMode=cancel", "="]),
    st.sampled_from([str(edge) for edge in STRING_EDGES + NUMBER_EDGES]).flatmap(
        lambda edge: st.sampled_from([edge, f"name={edge}", f"maxjobs={edge}", f"fairshare={edge}",
                                      f"grptres=gres/gpu={edge}", f"maxwall={edge}", f"format=user%{edge}"])),
    st.text(max_size=12)), max_size=8))
def test_the_parser_never_raises_anything_but_its_own_error(tokens):
    try:
        parse_sacctmgr(tokens)
    except SacctmgrError as exc:
        assert isinstance(exc.message, str) and exc.message


@settings(deadline=None)
@given(st.text(max_size=60))
def test_any_line_of_text_gives_a_command_or_a_message(line):
    try:
        parse_sacctmgr(line)
    except SacctmgrError:
        pass


def test_adding_a_user_prints_what_sacctmgr_prints():
    text = added_users_text(["alice"], default_account=None, associations=[("alice", "ml", "tc1", "a4")])
    assert text == (" Adding User(s)\n  alice\n Associations =\n"
                    "  U = alice     A = ml         C = tc1        P = a4        \n Non Default Settings\n")
    text = added_users_text(["admin"], default_account="account0", admin_level="Administrator",
                            associations=[("admin", "account0", "micro", None)], limits={"MaxSubmitJobs": 1000})
    assert text == (" Adding User(s)\n  admin\n Settings =\n  Default Account = account0\n"
                    "  Admin Level     = Administrator\n Associations =\n  U = admin     A = account0   C = micro     \n"
                    " Non Default Settings\n  MaxSubmitJobs = 1000\n")


def test_adding_an_account_prints_what_sacctmgr_prints():
    text = added_accounts_text(["account0"], cluster="micro", limits={"Fairshare": 100})
    assert text == (" Adding Account(s)\n  account0\n Settings\n  Description     = Account Name\n"
                    "  Organization    = Parent/Account Name\n Associations\n  A = account0   C = micro     \n"
                    " Settings\n  Fairshare     = 100\n  Parent        = root\n")
    assert added_qos_text(["high"], {"Priority": 100}).splitlines()[:4] == [" Adding QOS(s)", "  high", " Settings",
                                                                          "  Description    = high"]
    assert COMMIT_PROMPT.endswith("(N/y): ")


def test_modifications_list_associations_as_slurmdbd_names_them():
    objects = [association_object("micro", "account2", "user5")]
    assert changed_text("Modified", "user associations", objects) == (
        " Modified user associations...\n  C = micro      A = account2             U = user5    \n")
    assert changed_text("Modified", "users", []) == NOTHING_MODIFIED


def test_show_qos_prints_the_default_columns():
    record = {"name": "normal", "priority": 0, "grace_time": 0, "preempt_mode": "cluster", "usage_factor": 1.0}
    lines = show_text("qos", [record]).splitlines()
    assert lines[0].startswith("      Name   Priority  GraceTime    Preempt   PreemptExemptTime PreemptMode")
    assert lines[2].startswith("    normal          0   00:00:00                                    cluster ")
    assert "   1.000000 " in lines[2]


def test_show_associations_with_tree_and_format():
    records = [{"cluster": "tc1", "account": "root", "depth": 0, "shares": 1},
               {"cluster": "tc1", "account": "ml", "depth": 1, "shares": "parent", "qos": ["normal", "high"],
                "grp_tres": {"gres/gpu": 8}, "max_wall": 90},
               {"cluster": "tc1", "account": "ml", "user": "alice", "depth": 2, "shares": 1}]
    text = show_text("association", records, format=("Account", "User", "Share", "GrpTRES", "MaxWall", "QOS"),
                     tree=True, parsable="plain")
    assert text.splitlines() == ["Account|User|Share|GrpTRES|MaxWall|QOS", "root||1|||", " ml||parent|gres/gpu=8|01:30:00|high,normal",
                                 "  ml|alice|1|||"]
    assert show_text("user", [{"user": "root", "default_account": "root", "admin_level": "Administrator"}]).splitlines() == [
        "      User   Def Acct     Admin ", "---------- ---------- --------- ", "      root       root Administ+ "]
    with pytest.raises(SacctmgrError):
        show_text("user", [], format=("Bogus",))
