"""Preemption: partition_prio and qos eligibility, exempt time, Slurm's victim order, fewest victims,
and what REQUEUE / CANCEL do to a victim."""

import datetime as dt

from hypothesis import given, settings
from hypothesis import strategies as st

from trainhub.slurm.conf import parse_config, parse_partition_options
from trainhub.slurm.limits import QosRecord
from trainhub.slurm.preemption import (
    PreemptJob,
    PreemptPolicy,
    choose_victims,
    grace_check_due,
    preempt,
    victim_end,
)

NOW = dt.datetime(2025, 3, 1, 12, 0, tzinfo=dt.UTC)
SEED = {"PreemptType": "preempt/partition_prio", "PreemptMode": "REQUEUE", "PreemptExemptTime": "00:10:00"}
PARTITIONS = {"low": parse_partition_options({"PriorityTier": "1"}),
              "high": parse_partition_options({"PriorityTier": "10"}),
              "also_low": parse_partition_options({"PriorityTier": "1", "PreemptMode": "OFF"}),
              "graceful": parse_partition_options({"PriorityTier": "1", "GraceTime": "120", "PreemptMode": "CANCEL"})}


def policy(config=SEED, qos=()):
    return PreemptPolicy(parse_config(config), PARTITIONS, {q.name: q for q in qos})


def running(job_id, partition="low", minutes=60, nodes=1, **fields):
    return PreemptJob(job_id, partition, start_time=NOW - dt.timedelta(minutes=minutes), node_count=nodes, **fields)


PENDING_HIGH = PreemptJob(100, "high", priority=10)


def test_a_higher_tier_partition_preempts_a_lower_one():
    assert policy().can_preempt(PENDING_HIGH, running(1), NOW)
    assert not policy().can_preempt(PreemptJob(101, "low"), running(1), NOW)  # equal tier
    assert not policy().can_preempt(PENDING_HIGH, running(2, "high"), NOW)


def test_preempt_exempt_time_protects_young_jobs():
    assert not policy().can_preempt(PENDING_HIGH, running(1, minutes=9), NOW)
    assert policy().can_preempt(PENDING_HIGH, running(1, minutes=10), NOW)
    assert policy().preemptable_at(running(1, minutes=9)) == NOW + dt.timedelta(minutes=1)


def test_a_partition_with_preempt_mode_off_is_never_preempted():
    assert not policy().can_preempt(PENDING_HIGH, running(1, "also_low"), NOW)
    assert not policy().can_preempt(PENDING_HIGH, PreemptJob(1, "low"), NOW)  # not running


def test_preempt_mode_priority_also_needs_a_higher_job_priority():
    config = {**SEED, "PreemptMode": "REQUEUE,PRIORITY"}
    assert not policy(config).can_preempt(PENDING_HIGH, running(1, priority=50), NOW)
    assert policy(config).can_preempt(PENDING_HIGH, running(1, priority=5), NOW)


def test_qos_preemption_follows_the_preempt_list_not_the_qos_priority():
    qos = [QosRecord("urgent", priority=1, preempt=frozenset({"scavenger"})), QosRecord("scavenger", priority=999),
           QosRecord("normal")]
    config = {"PreemptType": "preempt/qos", "PreemptMode": "CANCEL"}
    urgent = PreemptJob(100, "low", qos="urgent", priority=1)
    assert policy(config, qos).can_preempt(urgent, running(1, qos="scavenger"), NOW)
    assert not policy(config, qos).can_preempt(urgent, running(2, qos="normal"), NOW)
    assert not policy(config, qos).can_preempt(urgent, running(3, qos="urgent"), NOW)
    within = {**config, "PreemptMode": "CANCEL,WITHIN"}
    assert policy(within, qos).can_preempt(PreemptJob(100, "low", qos="urgent", priority=9),
                                           running(3, qos="urgent", priority=1), NOW)


def test_requeue_falls_back_to_cancel_for_a_job_that_cannot_be_requeued():
    assert policy().mode(running(1)) == "REQUEUE"
    assert policy().mode(running(1, requeue=False)) == "CANCEL"
    assert policy({**SEED, "JobRequeue": "0"}).mode(running(1)) == "CANCEL"
    assert policy().mode(running(1, "graceful")) == "CANCEL"


def test_candidates_come_lowest_tier_then_smallest_first():
    partitions = {**PARTITIONS, "mid": parse_partition_options({"PriorityTier": "5"})}
    policy_ = PreemptPolicy(parse_config(SEED), partitions, {})
    jobs = [running(1, "mid", nodes=1), running(2, "low", nodes=4), running(3, "low", nodes=2)]
    assert [job.job_id for job in policy_.candidates(PENDING_HIGH, jobs, NOW)] == [3, 2, 1]


def test_the_documented_reorder_example_preempts_only_the_big_job():
    """preempt.shtml / job_test.c: 2-, 4- and 8-node candidates on separate nodes for an 8-node job."""
    jobs = [running(1, nodes=2), running(2, nodes=4), running(3, nodes=8)]
    sizes = {job.job_id: job.node_count for job in jobs}

    def fits(removed):
        return sum(sizes[job_id] for job_id in removed) >= 8

    victims = choose_victims(policy().candidates(PENDING_HIGH, jobs, NOW), fits)
    assert [job.job_id for job in victims] == [3]


def test_no_victims_when_the_job_fits_and_none_when_preempting_everything_is_not_enough():
    jobs = [running(1, nodes=2)]
    assert choose_victims(jobs, lambda removed: True) == []
    assert choose_victims(jobs, lambda removed: len(removed) > 5) is None


def test_a_requeued_victim_without_grace_time_is_stopped_at_once():
    action = preempt(policy(), running(7, restart_count=2), NOW)
    assert (action.mode, action.run_state) == ("REQUEUE", "PREEMPTED")
    assert action.signal_at == action.kill_at == NOW


def test_a_cancelled_victim_gets_its_grace_time_and_ends_preempted():
    action = preempt(policy(), running(8, "graceful"), NOW)
    assert (action.mode, action.run_state) == ("CANCEL", "PREEMPTED")
    assert action.signal_at == NOW and action.kill_at == NOW + dt.timedelta(seconds=120)


def test_a_victim_chosen_again_keeps_the_end_of_its_grace_time():
    """slurmctld signals a victim once (preempt.c ``_preempt_signal``): its GraceTime runs from then."""
    chosen = NOW - dt.timedelta(seconds=50)
    action = preempt(policy(), running(8, "graceful", preempt_time=chosen), NOW)
    assert action.signal_at == chosen and action.kill_at == chosen + dt.timedelta(seconds=120)

def test_victims_past_their_grace_time_are_looked_at_on_slurmctlds_30_s_clock():
    """slurmctld's periodic check (and backfill iterations) every 30 s, timed here from the last backfill
    iteration; without one ever, at every pass."""
    last = NOW - dt.timedelta(seconds=29)
    assert not grace_check_due(last, NOW)
    assert grace_check_due(last, NOW + dt.timedelta(seconds=1))
    assert grace_check_due(None, NOW)



@settings(deadline=None)
@given(st.lists(st.integers(1, 8), min_size=1, max_size=8), st.integers(1, 30))
def test_victims_always_suffice_and_none_of_them_is_superfluous(sizes, needed):
    jobs = [running(index, nodes=size) for index, size in enumerate(sizes)]
    by_id = {job.job_id: job.node_count for job in jobs}

    def fits(removed):
        return sum(by_id[job_id] for job_id in removed) >= needed

    victims = choose_victims(policy().candidates(PENDING_HIGH, jobs, NOW), fits)
    if sum(sizes) < needed:
        assert victims is None
        return
    chosen = frozenset(job.job_id for job in victims)
    assert fits(chosen)
    assert all(not fits(chosen - {job_id}) for job_id in chosen)


def test_a_victims_end_is_its_grace_times_end_if_that_comes_first():
    """preempt.c: end_time = MIN(end_time, preempt_time + grace_time); a job without a limit ends then."""
    kill_at = NOW + dt.timedelta(seconds=30)
    assert victim_end(NOW + dt.timedelta(hours=1), kill_at) == kill_at
    assert victim_end(NOW + dt.timedelta(seconds=10), kill_at) == NOW + dt.timedelta(seconds=10)
    assert victim_end(None, kill_at) == kill_at
    assert victim_end(NOW, None) == NOW and victim_end(None, None) is None
