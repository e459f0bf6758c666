"""priority/multifactor: each factor as Slurm normalises it, the truncated sum, the documented examples."""

import datetime as dt

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trainhub.slurm.conf import parse_config
from trainhub.slurm.priority import (
    PRIORITY_MAX,
    PartitionFacts,
    PriorityBreakdown,
    PriorityContext,
    PriorityJob,
    compute_priorities,
    compute_priority,
)

NOW = dt.datetime(2025, 3, 1, 12, 0, tzinfo=dt.UTC)
SEED = {"AccountingStorageEnforce": "associations,limits,qos", "PriorityType": "priority/multifactor",
        "PriorityWeightAge": "1000", "PriorityWeightFairshare": "10000",
        "PreemptType": "preempt/partition_prio", "PreemptMode": "REQUEUE", "PreemptExemptTime": "00:10:00"}


def context(config=None, *, nodes=4, cpus=128, partitions=None, qos=None, max_assoc=0):
    return PriorityContext.build(config=parse_config(config or SEED), cluster_nodes=nodes, cluster_cpus=cpus,
                                 partitions=partitions or {"a4": PartitionFacts(tres_totals={"gres/gpu": 32})},
                                 qos_priorities=qos, max_assoc_priority=max_assoc)


def job(**fields):
    base = dict(job_id=1, partition="a4", submit_time=NOW - dt.timedelta(days=1),
                eligible_time=NOW - dt.timedelta(days=1))
    return PriorityJob(**{**base, **fields})


def test_the_seed_weights_give_age_plus_fairshare_truncated():
    result = compute_priority(job(fairshare_factor=0.5), context(), NOW)
    assert result.factors["age"].factor == pytest.approx(86400 / 604800)
    assert result.factors["age"].weighted == pytest.approx(142.857142857)
    assert result.factors["fairshare"].weighted == 5000
    assert result.priority == 5142  # 5142.857... truncated, not rounded


def test_age_grows_from_the_eligible_time_and_stops_at_max_age():
    assert compute_priority(job(eligible_time=NOW - dt.timedelta(days=30)), context(), NOW).factors["age"].factor == 1
    assert compute_priority(job(eligible_time=None), context(), NOW).factors["age"].factor == 0
    assert compute_priority(job(eligible_time=NOW + dt.timedelta(hours=1)), context(), NOW).factors["age"].factor == 0


def test_accrue_always_counts_age_from_submission_even_while_held():
    config = {**SEED, "PriorityFlags": "ACCRUE_ALWAYS"}
    result = compute_priority(job(eligible_time=None, submit_time=NOW - dt.timedelta(days=7)), context(config), NOW)
    assert result.factors["age"].factor == 1.0


def test_priority_max_age_sets_where_age_saturates():
    config = {**SEED, "PriorityMaxAge": "2-0"}
    assert compute_priority(job(), context(config), NOW).factors["age"].factor == 0.5


def test_the_documented_partition_factor_example():
    """priority_multifactor.shtml: PriorityJobFactor A=20, B=10, weight 5000 -> 5000 and 2500;
    with NO_NORMAL_PART -> 100000 and 50000."""
    partitions = {"A": PartitionFacts(priority_job_factor=20), "B": PartitionFacts(priority_job_factor=10)}
    config = {"PriorityWeightPartition": "5000"}
    normal = context(config, partitions=partitions)
    assert [compute_priority(job(partition=p), normal, NOW).factors["partition"].weighted for p in "AB"] == [5000, 2500]
    raw = context({**config, "PriorityFlags": "NO_NORMAL_PART"}, partitions=partitions)
    assert [compute_priority(job(partition=p), raw, NOW).priority for p in "AB"] == [100000, 50000]


def test_qos_and_assoc_factors_are_normalised_by_the_highest_value():
    ctx = context({"PriorityWeightQOS": "1000", "PriorityWeightAssoc": "100"},
                  qos={"normal": 10, "high": 40}, max_assoc=8)
    result = compute_priority(job(qos="normal", assoc_priority=2), ctx, NOW)
    assert result.factors["qos"].factor == 0.25 and result.factors["assoc"].factor == 0.25
    assert result.priority == 250 + 25
    raw = context({"PriorityWeightQOS": "1", "PriorityFlags": "NO_NORMAL_ALL"}, qos={"normal": 10, "high": 40})
    assert compute_priority(job(qos="high"), raw, NOW).priority == 40


def test_a_job_asking_for_the_whole_cluster_has_job_size_one():
    ctx = context({"PriorityWeightJobSize": "1000"})
    assert compute_priority(job(min_nodes=4, cpus=128), ctx, NOW).factors["jobsize"].factor == 1.0
    assert compute_priority(job(min_nodes=1, cpus=32), ctx, NOW).factors["jobsize"].factor == 0.25


def test_favor_small_averages_the_free_node_and_cpu_fractions():
    ctx = context({"PriorityWeightJobSize": "1000", "PriorityFavorSmall": "YES"})
    result = compute_priority(job(min_nodes=1, cpus=1), ctx, NOW)
    assert result.factors["jobsize"].factor == pytest.approx((3 / 4 + 127 / 128) / 2)


def test_small_relative_to_time_divides_size_by_the_time_limit():
    """slurm.conf.5: a full-system job with a time limit of one gets 1.0; a tiny long job nearly 0."""
    ctx = context({"PriorityWeightJobSize": "1000", "PriorityFlags": "SMALL_RELATIVE_TO_TIME"})
    assert compute_priority(job(min_nodes=4, cpus=128, time_limit_minutes=1), ctx, NOW).factors["jobsize"].factor == 1
    tiny = compute_priority(job(min_nodes=1, cpus=1, time_limit_minutes=10_000), ctx, NOW).factors["jobsize"].factor
    assert 0 < tiny < 1e-4
    # No job limit: the partition's MaxTime is used.
    ctx_max = context({"PriorityWeightJobSize": "1000", "PriorityFlags": "SMALL_RELATIVE_TO_TIME"},
                      partitions={"a4": PartitionFacts(max_time_minutes=2)})
    assert compute_priority(job(min_nodes=4, cpus=128), ctx_max, NOW).factors["jobsize"].factor == 0.5


def test_tres_factors_are_normalised_by_the_partition_totals():
    ctx = context({"PriorityWeightTRES": "GRES/gpu=3000,CPU=-100"},
                  partitions={"a4": PartitionFacts(tres_totals={"gres/gpu": 32, "cpu": 128})})
    result = compute_priority(job(tres={"gres/gpu": 4, "cpu": 64}), ctx, NOW)
    assert result.tres["gres/gpu"].weighted == 375
    assert result.tres["cpu"].weighted == -50
    assert result.priority == 325


def test_site_is_added_and_nice_subtracted_unweighted():
    result = compute_priority(job(fairshare_factor=0.5, site_factor=7, nice=100), context(), NOW)
    assert result.priority == 5142 + 7 - 100


def test_the_priority_is_at_least_one_and_at_most_two_to_the_32_minus_one():
    assert compute_priority(job(nice=10**6), context(), NOW).priority == 1
    assert compute_priority(job(site_factor=2**33), context(), NOW).priority == PRIORITY_MAX
    assert compute_priority(job(site_factor=2**33), context(), NOW).sprio_priority > PRIORITY_MAX


def test_an_admin_set_priority_replaces_the_formula():
    result = compute_priority(job(admin_priority=77, fairshare_factor=1), context(), NOW)
    assert result.priority == 77 and result.admin_set
    assert all(factor.weighted == 0 for factor in result.factors.values())


def test_a_held_job_has_priority_zero():
    assert compute_priority(job(held=True, fairshare_factor=1), context(), NOW).priority == 0


def test_incr_only_never_lowers_a_priority():
    ctx = context({**SEED, "PriorityFlags": "INCR_ONLY"})
    assert compute_priority(job(fairshare_factor=0.1, previous_priority=9000), ctx, NOW).priority == 9000
    assert compute_priority(job(fairshare_factor=1.0, previous_priority=9000), ctx, NOW).priority == 10142


def test_priority_basic_is_fifo():
    ctx = context({"PriorityType": "priority/basic", "PriorityWeightAge": "1000"})
    results = compute_priorities([job(job_id=1, basic_priority=500), job(job_id=2, basic_priority=499)], ctx, NOW)
    assert [r.priority for r in results] == [500, 499]


def test_priority_basic_subtracts_the_nice():
    """fixtures/22.05/prio-basic: --nice=100 under priority/basic shows 100 less than its FIFO value."""
    ctx = context({"PriorityType": "priority/basic"})
    assert compute_priority(job(basic_priority=500, nice=100), ctx, NOW).priority == 400


def test_priority_basic_is_at_least_one():
    """priority_basic.c's priority_p_set: below 1 is 1 (a nice over the FIFO value, or no value taken)."""
    ctx = context({"PriorityType": "priority/basic"})
    assert compute_priority(job(basic_priority=500, nice=600), ctx, NOW).priority == 1
    assert compute_priority(job(basic_priority=0, nice=10), ctx, NOW).priority == 1


def test_factors_with_zero_weight_are_not_computed():
    result = compute_priority(job(qos="normal"), context(SEED, qos={"normal": 5}), NOW)
    assert result.factors["qos"].factor == 0


def test_sprio_priority_is_the_truncated_sum_of_unrounded_factors():
    result = compute_priority(job(fairshare_factor=0.33333), context(), NOW)
    assert result.sprio_priority == int(result.factors["age"].weighted + result.factors["fairshare"].weighted)


@settings(deadline=None)
@given(age_days=st.floats(0, 30), fairshare=st.floats(0, 1), nodes=st.integers(1, 4), cpus=st.integers(1, 128),
       nice=st.integers(-10**6, 10**6), site=st.integers(0, 10**6), qos_priority=st.integers(0, 1000),
       flags=st.sets(st.sampled_from(["ACCRUE_ALWAYS", "SMALL_RELATIVE_TO_TIME", "NO_NORMAL_QOS"])),
       favor_small=st.booleans())
def test_priorities_stay_in_range_and_factors_in_zero_one(age_days, fairshare, nodes, cpus, nice, site,
                                                         qos_priority, flags, favor_small):
    config = {"PriorityWeightAge": "1000", "PriorityWeightFairshare": "4294967295", "PriorityWeightJobSize": "1000",
              "PriorityWeightQOS": "1000", "PriorityWeightPartition": "1000", "PriorityFavorSmall": favor_small,
              "PriorityFlags": ",".join(flags)}
    ctx = context(config, qos={"q": qos_priority, "top": 1000})
    result = compute_priority(job(eligible_time=NOW - dt.timedelta(days=age_days), fairshare_factor=fairshare,
                                  min_nodes=nodes, cpus=cpus, nice=nice, site_factor=site, qos="q",
                                  time_limit_minutes=60), ctx, NOW)
    assert 1 <= result.priority <= PRIORITY_MAX
    for name, factor in result.factors.items():
        if not (name == "qos" and "NO_NORMAL_QOS" in flags):
            assert 0.0 <= factor.factor <= 1.0, name


def test_a_breakdown_rebuilt_from_its_factors_prints_the_same():
    config = {**SEED, "PriorityWeightTRES": "GRES/gpu=1000", "PriorityWeightQOS": "500"}
    original = compute_priority(job(fairshare_factor=0.42, qos="normal", tres={"gres/gpu": 4}),
                                context(config, qos={"normal": 1}), NOW)
    stored = PriorityBreakdown(job_id=original.job_id, partition=original.partition, user=original.user,
                               account=original.account, qos=original.qos, priority=original.priority,
                               factors=original.factors, tres=original.tres, site=original.site, nice=original.nice)
    assert stored.factors == original.factors
    assert stored.sprio_priority == original.sprio_priority
    assert stored == original
