"""slurm.conf keys of a cluster spec: the seed's example is accepted, bad keys and values are named,
defaults are Slurm's, and the rendered slurm.conf has the node, partition and policy lines."""

import pytest

from trainhub.slurm.conf import (
    CATALOGUE,
    ClusterLayout,
    ConfigError,
    NodeSpec,
    PartitionSpec,
    SlurmConfig,
    parse_config,
    parse_partition_options,
    render_slurm_conf,
    script_file_names,
)
from trainhub.slurm.tres import parse_gres

#: The config block of the seed's example cluster spec, verbatim.
SEED_CONFIG = {
    "AccountingStorageEnforce": "associations,limits,qos",
    "PriorityType": "priority/multifactor",
    "PriorityWeightAge": "1000",
    "PriorityWeightFairshare": "10000",
    "PreemptType": "preempt/partition_prio",
    "PreemptMode": "REQUEUE",
    "PreemptExemptTime": "00:10:00",
}


def violations(values):
    with pytest.raises(ConfigError) as caught:
        parse_config(values)
    return {v.key: v.description for v in caught.value.violations}


def test_the_seed_example_config_is_accepted():
    config = parse_config(SEED_CONFIG)
    assert config.accounting_storage_enforce == frozenset({"associations", "limits", "qos"})
    assert config.priority_type == "priority/multifactor"
    assert (config.priority_weight_age, config.priority_weight_fairshare) == (1000, 10000)
    assert config.priority_weight_job_size == 0
    assert config.preempt_type == "preempt/partition_prio"
    assert config.preempt_base_mode == "REQUEUE"
    assert config.preempt_exempt_time == 600
    assert config.explicit == SEED_CONFIG


def test_an_empty_config_has_slurms_defaults():
    config = parse_config({})
    assert config == SlurmConfig()
    assert config.priority_max_age == 7 * 86400
    assert config.priority_decay_half_life == 7 * 86400
    assert config.priority_calc_period == 300
    assert config.scheduler_type == "sched/backfill"
    assert config.scheduler_parameters.bf_max_job_test == 500
    assert config.scheduler_parameters.bf_window_minutes == 1440
    assert config.scheduler_parameters.bf_resolution == 60
    assert config.preempt_exempt_time is None
    assert not config.preemption_enabled
    assert config.fair_tree


def test_keys_match_case_insensitively_and_numbers_may_be_json_numbers():
    config = parse_config({"priorityweightage": 500, "PRIORITYFLAGS": "no_fair_tree,accrue_always"})
    assert config.priority_weight_age == 500
    assert config.priority_flags == frozenset({"NO_FAIR_TREE", "ACCRUE_ALWAYS"})
    assert not config.fair_tree
    assert config.explicit == {"PriorityWeightAge": "500", "PriorityFlags": "no_fair_tree,accrue_always"}


def test_every_bad_key_is_reported_with_its_reason():
    found = violations({"PriorityWeightAge": "lots", "Bogus": "1", "ClusterName": "x",
                        "PriorityWeightQOS": "-5", "PriorityMaxAge": "soon", "PriorityFlags": "FAST"})
    assert "integer" in found["PriorityWeightAge"]
    assert "not a slurm.conf key" in found["Bogus"]
    assert "set by trainhub" in found["ClusterName"]
    assert "between 0 and 4294967295" in found["PriorityWeightQOS"]
    assert "invalid time" in found["PriorityMaxAge"]
    assert "unknown flag 'FAST'" in found["PriorityFlags"]


def test_suspend_and_gang_preemption_are_refused_with_a_reason():
    found = violations({"PreemptType": "preempt/qos", "PreemptMode": "SUSPEND,GANG"})
    assert "SUSPEND is not supported" in found["PreemptMode"]


def test_a_preempt_type_without_a_preempt_mode_is_incompatible():
    found = violations({"PreemptType": "preempt/partition_prio"})
    assert "PreemptType and PreemptMode values incompatible" in found["PreemptType"]
    found = violations({"PreemptMode": "REQUEUE"})
    assert "PreemptType and PreemptMode values incompatible" in found["PreemptMode"]


def test_preempt_mode_takes_one_base_mode_and_modifiers():
    assert parse_config({"PreemptType": "preempt/qos", "PreemptMode": "REQUEUE,WITHIN"}).preempt_mode == {
        "REQUEUE", "WITHIN"}
    assert "one of OFF, CANCEL or REQUEUE" in violations({"PreemptType": "preempt/qos",
                                                          "PreemptMode": "CANCEL,REQUEUE"})["PreemptMode"]
    assert "needs OFF, CANCEL or REQUEUE" in violations({"PreemptMode": "PRIORITY"})["PreemptMode"]


def test_enforce_flags_imply_associations_as_slurm_does():
    assert parse_config({"AccountingStorageEnforce": "limits"}).accounting_storage_enforce == {
        "limits", "associations"}
    assert parse_config({"AccountingStorageEnforce": "safe"}).enforces_limits


def test_preempt_send_user_signal_is_accepted_as_a_flag():
    """22.05's spelling (fixtures/22.05/mail.sh's USERSIG round); a value is refused as for any flag."""
    assert parse_config({"SchedulerParameters": "preempt_send_user_signal"}).scheduler_parameters.preempt_send_user_signal
    assert not parse_config({}).scheduler_parameters.preempt_send_user_signal
    with pytest.raises(ConfigError, match="takes no value"):
        parse_config({"SchedulerParameters": "preempt_send_user_signal=1"})


def test_scheduler_parameters_are_typed_and_checked():
    config = parse_config({"SchedulerParameters": "bf_window=2880,bf_resolution=300,bf_continue,bf_max_job_test=100"})
    params = config.scheduler_parameters
    assert (params.bf_window_minutes, params.bf_resolution, params.bf_continue, params.bf_max_job_test) == (
        2880, 300, True, 100)
    assert "between 1 and 43200" in violations({"SchedulerParameters": "bf_window=99999"})["SchedulerParameters"]
    assert "unknown option 'bf_typo'" in violations({"SchedulerParameters": "bf_typo=1"})["SchedulerParameters"]
    assert "takes no value" in violations({"SchedulerParameters": "bf_continue=1"})["SchedulerParameters"]
    assert parse_config({}).scheduler_parameters.batch_sched_delay == 3  # Slurm's default
    assert parse_config({"SchedulerParameters": "batch_sched_delay=20"}).scheduler_parameters.batch_sched_delay == 20


def test_priority_tres_weights_and_memory_defaults_parse():
    config = parse_config({"PriorityWeightTRES": "CPU=1000,Mem=2000,GRES/gpu=3000", "DefMemPerCPU": "4G"})
    assert config.priority_weight_tres == {"cpu": 1000.0, "mem": 2000.0, "gres/gpu": 3000.0}
    assert config.def_mem_per_cpu == 4096
    assert "mutually exclusive" in violations({"DefMemPerCPU": "1", "DefMemPerNode": "1"})["DefMemPerNode"]


def test_a_key_given_twice_in_different_case_is_rejected():
    assert "given twice" in violations({"PriorityWeightAge": "1", "priorityweightage": "2"})["priorityweightage"]


def test_multiline_values_cannot_inject_lines_into_slurm_conf():
    assert "single line" in violations({"PriorityWeightTRES": "CPU=1\nSlurmUser=root"})["PriorityWeightTRES"]


def test_an_admin_edit_merges_and_unsets_keys():
    config = parse_config(SEED_CONFIG).with_changes({"priorityweightage": "2000", "PreemptExemptTime": None})
    assert config.priority_weight_age == 2000
    assert config.preempt_exempt_time is None
    assert "PreemptExemptTime" not in config.explicit
    with pytest.raises(ConfigError):
        parse_config(SEED_CONFIG).with_changes({"PreemptMode": "OFF"})


def test_every_catalogue_default_parses_to_the_dataclass_default():
    for name, key in CATALOGUE.items():
        if key.default and name not in ("AccountingStorageTRES",):
            assert getattr(parse_config({name: key.default}), key.attribute) == getattr(
                SlurmConfig(), key.attribute), name


def test_partition_options_parse_and_reject_bad_values():
    options = parse_partition_options({"PriorityTier": "10", "MaxTime": "2-0", "PreemptMode": "requeue",
                                       "priorityjobfactor": 20, "GraceTime": "120"})
    assert (options.priority_tier, options.max_time_minutes, options.preempt_mode) == (10, 2880, "REQUEUE")
    assert options.priority_job_factor == 20
    with pytest.raises(ConfigError) as caught:
        parse_partition_options({"PriorityTier": "70000", "Color": "red"})
    assert {v.key for v in caught.value.violations} == {"PriorityTier", "Color"}


def test_script_file_names_sort_so_slurm_runs_them_in_spec_order():
    names = script_file_names("prolog", 2)
    assert names == ["prolog-002.sh", "prolog-001.sh"]
    assert sorted(names, reverse=True) == names


def test_the_rendered_slurm_conf_has_nodes_partitions_and_policy():
    nodes = tuple(NodeSpec(f"a4-{i}", 224, 3_891_200, tuple(parse_gres("gpu:8"))) for i in range(4))
    layout = ClusterLayout(name="tc1", nodes=nodes,
                           partitions=(PartitionSpec("a4", tuple(n.name for n in nodes), default=True,
                                                     options=parse_partition_options({"PriorityTier": "2"})),),
                           controller_host="tc1-controller", prolog_count=2, epilog_count=1)
    text = render_slurm_conf(layout, parse_config(SEED_CONFIG))
    lines = text.splitlines()
    assert "ClusterName=tc1" in lines
    assert "GresTypes=gpu" in lines
    assert "NodeName=a4-[0-3] CPUs=224 RealMemory=3891200 Gres=gpu:8 State=UNKNOWN" in lines
    assert ("PartitionName=a4 Nodes=a4-[0-3] Default=YES MaxTime=UNLIMITED PriorityTier=2 PriorityJobFactor=1 "
            "State=UP") in lines
    for key, value in SEED_CONFIG.items():
        assert f"{key}={value}" in lines
    assert "AccountingStorageType=accounting_storage/slurmdbd" in lines
    assert "Prolog=/etc/slurm/prolog.d/*" in lines and "Epilog=/etc/slurm/epilog.d/*" in lines
