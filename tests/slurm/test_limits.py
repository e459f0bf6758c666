"""AccountingStorageEnforce: Slurm's submit errors, which limits reject and which pend, and the reason strings."""

import pytest

from trainhub.slurm.conf import parse_config, parse_partition_options
from trainhub.slurm.limits import (
    ACCOUNTING_POLICY,
    INVALID_ACCOUNT,
    INVALID_NODE_COUNT,
    INVALID_QOS,
    INVALID_TIME_LIMIT,
    PARTITION_NOT_AVAIL,
    TOO_MANY_CPUS,
    AssocRecord,
    JobRequest,
    LimitContext,
    LimitUsage,
    QosRecord,
    SubmitRejected,
    limit_reason,
    tres_minutes_exhausted,
    validate_submission,
)

ENFORCE = {"AccountingStorageEnforce": "associations,limits,qos"}


def context(*, assocs=(), qos=(), partitions=None, config=ENFORCE):
    base = [AssocRecord("root", "root", qos=frozenset({"normal", "high"})),
            AssocRecord("ml", "ml", parent="root"),
            AssocRecord("alice@ml", "ml", user="alice", parent="ml")]
    records = {a.key: a for a in [*base, *assocs]}
    qos_records = {q.name: q for q in [QosRecord("normal"), QosRecord("high", priority=100), *qos]}
    return LimitContext(config=parse_config(config), associations=records, qos=qos_records,
                        partitions=partitions or {"gpu": parse_partition_options({})})


def submit(ctx, usage=None, **overrides):
    fields = dict(user="alice", account="ml", partition="gpu", qos=None, nodes=1, tres={"cpu": 8, "gres/gpu": 4},
                  time_limit_minutes=60, default_account="ml")
    fields.update(overrides)
    return validate_submission(ctx, usage or LimitUsage(ctx), **fields)


def rejection(ctx, usage=None, **overrides):
    with pytest.raises(SubmitRejected) as caught:
        submit(ctx, usage, **overrides)
    return caught.value


def job(qos="normal", user="alice", account="ml", assoc_key="alice@ml", gpus=4, minutes=60, nodes=1):
    return JobRequest(user=user, account=account, partition="gpu", qos=qos, assoc_key=assoc_key, nodes=nodes,
                      tres={"cpu": 8 * nodes, "gres/gpu": gpus}, time_limit_minutes=minutes)


def test_a_valid_submission_gets_its_association_and_default_qos():
    accepted = submit(context())
    assert (accepted.assoc_key, accepted.account, accepted.qos, accepted.pending_reason) == (
        "alice@ml", "ml", "normal", None)


def test_a_user_without_an_association_is_refused_with_slurms_message():
    assert rejection(context(), user="bob").message == INVALID_ACCOUNT
    assert rejection(context(), account="physics").message == INVALID_ACCOUNT


def test_without_enforcement_a_job_needs_no_association():
    assert submit(context(config={}), user="bob").assoc_key is None


def test_a_partition_association_only_allows_that_partition():
    ctx = context(assocs=[AssocRecord("bob@ml:gpu", "ml", user="bob", partition="gpu", parent="ml")],
                  partitions={"gpu": parse_partition_options({}), "cpu": parse_partition_options({})})
    assert submit(ctx, user="bob").assoc_key == "bob@ml:gpu"
    assert rejection(ctx, user="bob", partition="cpu").message == INVALID_ACCOUNT


def test_an_unknown_or_disallowed_qos_is_refused():
    ctx = context(qos=[QosRecord("secret")])
    assert rejection(ctx, qos="nope").message == INVALID_QOS
    assert rejection(ctx, qos="secret").message == INVALID_QOS
    assert submit(ctx, qos="high").qos == "high"


def test_the_only_allowed_qos_becomes_the_default():
    ctx = context(assocs=[AssocRecord("bob@ml", "ml", user="bob", parent="ml", qos=frozenset({"high"}))])
    assert submit(ctx, user="bob").qos == "high"


def test_an_inherited_default_qos_wins_over_normal():
    ctx = context(assocs=[AssocRecord("ml", "ml", parent="root", default_qos="high")])
    assert submit(ctx).qos == "high"


def test_partition_allow_lists_refuse_accounts_and_qos():
    ctx = context(partitions={"gpu": parse_partition_options({"AllowAccounts": "physics", "AllowQos": "high"})})
    assert rejection(ctx).message == INVALID_ACCOUNT
    ctx = context(partitions={"gpu": parse_partition_options({"AllowQos": "high"})})
    assert rejection(ctx).message == INVALID_QOS
    assert submit(ctx, qos="high").qos == "high"


def test_max_submit_jobs_rejects_the_job_over_the_count():
    ctx = context(assocs=[AssocRecord("alice@ml", "ml", user="alice", parent="ml", max_submit_jobs=2)])
    usage = LimitUsage.of(ctx, [(job(), True), (job(), False)])
    error = rejection(ctx, usage)
    assert (error.message, error.reason) == (ACCOUNTING_POLICY, "AssocMaxSubmitJobLimit")


def test_an_account_grp_submit_jobs_counts_every_user_below_it():
    ctx = context(assocs=[AssocRecord("ml", "ml", parent="root", grp_submit_jobs=1),
                          AssocRecord("bob@ml", "ml", user="bob", parent="ml")])
    usage = LimitUsage.of(ctx, [(job(user="bob", assoc_key="bob@ml"), False)])
    assert rejection(ctx, usage).reason == "AssocGrpSubmitJobsLimit"


def test_qos_submit_limits_reject_per_user_and_per_account():
    ctx = context(qos=[QosRecord("normal", max_submit_jobs_per_user=1)])
    assert rejection(ctx, LimitUsage.of(ctx, [(job(), False)])).reason == "QOSMaxSubmitJobPerUserLimit"
    ctx = context(qos=[QosRecord("normal", max_submit_jobs_per_account=1)])
    assert rejection(ctx, LimitUsage.of(ctx, [(job(), False)])).reason == "MaxSubmitJobsPerAccount"


def test_a_per_job_limit_pends_unless_the_qos_denies_on_limit():
    assocs = [AssocRecord("ml", "ml", parent="root", max_tres_per_job={"gres/gpu": 2})]
    accepted = submit(context(assocs=assocs))
    assert accepted.pending_reason == "AssocMaxGRESPerJob"  # inherited by alice from her account
    strict = context(assocs=assocs, qos=[QosRecord("normal", flags=frozenset({"DenyOnLimit"}))])
    error = rejection(strict)
    assert (error.message, error.reason) == (ACCOUNTING_POLICY, "AssocMaxGRESPerJob")


def test_max_wall_pends_and_becomes_the_time_limit_of_a_job_without_one():
    ctx = context(qos=[QosRecord("normal", max_wall_minutes=30)])
    assert submit(ctx, time_limit_minutes=120).pending_reason == "QOSMaxWallDurationPerJobLimit"
    accepted = submit(ctx, time_limit_minutes=None)
    assert accepted.time_limit_minutes == 30 and accepted.pending_reason is None


def test_a_qos_limit_replaces_the_association_limit_of_the_same_kind():
    ctx = context(assocs=[AssocRecord("alice@ml", "ml", user="alice", parent="ml", max_wall_minutes=60)],
                  qos=[QosRecord("normal", max_wall_minutes=600)])
    assert submit(ctx, time_limit_minutes=120).pending_reason is None
    assert submit(context(assocs=[AssocRecord("alice@ml", "ml", user="alice", parent="ml", max_wall_minutes=60)]),
                  time_limit_minutes=120).pending_reason == "AssocMaxWallDurationPerJobLimit"


def test_grp_tres_pends_while_the_account_uses_too_many_gpus():
    ctx = context(assocs=[AssocRecord("ml", "ml", parent="root", grp_tres={"gres/gpu": 8}),
                          AssocRecord("bob@ml", "ml", user="bob", parent="ml")])
    usage = LimitUsage.of(ctx, [(job(user="bob", assoc_key="bob@ml", gpus=6), True)])
    assert limit_reason(ctx, usage, job(gpus=4)) == "AssocGrpGRES"
    assert limit_reason(ctx, usage, job(gpus=2)) is None
    usage.start(job(gpus=2))
    assert limit_reason(ctx, usage, job(gpus=1)) == "AssocGrpGRES"


def minutes_context(used, limit=100, config=ENFORCE, on="ml"):
    limited = AssocRecord(on, "ml", parent="root" if on == "ml" else None, grp_tres_mins={"gres/gpu": limit},
                          used_tres_minutes={"gres/gpu": used, "cpu": 10 * used})
    return context(assocs=[limited], config=config)


def test_grp_tres_mins_holds_jobs_asking_for_a_tres_whose_decayed_usage_reached_the_limit():
    assert limit_reason(minutes_context(used=99), LimitUsage(minutes_context(99)), job(gpus=4)) is None
    ctx = minutes_context(used=100)
    assert limit_reason(ctx, LimitUsage(ctx), job(gpus=4)) == "AssocGrpGRESMinutes"
    assert limit_reason(ctx, LimitUsage(ctx), job(gpus=0)) is None  # a CPU-only job does not use the TRES
    cpu = context(assocs=[AssocRecord("ml", "ml", parent="root", grp_tres_mins={"cpu": 5},
                                      used_tres_minutes={"cpu": 5})])
    assert limit_reason(cpu, LimitUsage(cpu), job()) == "AssocGrpCPUMinutesLimit"


def test_grp_tres_mins_is_not_enforced_on_the_root_association():
    ctx = minutes_context(used=1000, on="root")
    assert limit_reason(ctx, LimitUsage(ctx), job(gpus=4)) is None
    assert tres_minutes_exhausted(ctx, job(gpus=4), {"gres/gpu": 4}) is None


def test_grp_tres_mins_with_safe_holds_a_job_that_could_not_finish_inside_what_is_left():
    safe = {"AccountingStorageEnforce": "associations,limits,qos,safe"}
    ctx = minutes_context(used=50, config=safe)
    assert limit_reason(ctx, LimitUsage(ctx), job(gpus=1, minutes=50)) is None  # 50 of the 50 left
    assert limit_reason(ctx, LimitUsage(ctx), job(gpus=1, minutes=51)) == "AssocGrpGRESMinutes"
    assert limit_reason(ctx, LimitUsage(ctx), job(gpus=1, minutes=None)) == "AssocGrpGRESMinutes"
    unsafe = minutes_context(used=50)
    assert limit_reason(unsafe, LimitUsage(unsafe), job(gpus=1, minutes=500)) is None


def test_a_running_job_of_an_association_at_its_grp_tres_mins_is_timed_out_with_slurms_text():
    ctx = minutes_context(used=120)
    assert tres_minutes_exhausted(ctx, job(gpus=4), {"cpu": 8, "gres/gpu": 4}) == (
        "Job is at or exceeds association (acc=ml/user=(null)/part=(null)) group max TRES(gres/gpu) minutes of 100 "
        "with 120")
    assert tres_minutes_exhausted(ctx, job(gpus=0), {"cpu": 8}) is None
    safe = minutes_context(used=120, config={"AccountingStorageEnforce": "associations,limits,safe"})
    assert tres_minutes_exhausted(safe, job(gpus=4), {"gres/gpu": 4}) is None


def test_qos_max_tres_mins_holds_a_job_whose_time_limit_times_its_request_is_over():
    # fixtures/22.05/qos_tres_mins: MaxTRESMins=cpu=100,gres/gpu=10 (squeue-1, jobs 1-4)
    ctx = context(qos=[QosRecord("normal", max_tres_mins_per_job={"cpu": 100, "gres/gpu": 10})])
    usage = LimitUsage(ctx)
    assert limit_reason(ctx, usage, job(gpus=1, minutes=5)) is None  # cpu 40, gres/gpu 5
    assert limit_reason(ctx, usage, job(gpus=4, minutes=5)) == "QOSMaxGRESMinutesPerJob"
    assert limit_reason(ctx, usage, job(gpus=1, minutes=13)) == "QOSMaxCpuMinutesPerJobLimit"  # cpu first
    assert limit_reason(ctx, usage, job(gpus=1, minutes=None)) == "QOSMaxCpuMinutesPerJobLimit"  # never ends
    assert limit_reason(ctx, usage, job(gpus=0, minutes=12)) is None  # no GPU asked, cpu 96


def test_qos_grp_tres_mins_holds_and_stops_jobs_once_the_qos_usage_reached_it():
    def qos_context(used):
        return context(qos=[QosRecord("normal", grp_tres_mins={"gres/gpu": 2}, used_tres_minutes={"gres/gpu": used})])

    under, over = qos_context(1), qos_context(7)
    assert limit_reason(under, LimitUsage(under), job(gpus=8, minutes=5)) is None  # its request alone is over
    assert limit_reason(over, LimitUsage(over), job(gpus=1, minutes=1)) == "QOSGrpGRESMinutes"
    assert limit_reason(over, LimitUsage(over), job(gpus=0)) is None
    assert tres_minutes_exhausted(over, job(gpus=8), {"cpu": 8, "gres/gpu": 8}) == (
        "Job is at or exceeds QOS normal's group max TRES(gres/gpu) minutes of 2 with 7")
    assert tres_minutes_exhausted(over, job(gpus=0), {"cpu": 8}) is None
    assert tres_minutes_exhausted(under, job(gpus=8), {"gres/gpu": 8}) is None


def test_job_count_limits_give_slurms_reasons():
    ctx = context(assocs=[AssocRecord("ml", "ml", parent="root", grp_jobs=2),
                          AssocRecord("alice@ml", "ml", user="alice", parent="ml", max_jobs=1)])
    usage = LimitUsage.of(ctx, [(job(), True)])
    assert limit_reason(ctx, usage, job()) == "AssocMaxJobsLimit"
    ctx = context(assocs=[AssocRecord("ml", "ml", parent="root", grp_jobs=1),
                          AssocRecord("bob@ml", "ml", user="bob", parent="ml")])
    usage = LimitUsage.of(ctx, [(job(user="bob", assoc_key="bob@ml"), True)])
    assert limit_reason(ctx, usage, job()) == "AssocGrpJobsLimit"


def test_qos_job_and_tres_limits_give_slurms_reasons():
    ctx = context(qos=[QosRecord("normal", grp_jobs=1)])
    assert limit_reason(ctx, LimitUsage.of(ctx, [(job(user="x", assoc_key=None), True)]), job()) == "QOSGrpJobsLimit"
    ctx = context(qos=[QosRecord("normal", max_jobs_per_user=1)])
    assert limit_reason(ctx, LimitUsage.of(ctx, [(job(), True)]), job()) == "QOSMaxJobsPerUserLimit"
    ctx = context(qos=[QosRecord("normal", max_tres_per_user={"gres/gpu": 4})])
    assert limit_reason(ctx, LimitUsage.of(ctx, [(job(gpus=2), True)]), job(gpus=4)) == "QOSMaxGRESPerUser"
    ctx = context(qos=[QosRecord("normal", max_tres_per_job={"gres/gpu": 2})])
    assert limit_reason(ctx, LimitUsage(ctx), job(gpus=4)) == "QOSMaxGRESPerJob"
    ctx = context(qos=[QosRecord("normal", grp_tres={"cpu": 10})])
    assert limit_reason(ctx, LimitUsage(ctx), job(gpus=1, nodes=2)) == "QOSGrpCpuLimit"
    ctx = context(qos=[QosRecord("normal", min_tres_per_job={"gres/gpu": 8})])
    assert limit_reason(ctx, LimitUsage(ctx), job(gpus=4)) == "QOSMinGRES"
    ctx = context(qos=[QosRecord("normal", max_tres_per_node={"gres/gpu": 4})])
    assert limit_reason(ctx, LimitUsage(ctx), job(gpus=8, nodes=2)) is None
    assert limit_reason(ctx, LimitUsage(ctx), job(gpus=8, nodes=1)) == "QOSMaxGRESPerNode"


def test_the_partition_qos_comes_before_the_job_qos_unless_over_part_qos():
    partitions = {"gpu": parse_partition_options({"QOS": "part"})}
    ctx = context(partitions=partitions, qos=[QosRecord("part", max_wall_minutes=30),
                                              QosRecord("normal", max_wall_minutes=600)])
    assert limit_reason(ctx, LimitUsage(ctx), job(minutes=60)) == "QOSMaxWallDurationPerJobLimit"
    ctx = context(partitions=partitions, qos=[QosRecord("part", max_wall_minutes=30),
                                              QosRecord("normal", max_wall_minutes=600,
                                                        flags=frozenset({"OverPartQOS"}))])
    assert limit_reason(ctx, LimitUsage(ctx), job(minutes=60)) is None


def test_limits_are_ignored_without_limits_enforcement():
    ctx = context(config={"AccountingStorageEnforce": "associations"},
                  qos=[QosRecord("normal", max_tres_per_job={"gres/gpu": 1})])
    assert limit_reason(ctx, LimitUsage(ctx), job(gpus=8)) is None
    assert submit(ctx, tres={"gres/gpu": 8}).pending_reason is None


def test_partition_limits_pend_by_default_and_reject_with_enforce_part_limits():
    partitions = {"gpu": parse_partition_options({"MaxTime": "30", "MaxNodes": "2"})}
    assert submit(context(partitions=partitions)).pending_reason == "PartitionTimeLimit"
    assert submit(context(partitions=partitions), time_limit_minutes=10, nodes=4).pending_reason == \
        "PartitionNodeLimit"
    strict = context(partitions=partitions, config={**ENFORCE, "EnforcePartLimits": "ALL"})
    assert rejection(strict).message == INVALID_TIME_LIMIT
    assert rejection(strict, time_limit_minutes=10, nodes=4).message == INVALID_NODE_COUNT


def test_the_node_limits_come_before_the_time_limit_as_in_slurm():
    """fixtures/22.05/part-order: N3-t10, nomax-N5-t10 and all-N3-t10, all-nomax-N5-t10."""
    partitions = {"gpu": parse_partition_options({"MaxTime": "5", "MaxNodes": "2"})}
    assert submit(context(partitions=partitions), time_limit_minutes=10, nodes=3).pending_reason == \
        "PartitionNodeLimit"
    unlimited = {"gpu": parse_partition_options({"MaxTime": "5"})}
    assert submit(context(partitions=unlimited), time_limit_minutes=10, nodes=5,
                  partition_nodes=4).pending_reason == "PartitionNodeLimit"
    for limits in (partitions, unlimited):
        strict = context(partitions=limits, config={**ENFORCE, "EnforcePartLimits": "ALL"})
        assert rejection(strict, time_limit_minutes=10, nodes=5, partition_nodes=4).message == INVALID_NODE_COUNT


def test_a_count_from_ntasks_is_no_limit_of_the_partitions_node_count():
    assert submit(context(), nodes=5, partition_nodes=4, from_tasks=True).pending_reason is None


def test_a_count_from_ntasks_is_no_node_limit_before_the_time_limit():
    """fixtures/22.05/part-edge: n40-t10, ``-n 40 -t 10`` (3 nodes) under MaxNodes=2 MaxTime=5, PartitionTimeLimit."""
    partitions = {"gpu": parse_partition_options({"MaxTime": "5", "MaxNodes": "2"})}
    assert submit(context(partitions=partitions), time_limit_minutes=10, nodes=3, partition_nodes=4,
                  from_tasks=True).pending_reason == "PartitionTimeLimit"
    assert submit(context(partitions=partitions), time_limit_minutes=1, nodes=3, partition_nodes=4,
                  from_tasks=True).pending_reason is None


def test_more_cpus_than_the_partition_has_is_refused_first_under_enforce_part_limits():
    """fixtures/22.05/part-more: all-n65-t10, ``-n 65 -t 10`` on 4 nodes of 16 CPUs under MaxNodes=2 MaxTime=5 and
    EnforcePartLimits=ALL, ``More processors requested than permitted``; all-n40-t10 (40 CPUs) the time limit's
    refusal. Under NO it pends (fixtures/22.05/part-edge n65-t10: PartitionConfig, the submission's word)."""
    partitions = {"gpu": parse_partition_options({"MaxTime": "5", "MaxNodes": "2"})}
    strict = context(partitions=partitions, config={**ENFORCE, "EnforcePartLimits": "ALL"})
    over = dict(time_limit_minutes=10, nodes=5, partition_nodes=4, from_tasks=True, partition_cpus=64)
    assert rejection(strict, tres={"cpu": 65}, **over).message == TOO_MANY_CPUS
    assert rejection(strict, tres={"cpu": 40}, **{**over, "nodes": 3}).message == INVALID_TIME_LIMIT
    assert rejection(strict, tres={"cpu": 65}, time_limit_minutes=1, partition_cpus=64).message == TOO_MANY_CPUS
    assert submit(context(partitions=partitions), tres={"cpu": 65}, **over).pending_reason == "PartitionTimeLimit"


def test_the_account_and_qos_are_validated_before_the_partitions_limits():
    """fixtures/22.05/part-order: all-N5-acct, all-N5-qos, all-t10-acct under EnforcePartLimits=ALL."""
    strict = context(partitions={"gpu": parse_partition_options({"MaxTime": "5", "MaxNodes": "2"})},
                     config={**ENFORCE, "EnforcePartLimits": "ALL"})
    over = dict(nodes=5, partition_nodes=4)
    assert rejection(strict, account="nosuchacct", **over).message == INVALID_ACCOUNT
    assert rejection(strict, qos="nosuchqos", **over).message == INVALID_QOS
    assert rejection(strict, account="nosuchacct", time_limit_minutes=10).message == INVALID_ACCOUNT


def test_a_down_partition_comes_after_the_node_limits_and_before_the_time_limit():
    """fixtures/22.05/part-order: at-down-N3 PartitionConfig (the node limit's), at-down-t10 PartitionDown."""
    down = context(partitions={"gpu": parse_partition_options({"MaxTime": "5", "MaxNodes": "2", "State": "DOWN"})})
    assert submit(down, nodes=3, time_limit_minutes=1).pending_reason == "PartitionNodeLimit"
    assert submit(down, time_limit_minutes=10).pending_reason == "PartitionDown"


def test_partition_default_time_then_max_time_fill_a_missing_limit():
    partitions = {"gpu": parse_partition_options({"MaxTime": "120", "DefaultTime": "15"})}
    assert submit(context(partitions=partitions), time_limit_minutes=None).time_limit_minutes == 15
    partitions = {"gpu": parse_partition_options({"MaxTime": "120"})}
    assert submit(context(partitions=partitions), time_limit_minutes=None).time_limit_minutes == 120


def test_partition_state_decides_between_pending_and_refusal():
    assert submit(context(partitions={"gpu": parse_partition_options({"State": "DOWN"})})).pending_reason == \
        "PartitionDown"
    assert rejection(context(partitions={"gpu": parse_partition_options({"State": "DRAIN"})})).message == \
        PARTITION_NOT_AVAIL
