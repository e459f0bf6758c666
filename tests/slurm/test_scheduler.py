"""The scheduling pass: priority order, atomic multi-node starts, Slurm's reasons, backfill that never
delays a reservation, squeue --start estimates, preemption."""

import dataclasses
import datetime as dt

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trainhub.slurm.conf import parse_config, parse_partition_options
from trainhub.slurm.limits import AssocRecord, JobRequest, LimitContext, LimitUsage, QosRecord
from trainhub.slurm.preemption import PreemptPolicy
from trainhub.slurm.scheduler import (
    NODES_RESERVED,
    NodeState,
    PendingJob,
    Resources,
    RunningJob,
    Snapshot,
    TaskSpread,
    Waiting,
    node_config_available,
    queue_order,
    reason_prev_db,
    schedule,
    share_gpus_per_job,
)

NOW = dt.datetime(2025, 3, 1, 12, 0, tzinfo=dt.UTC)
GPU4 = Resources(cpus=8, memory_mb=1000, gres={"gpu": 4})
GPU8 = Resources(cpus=16, memory_mb=2000, gres={"gpu": 8})


def nodes(count, prefix="n"):
    return [NodeState(f"{prefix}{i}", cpus=16, memory_mb=64000, gres={"gpu": 8}) for i in range(count)]


def pending(job_id, priority=100, nodes=1, per_node=GPU8, minutes=60, partition="gpu", **fields):
    return PendingJob(job_id=job_id, partition=partition, priority=priority,
                      submit_time=NOW - dt.timedelta(minutes=job_id), nodes=nodes, per_node=per_node,
                      time_limit_minutes=minutes, **fields)


def running(job_id, names, minutes_left, per_node=GPU8, partition="gpu", started_minutes_ago=30, **fields):
    return RunningJob(job_id=job_id, partition=partition, allocation={name: per_node for name in names},
                      start_time=NOW - dt.timedelta(minutes=started_minutes_ago),
                      end_time=NOW + dt.timedelta(minutes=minutes_left), **fields)


def snapshot(node_list, pending_jobs, running_jobs=(), partitions=None, options=None):
    partitions = partitions or {"gpu": [node.name for node in node_list]}
    options = options or {name: parse_partition_options({}) for name in partitions}
    return Snapshot(nodes=node_list, partitions=partitions, partition_options=options, running=list(running_jobs),
                    pending=list(pending_jobs))


CONFIG = parse_config({})


def started(plan):
    return {start.job_id: start for start in plan.starts}


def test_jobs_start_in_priority_order_on_free_nodes():
    plan = schedule(snapshot(nodes(2), [pending(1, 10), pending(2, 30), pending(3, 20)]), CONFIG, NOW)
    assert set(started(plan)) == {2, 3}
    assert plan.waiting[1].reason == "Resources"


def test_a_multi_node_job_gets_all_its_nodes_or_none():
    plan = schedule(snapshot(nodes(3), [pending(1, 100, nodes=4), pending(2, 50)]), CONFIG, NOW)
    assert 1 not in started(plan)
    assert plan.waiting[1].reason == "PartitionNodeLimit"
    plan = schedule(snapshot(nodes(4), [pending(1, 100, nodes=3), pending(2, 50, nodes=2)]), CONFIG, NOW)
    assert len(started(plan)[1].nodes) == 3 and 2 not in started(plan)


def test_after_a_blocked_job_its_partition_waits_with_priority():
    node_list = nodes(2)
    jobs = [pending(1, 100, nodes=2), pending(2, 50), pending(3, 40)]
    run = [running(9, ["n0"], 30)]
    plan = schedule(snapshot(node_list, jobs, run), parse_config({"SchedulerType": "sched/builtin"}), NOW)
    assert plan.waiting[1].reason == "Resources"
    assert plan.waiting[2].reason == plan.waiting[3].reason == "Priority"
    assert not plan.starts


def test_gpus_are_shared_per_node_and_the_best_fitting_node_is_used():
    node_list = nodes(2)
    run = [running(9, ["n1"], 30, per_node=GPU4)]
    plan = schedule(snapshot(node_list, [pending(1, per_node=GPU4)], run), CONFIG, NOW)
    assert started(plan)[1].nodes == ("n1",)
    assert started(plan)[1].end_time == NOW + dt.timedelta(minutes=60)


def test_select_linear_gives_whole_nodes():
    config = parse_config({"SelectType": "select/linear"})
    run = [running(9, ["n1"], 30, per_node=GPU4)]
    plan = schedule(snapshot(nodes(2), [pending(1, 20, per_node=GPU4), pending(2, 10, per_node=GPU4)], run),
                    config, NOW)
    assert started(plan)[1].nodes == ("n0",)
    assert started(plan)[1].allocation["n0"].gres == {"gpu": 8}
    assert 2 not in started(plan)


def test_held_future_dependent_and_down_partition_jobs_wait_without_blocking():
    jobs = [pending(1, 100, hold_reason="JobHeldUser"), pending(2, 90, begin_time=NOW + dt.timedelta(hours=1)),
            pending(3, 80, blocked_reason="Dependency"), pending(4, 70)]
    plan = schedule(snapshot(nodes(1), jobs), CONFIG, NOW)
    assert [plan.waiting[i].reason for i in (1, 2, 3)] == ["JobHeldUser", "BeginTime", "Dependency"]
    assert 4 in started(plan)
    down = {"gpu": parse_partition_options({"State": "DOWN"})}
    assert schedule(snapshot(nodes(1), [pending(1)], options=down), CONFIG, NOW).waiting[1].reason == "PartitionDown"


def test_partition_time_limit_keeps_a_job_waiting():
    options = {"gpu": parse_partition_options({"MaxTime": "30"})}
    plan = schedule(snapshot(nodes(1), [pending(1, minutes=60), pending(2, minutes=20)], options=options), CONFIG, NOW)
    assert plan.waiting[1].reason == "PartitionTimeLimit" and 2 in started(plan)


def test_higher_tier_partitions_are_scheduled_first():
    node_list = nodes(1)
    options = {"low": parse_partition_options({"PriorityTier": "1"}), "high": parse_partition_options({"PriorityTier": "5"})}
    jobs = [pending(1, 1000, partition="low"), pending(2, 1, partition="high")]
    plan = schedule(snapshot(node_list, jobs, partitions={"low": ["n0"], "high": ["n0"]}, options=options), CONFIG, NOW)
    assert set(started(plan)) == {2}
    order = queue_order(jobs, options)
    assert [job.job_id for job in order] == [2, 1]


def test_equal_priorities_go_by_submit_time_then_job_id():
    jobs = [pending(3, 5), pending(1, 5), pending(2, 5)]  # job_id minutes ago: 1 is the newest
    assert [job.job_id for job in queue_order(jobs, {"gpu": parse_partition_options({})})] == [3, 2, 1]


def test_backfill_starts_a_short_job_that_ends_before_the_reservation():
    """n0 busy for 30 more minutes, n1 free. The 2-node top job reserves both nodes from +30 min:
    a 20-minute job backfills onto n1 now, a 60-minute job may not."""
    node_list = nodes(2)
    run = [running(9, ["n0"], 30)]
    jobs = [pending(1, 100, nodes=2), pending(2, 50, minutes=60), pending(3, 40, minutes=20)]
    plan = schedule(snapshot(node_list, jobs, run), CONFIG, NOW)
    assert plan.waiting[1].reason == "Resources"
    assert plan.waiting[1].estimated_start == NOW + dt.timedelta(minutes=30)
    assert set(plan.waiting[1].planned_nodes) == {"n0", "n1"}
    assert 3 in started(plan) and started(plan)[3].backfilled
    assert plan.waiting[2].reason == "Priority"
    assert plan.waiting[2].estimated_start == NOW + dt.timedelta(minutes=90)


def test_builtin_scheduler_does_not_backfill():
    run = [running(9, ["n0"], 30)]
    jobs = [pending(1, 100, nodes=2), pending(3, 40, minutes=20)]
    plan = schedule(snapshot(nodes(2), jobs, run), parse_config({"SchedulerType": "sched/builtin"}), NOW)
    assert not plan.starts and plan.waiting[1].estimated_start is None


def test_a_job_without_time_limit_cannot_backfill_before_a_reservation():
    run = [running(9, ["n0"], 30)]
    jobs = [pending(1, 100, nodes=2), pending(2, 50, minutes=None)]
    plan = schedule(snapshot(nodes(2), jobs, run), CONFIG, NOW)
    assert 2 not in started(plan)


def test_beyond_bf_window_a_job_keeps_its_start_but_reserves_nothing():
    """backfill.c: "Starts too far in the future to worry about": job 2 is planned as if job 1 were not."""
    config = parse_config({"SchedulerParameters": "bf_window=60"})
    run = [running(9, ["n0"], 120)]
    plan = schedule(snapshot(nodes(1), [pending(1), pending(2, 50)], run), config, NOW)
    assert plan.waiting[1] == Waiting("Resources", NOW + dt.timedelta(minutes=120))
    assert plan.waiting[2] == Waiting("Priority", NOW + dt.timedelta(minutes=120))


def test_a_reservation_reaching_past_bf_window_holds_its_nodes_for_the_rest_of_the_iteration():
    """backfill.c's plan ends at bf_window's end (node_space[0].end_time = window_end): job 1, without a time
    limit, reserves n0 and n1 from +30 min to past it, so job 2 behind it finds no start within the window
    and gets none (squeue --start N/A: fixtures/22.05/node-range start-planned-N3-4), not one after job 1's
    year. A reservation that ends within the window frees its nodes after it (job 3 then job 4)."""
    run = [running(9, ["n0"], 30)]
    plan = schedule(snapshot(nodes(2), [pending(1, 100, nodes=2, minutes=None), pending(2, 50)], run), CONFIG, NOW)
    assert plan.waiting[1].estimated_start == NOW + dt.timedelta(minutes=30)
    assert plan.waiting[2] == Waiting("Priority")
    plan = schedule(snapshot(nodes(2), [pending(3, 100, nodes=2, minutes=120), pending(4, 50)], run), CONFIG, NOW)
    assert plan.waiting[4].estimated_start == NOW + dt.timedelta(minutes=150)


def test_a_running_job_without_a_time_limit_ends_a_year_after_its_start():
    """job_mgr.c job_end_time_reset (fixtures/22.05/order a-squeue-start: job 9 a year after 5-8 started)."""
    run = [dataclasses.replace(running(9, ["n0"], 0), end_time=None)]
    plan = schedule(snapshot(nodes(1), [pending(1)], run), CONFIG, NOW)
    assert plan.waiting[1].estimated_start == NOW - dt.timedelta(minutes=30) + dt.timedelta(days=365)


def test_reservations_are_rounded_to_bf_resolution():
    config = parse_config({"SchedulerParameters": "bf_resolution=600"})
    run = [RunningJob(9, "gpu", {"n0": GPU8}, NOW, NOW + dt.timedelta(minutes=25))]
    plan = schedule(snapshot(nodes(1), [pending(1, 100), pending(2, 50, minutes=5)], run), config, NOW)
    # job 1 is planned at +25 min; its reservation runs from the slot at +20 min to the slot of its
    # end, floor(+85 min) = +80 min, so job 2 is planned then (as Slurm 22.05 planned job 2 of the
    # harness scenario at 17:28:00 behind a job ending 17:28:01, fixtures/22.05/scenario/squeue-start-running).
    assert plan.waiting[1].estimated_start == NOW + dt.timedelta(minutes=25)
    assert plan.waiting[2].estimated_start == NOW + dt.timedelta(minutes=80)


def test_limits_keep_jobs_waiting_with_their_reason_and_update_as_jobs_start():
    context = LimitContext(parse_config({"AccountingStorageEnforce": "associations,limits"}),
                           {"root": AssocRecord("root", "root"),
                            "ml": AssocRecord("ml", "ml", parent="root", grp_tres={"gres/gpu": 8}),
                            "a@ml": AssocRecord("a@ml", "ml", user="a", parent="ml")},
                           {"normal": QosRecord("normal")}, {"gpu": parse_partition_options({})})
    request = JobRequest("a", "ml", "gpu", "normal", "a@ml", 1, {"gres/gpu": 8}, 60)
    usage = LimitUsage.of(context, [(request, False), (request, False)])
    jobs = [pending(1, 100, limit_request=request), pending(2, 90, limit_request=request)]
    plan = schedule(snapshot(nodes(2), jobs), parse_config({}), NOW, limits=(context, usage))
    assert 1 in started(plan)
    assert plan.waiting[2].reason == "AssocGrpGRES"


def test_a_node_range_counts_its_limits_on_the_nodes_it_would_get():
    """select_nodes' acct_policy_job_runnable_post_select counts the CPUs and nodes select chose: ``-N 1-4``
    (a CPU a node) under GrpTRES=cpu=3 waits AssocGrpCpuLimit beside 4 idle nodes, though its request's one
    CPU is within it; with 3 nodes free it runs on them (fixtures/22.05/range-limits grp-N1-4)."""
    context = LimitContext(parse_config({"AccountingStorageEnforce": "associations,limits"}),
                           {"root": AssocRecord("root", "root"),
                            "a@ml": AssocRecord("a@ml", "ml", user="a", parent="root", grp_tres={"cpu": 3})},
                           {"normal": QosRecord("normal")}, {"gpu": parse_partition_options({})})
    request = JobRequest("a", "ml", "gpu", "normal", "a@ml", 1, {"cpu": 1}, 60)
    job = pending(1, nodes=4, min_nodes=1, per_node=Resources(cpus=1), limit_request=request)
    plan = schedule(snapshot(nodes(4), [job]), context.config, NOW,
                    limits=(context, LimitUsage.of(context, [(request, False)])))
    assert (plan.starts, plan.waiting[1].reason) == ([], "AssocGrpCpuLimit")
    plan = schedule(snapshot(nodes(4), [job], [running(9, ["n3"], 30)]), context.config, NOW,
                    limits=(context, LimitUsage.of(context, [(request, False)])))
    assert started(plan)[1].nodes == ("n0", "n1", "n2")


def test_preemption_requeues_a_lower_tier_job_and_keeps_its_nodes_for_the_preemptor():
    config = parse_config({"PreemptType": "preempt/partition_prio", "PreemptMode": "REQUEUE",
                           "PreemptExemptTime": "00:10:00"})
    options = {"low": parse_partition_options({"PriorityTier": "1"}),
               "high": parse_partition_options({"PriorityTier": "10"})}
    partitions = {"low": ["n0", "n1"], "high": ["n0", "n1"]}
    run = [running(7, ["n0"], 600, partition="low", started_minutes_ago=60),
           running(8, ["n1"], 600, partition="low", started_minutes_ago=5)]
    jobs = [pending(1, 100, partition="high"), pending(2, 500, partition="low")]
    policy = PreemptPolicy(config, options, {})
    plan = schedule(snapshot(nodes(2), jobs, run, partitions, options), config, NOW, preempt_policy=policy)
    assert [(a.job_id, a.mode) for a in plan.preemptions] == [(7, "REQUEUE")]  # job 8 is still exempt
    assert plan.waiting[1].preempting == (7,) and plan.waiting[1].planned_nodes == ("n0",)
    # slurmctld's main scheduler gives a preemptor no expected start, its backfill iteration this one's
    # time (fixtures/22.05/preempt-grace, bf-start.txt)
    assert plan.waiting[1].estimated_start == NOW
    # job 2's partition shares the nodes held back for the higher tier's job: the reason Slurm 22.05
    # gives the top lower-tier job then (fixtures/22.05/scenario/squeue-o-running.txt, job 2).
    assert not plan.starts and plan.waiting[2].reason == NODES_RESERVED


def test_node_config_availability_checks_node_capacity():
    assert node_config_available(GPU8, 2, nodes(2))
    assert not node_config_available(Resources(gres={"gpu": 9}), 1, nodes(4))
    assert not node_config_available(GPU8, 3, nodes(2))


@st.composite
def clusters(draw):
    node_count = draw(st.integers(1, 5))
    node_list = nodes(node_count)
    run = []
    for job_id in range(100, 100 + draw(st.integers(0, 4))):
        name = f"n{draw(st.integers(0, node_count - 1))}"
        share = draw(st.sampled_from([GPU4, GPU8]))
        run.append(running(job_id, [name], draw(st.integers(1, 300)), per_node=share))
    # drop running jobs that would overcommit a node
    used: dict[str, int] = {}
    fitting = []
    for job in run:
        name, res = next(iter(job.allocation.items()))
        if used.get(name, 0) + res.gres["gpu"] <= 8:
            used[name] = used.get(name, 0) + res.gres["gpu"]
            fitting.append(job)
    jobs = [pending(job_id, draw(st.integers(1, 1000)), nodes=draw(st.integers(1, node_count)),
                    per_node=draw(st.sampled_from([GPU4, GPU8])), minutes=draw(st.sampled_from([10, 30, 60, 240, None])))
            for job_id in range(1, draw(st.integers(1, 8)) + 1)]
    return node_list, fitting, jobs


@settings(max_examples=150, deadline=None)
@given(clusters())
def test_backfill_never_delays_a_higher_priority_reservation_and_never_overcommits(cluster):
    node_list, run, jobs = cluster
    plan = schedule(snapshot(node_list, jobs, run), CONFIG, NOW)
    gpus = {node.name: 8 for node in node_list}
    for job in run:
        for name, res in job.allocation.items():
            gpus[name] -= res.gres["gpu"]
    for start in plan.starts:
        for name, res in start.allocation.items():
            gpus[name] -= res.gres["gpu"]
    assert all(free >= 0 for free in gpus.values())
    order = queue_order(jobs, {"gpu": parse_partition_options({})})
    for index, job in enumerate(order):
        estimate = plan.waiting.get(job.job_id)
        if estimate is None or estimate.estimated_start is None:
            continue
        alone = schedule(snapshot(node_list, order[:index + 1], run), CONFIG, NOW)
        assert alone.waiting[job.job_id].estimated_start == estimate.estimated_start


# --- -n without -N: the tasks fill the nodes in order ------------------------------------------

CPU_NODES = [NodeState(f"gpu{i}", cpus=16, memory_mb=16000, gres={"gpu": 8}) for i in range(1, 5)]


def cpus(count):
    return Resources(cpus=count)


def tasks_job(job_id, tasks, nodes, **fields):
    """-n ``tasks`` alone: ``nodes`` the fewest they fit on, per_node the even share snapshot.py gives."""
    return pending(job_id, nodes=nodes, per_node=cpus(-(-tasks // nodes)), spread=TaskSpread(tasks), **fields)


def test_tasks_fill_nodes_in_order_each_as_many_as_it_holds():
    spread = TaskSpread(24)
    assert spread.take([8, 16], 2) == [8, 16]
    assert spread.take([16, 16], 2) == [16, 8]
    assert spread.take([16, 4, 16], 2) == [16, 4, 4]
    assert spread.take([23, 16], 2) == [23, 1]
    assert spread.take([23, 16, 16], 3) == [22, 1, 1]  # one left for each node still needed
    assert spread.take([8, 8], 2) is None  # 16 < 24
    assert spread.room(cpus(8), cpus(12)) == 8
    assert TaskSpread(16, gpus_per_task=1).room(Resources(cpus=16, gres={"gpu": 3}), cpus(8)) == 3


def test_tasks_take_the_best_set_of_nodes_in_a_row():
    """cons_tres ``_eval_nodes`` (fixtures/22.05/spread): nodes with free CPUs in a row form a set; the
    set that holds the tasks with the fewest to spare, else the largest; a single node when one is
    still needed and one holds them; else the set's nodes from its first."""
    def rooms(*free):
        return [(f"gpu{index}", room) for index, room in enumerate(free, start=1)]

    assert TaskSpread(24).place(rooms(10, 10, 10, 0), 2) == ["gpu1", "gpu2", "gpu3"]
    assert TaskSpread(20).place(rooms(2, 12, 5, 9), 2) == ["gpu1", "gpu2", "gpu3", "gpu4"]
    assert TaskSpread(5).place(rooms(10, 0, 3, 3), 1) == ["gpu3", "gpu4"]
    assert TaskSpread(5).place(rooms(10, 0, 3, 6), 1) == ["gpu4"]
    assert TaskSpread(12).place(rooms(3, 0, 10, 0), 1) == ["gpu3", "gpu1"]  # no set holds them: largest first
    assert TaskSpread(24).place(rooms(10, 0, 10, 0), 2) is None


def test_n_tasks_start_now_on_nodes_that_hold_them_together_not_an_even_share_each():
    """gpu1 8 CPUs free, gpu2 16: -n 24 starts now, 8 + 16 (an even 12 does not fit gpu1)."""
    busy = [running(1, ["gpu1"], 30, per_node=cpus(8)), running(2, ["gpu3"], 10, per_node=cpus(16)),
            running(3, ["gpu4"], 20, per_node=cpus(16))]
    plan = schedule(snapshot(CPU_NODES, [tasks_job(5, 24, 2, minutes=10)], busy), CONFIG, NOW)
    start = started(plan)[5]
    assert {name: resources.cpus for name, resources in start.allocation.items()} == {"gpu1": 8, "gpu2": 16}


def test_backfill_plans_n_tasks_when_the_nodes_together_hold_them():
    """fixtures/22.05/sched a-squeue-start: gpu2 frees at +5 min; with gpu1's 8 free CPUs that is
    24 (an even share waits for gpu3 at +10)."""
    busy = [running(1, ["gpu1"], 30, per_node=cpus(8)), running(2, ["gpu2"], 5, per_node=cpus(16)),
            running(3, ["gpu3"], 10, per_node=cpus(16)), running(4, ["gpu4"], 20, per_node=cpus(16))]
    plan = schedule(snapshot(CPU_NODES, [tasks_job(5, 24, 2, minutes=10)], busy), CONFIG, NOW)
    assert plan.waiting[5].estimated_start == NOW + dt.timedelta(minutes=5)
    assert plan.waiting[5].planned_nodes == ("gpu1", "gpu2")


def test_backfill_looks_again_when_a_job_ends_on_an_open_node():
    """gpu1 holds one task now and 16 once its job ends at +7: -n 20 is planned then, with gpu2 (4 free)."""
    busy = [running(1, ["gpu1"], 7, per_node=cpus(15)), running(2, ["gpu2"], 60, per_node=cpus(12)),
            running(3, ["gpu3"], 60, per_node=cpus(16)), running(4, ["gpu4"], 60, per_node=cpus(16))]
    plan = schedule(snapshot(CPU_NODES, [tasks_job(5, 20, 2, minutes=10)], busy), CONFIG, NOW)
    assert plan.waiting[5].estimated_start == NOW + dt.timedelta(minutes=7)
    assert plan.waiting[5].planned_nodes == ("gpu1", "gpu2")


def n_nodes_tasks_job(job_id, tasks, nodes, **fields):
    """-N ``nodes`` -n ``tasks``: per_node the even share snapshot.py gives, the tasks on exactly ``nodes``."""
    return pending(job_id, nodes=nodes, per_node=cpus(-(-tasks // nodes)),
                   spread=TaskSpread(tasks, exact_nodes=True), **fields)


def test_n_nodes_with_tasks_fill_their_nodes_in_order():
    """fixtures/22.05/nsplit: -N 2 -n 4 on idle nodes runs 3,1; with 2 CPUs free on gpu1, 2,2 there."""
    plan = schedule(snapshot(CPU_NODES, [n_nodes_tasks_job(5, 4, 2)], []), CONFIG, NOW)
    assert {name: resources.cpus for name, resources in started(plan)[5].allocation.items()} == {"gpu1": 3, "gpu2": 1}
    plan = schedule(snapshot(CPU_NODES, [n_nodes_tasks_job(5, 4, 2)], [running(1, ["gpu1"], 30, per_node=cpus(14))]),
                    CONFIG, NOW)
    assert {name: resources.cpus for name, resources in started(plan)[5].allocation.items()} == {"gpu1": 2, "gpu2": 2}


def test_n_nodes_with_tasks_keep_to_their_node_count():
    """-N 2 -n 5 where gpu1 and gpu2 hold one task each: not 3 nodes (place would add gpu3) but the two
    that hold the most (trainhub's choice; not recorded); -N 5 on 4 nodes pends with
    PartitionNodeLimit, as any -N job, not -n's PartitionConfig."""
    busy = [running(1, ["gpu1"], 30, per_node=cpus(15)), running(2, ["gpu2"], 30, per_node=cpus(15))]
    plan = schedule(snapshot(CPU_NODES, [n_nodes_tasks_job(5, 5, 2)], busy), CONFIG, NOW)
    assert {name: resources.cpus for name, resources in started(plan)[5].allocation.items()} == {"gpu3": 4, "gpu4": 1}
    plan = schedule(snapshot(CPU_NODES, [n_nodes_tasks_job(6, 10, 5)], []), CONFIG, NOW)
    assert plan.waiting[6].reason == "PartitionNodeLimit"


def test_a_job_waiting_for_its_required_nodes_holds_back_only_those():
    """job_scheduler.c: -w nodes as many as the job needs -> only they are withheld, later jobs of the
    partition still start elsewhere (fixtures/22.05/sched d-squeue-o); without -w the partition waits."""
    busy = [running(1, ["gpu1"], 30, per_node=cpus(16))]
    jobs = [pending(2, 100, per_node=cpus(1), required_nodes=frozenset({"gpu1"})), pending(3, 90, per_node=cpus(4))]
    plan = schedule(snapshot(CPU_NODES, jobs, busy), CONFIG, NOW, backfill=False)
    assert plan.waiting[2].reason == "Resources" and set(started(plan)) == {3}
    assert started(plan)[3].nodes != ("gpu1",)
    jobs = [pending(2, 100, nodes=4, per_node=cpus(1)), pending(3, 90, per_node=cpus(4))]
    plan = schedule(snapshot(CPU_NODES, jobs, busy), CONFIG, NOW, backfill=False)
    assert (plan.waiting[2].reason, plan.waiting[3].reason) == ("Resources", "Priority")


def _typed_nodes(usable=True):
    return [NodeState("v0", cpus=16, memory_mb=64000, gres={"gpu": 8}, gpu_type="v100"),
            NodeState("a0", cpus=16, memory_mb=64000, gres={"gpu": 8}, gpu_type="a100", usable=usable)]


def test_a_typed_gpu_request_gets_only_nodes_of_its_type():
    two = Resources(cpus=1, gres={"gpu": 2})
    plan = schedule(snapshot(_typed_nodes(), [pending(1, priority=400, per_node=GPU8, gpu_type="a100"),
                                              pending(2, priority=300, per_node=two, gpu_type="v100"),
                                              pending(3, priority=200, per_node=two),
                                              pending(4, priority=100, per_node=two, gpu_type="a100")]),
                    CONFIG, NOW)
    assert {job_id: start.nodes for job_id, start in started(plan).items()} == {1: ("a0",), 2: ("v0",), 3: ("v0",)}
    # a0's GPUs are all job 1's; v0's free ones are not of job 4's type
    assert plan.waiting[4].reason == "Resources"


def test_a_gpu_type_on_no_usable_node_waits_like_a_constraint():
    """BadConstraints where no node of the partition has it (fixtures/22.05/gputype/squeue-released),
    ReqNodeNotAvail naming the nodes that have it while they cannot be used."""
    plan = schedule(snapshot(_typed_nodes(usable=False), [pending(1, per_node=GPU4, gpu_type="h100"),
                                                          pending(2, per_node=GPU4, gpu_type="a100"),
                                                          pending(3, per_node=GPU4, gpu_type="v100")]), CONFIG, NOW)
    assert (plan.waiting[1].reason, plan.waiting[2].reason) == ("BadConstraints", "ReqNodeNotAvail, UnavailableNodes:a0")
    assert list(started(plan)) == [3]


def gpus_job(job_id, count, nodes, **fields):
    """-N ``nodes`` --gpus=``count``: one CPU and at least one GPU on each node (snapshot.py)."""
    return pending(job_id, nodes=nodes, per_node=Resources(cpus=1, gres={"gpu": 1}), gpus_per_job=count, **fields)


def gpus_on(start):
    return {name: resources.gres["gpu"] for name, resources in start.allocation.items()}


def test_gpus_per_job_fill_the_nodes_in_order_leaving_one_for_each_later_node():
    """gres_select_filter.c _get_job_cnt: 3 over 2 nodes is 2 + 1; a node short of its share gives the
    rest to the next; none when they lack the count or a node would get none."""
    assert share_gpus_per_job(3, [8, 8]) == [2, 1]
    assert share_gpus_per_job(5, [2, 8]) == [2, 3]
    assert share_gpus_per_job(4, [8, 8, 8]) == [2, 1, 1]
    assert share_gpus_per_job(5, [2, 2]) is None
    assert share_gpus_per_job(1, [8, 8]) is None


def test_gpus_per_job_run_on_the_nodes_with_more_free_gpus_with_the_count_in_all():
    """fixtures/22.05/gputype job 19: -N 2 --gpus=3 beside jobs leaving gpu1 no CPU and gpu2 2 GPUs runs
    on gpu[3-4], 2 + 1 (a share of 2 rounded up on each would fit gpu2 too)."""
    busy = [running(17, ["gpu1"], 30, per_node=cpus(16)),
            running(18, ["gpu2"], 30, per_node=Resources(cpus=7, gres={"gpu": 6}))]
    start = started(schedule(snapshot(CPU_NODES, [gpus_job(19, 3, 2)], busy), CONFIG, NOW))[19]
    assert start.nodes == ("gpu3", "gpu4")
    assert gpus_on(start) == {"gpu3": 2, "gpu4": 1}


def test_gpus_per_job_take_nodes_whose_free_gpus_hold_the_count():
    """Only gpu2 and gpu4 have 2 free GPUs each; with more free GPUs weighed first, -N 2 --gpus=4 runs
    there, and -N 2 --gpus=5 waits: no two nodes hold 5."""
    busy = [running(1, ["gpu1", "gpu3"], 30, per_node=Resources(cpus=1, gres={"gpu": 7})),
            running(2, ["gpu2", "gpu4"], 30, per_node=Resources(cpus=1, gres={"gpu": 6}))]
    plan = schedule(snapshot(CPU_NODES, [gpus_job(5, 4, 2, priority=200), gpus_job(6, 5, 2, priority=100)], busy),
                    CONFIG, NOW)
    assert gpus_on(started(plan)[5]) == {"gpu2": 2, "gpu4": 2}
    assert plan.waiting[6].reason == "Resources"


def test_backfill_plans_gpus_per_job_when_the_nodes_together_hold_them():
    """gpu1 and gpu2 have one free GPU each now, gpu2 all 8 once its job ends at +5: -N 2 --gpus=4
    waits for that (two GPUs now are too few), planned on gpu[1-2]."""
    busy = [running(1, ["gpu1"], 60, per_node=Resources(cpus=1, gres={"gpu": 7})),
            running(2, ["gpu2"], 5, per_node=Resources(cpus=1, gres={"gpu": 7})),
            running(3, ["gpu3", "gpu4"], 60, per_node=cpus(16))]
    plan = schedule(snapshot(CPU_NODES, [gpus_job(5, 4, 2)], busy), CONFIG, NOW)
    assert plan.waiting[5].estimated_start == NOW + dt.timedelta(minutes=5)
    assert plan.waiting[5].planned_nodes == ("gpu1", "gpu2")


def test_gpus_per_job_of_a_node_range_take_as_many_nodes_as_their_gpus_need():
    """fixtures/22.05/gpus-spread: --gpus=12 without -N (max_nodes: the partition's 4) runs on gpu1 and gpu2,
    8 + 4; --gpus=6 where every node has 5 free on two, 5 + 1; with -n 3 its tasks fill them 2 + 1; a count
    one node holds stays on one node (7, older, first: -N 1-3 -n 5 --gpus=3 on gpu1; then 6 on the two with
    the most free GPUs)."""
    plan = schedule(snapshot(CPU_NODES, [gpus_job(1, 12, 1, max_nodes=4)]), CONFIG, NOW)
    assert gpus_on(started(plan)[1]) == {"gpu1": 8, "gpu2": 4}
    holding = [running(job_id, [f"gpu{job_id}"], 60, per_node=Resources(cpus=1, gres={"gpu": 3}))
               for job_id in range(1, 5)]
    plan = schedule(snapshot(CPU_NODES, [gpus_job(5, 6, 1, max_nodes=4)], holding), CONFIG, NOW)
    assert gpus_on(started(plan)[5]) == {"gpu1": 5, "gpu2": 1}
    plan = schedule(snapshot(CPU_NODES, [gpus_job(6, 12, 1, max_nodes=4, spread=TaskSpread(3)),
                                         gpus_job(7, 3, 1, max_nodes=3, spread=TaskSpread(5))]), CONFIG, NOW)
    assert {job_id: {name: (got.cpus, got.gres["gpu"]) for name, got in start.allocation.items()}
            for job_id, start in started(plan).items()} == {7: {"gpu1": (5, 3)}, 6: {"gpu2": (2, 8), "gpu3": (1, 4)}}


def test_mem_per_gpu_charges_each_node_its_own_gpus_memory():
    """fixtures/22.05/gpus-mem scontrol-d-N2-g3: -N 2 --gpus=3 --mem-per-gpu=1000 holds 2000 MB of gpu1 and
    1000 of gpu2 (gres_select_util_job_mem_set), so a job of 15000 MB fits beside it on gpu2."""
    job = pending(1, nodes=2, per_node=Resources(cpus=1, memory_mb=1000, gres={"gpu": 1}), gpus_per_job=3,
                  mem_per_gpu=1000)
    start = started(schedule(snapshot(CPU_NODES, [job]), CONFIG, NOW))[1]
    assert {name: got.memory_mb for name, got in start.allocation.items()} == {"gpu1": 2000, "gpu2": 1000}
    beside = pending(2, per_node=Resources(cpus=1, memory_mb=15000), required_nodes=frozenset({"gpu2"}))
    running_job = RunningJob(1, "gpu", start.allocation, NOW)
    assert 2 in started(schedule(snapshot(CPU_NODES, [beside], [running_job]), CONFIG, NOW))


def test_backfill_plans_gpus_per_job_on_the_nodes_with_more_free_gpus():
    """fixtures/22.05/gpus-backfill: once the job holding every CPU ends, gpu1 has 1 free GPU, gpu2 8, gpu3 2
    and gpu4 8; -N 2 --gpus=4 is planned on gpu[2,4], not on gpu[1-2] (which would hold 1 + 3)."""
    busy = [running(1, ["gpu1"], 60, per_node=Resources(cpus=1, gres={"gpu": 7})),
            running(2, ["gpu3"], 60, per_node=Resources(cpus=1, gres={"gpu": 6})),
            running(3, ["gpu1", "gpu3"], 3, per_node=cpus(15)), running(4, ["gpu2", "gpu4"], 3, per_node=cpus(16))]
    plan = schedule(snapshot(CPU_NODES, [gpus_job(5, 4, 2)], busy), CONFIG, NOW)
    assert plan.waiting[5].planned_nodes == ("gpu2", "gpu4")


def test_a_job_running_past_its_end_keeps_its_resources_until_it_has_ended():
    """A running job past its time limit (being stopped: KillWait, OverTimeLimit) or a preemption victim
    past its GraceTime still holds its node: backfill starts nothing there (job 1 would have had n0's
    8 GPUs on top of job 7's; job 2, of -n without -N, failed _spread's assertion)."""
    plan = schedule(snapshot(nodes(1), [pending(1, 200), tasks_job(2, 4, 1)], [running(7, ["n0"], -1)]), CONFIG, NOW)
    assert not plan.starts
    assert plan.waiting[1].estimated_start == NOW + dt.timedelta(seconds=1)


def test_gpus_per_job_with_tasks_get_the_count_on_the_nodes_the_tasks_take():
    """-n with --gpus (no -N): the tasks place the job (TaskSpread) and the GPUs are the count in all,
    shared as for -N (share_gpus_per_job), not the one GPU per node each node must have free: -n 4
    --gpus=4 has 4 GPUs on one node, -n 20 --gpus=4 3 + 1 on two; -n 4 --gpus=4 waits while the node
    its tasks would take has 2 GPUs free."""
    def tasks_gpus_job(job_id, tasks, nodes, count, **fields):
        return pending(job_id, nodes=nodes, per_node=Resources(cpus=-(-tasks // nodes), gres={"gpu": 1}),
                       spread=TaskSpread(tasks), gpus_per_job=count, **fields)

    plan = schedule(snapshot(CPU_NODES, [tasks_gpus_job(1, 4, 1, 4, priority=200),
                                         tasks_gpus_job(2, 20, 2, 4, priority=100)]), CONFIG, NOW)
    assert gpus_on(started(plan)[1]) == {"gpu1": 4}
    assert gpus_on(started(plan)[2]) == {"gpu1": 3, "gpu2": 1}
    busy = [running(3, [node.name for node in CPU_NODES], 30, per_node=Resources(cpus=1, gres={"gpu": 6}))]
    plan = schedule(snapshot(CPU_NODES, [tasks_gpus_job(4, 4, 1, 4)], busy), CONFIG, NOW)
    assert plan.waiting[4].reason == "Resources"
    assert plan.waiting[4].estimated_start == NOW + dt.timedelta(minutes=30)


def test_jobs_get_the_lowest_weight_nodes_first_then_the_best_fit():
    """slurm.conf Weight=: n0 (weight 5) holds job 1 best, but n1 and n2 (weight 1) go first, and of
    those the busier n2 (best fit); -N2 takes both; a job of -n without -N fills them before n0
    (fixtures/22.05/weight: test_real_slurm_weight)."""
    node_list = [dataclasses.replace(node, weight=5 if node.name == "n0" else 1) for node in nodes(3)]
    busy = [running(8, ["n0", "n2"], 60, per_node=Resources(cpus=8, memory_mb=1000, gres={"gpu": 4}))]
    jobs = [pending(1, 100, per_node=Resources(cpus=2, gres={"gpu": 4})),
            pending(2, 90, nodes=2, per_node=Resources(cpus=1)),
            pending(3, 80, per_node=Resources(cpus=1), spread=TaskSpread(tasks=24))]
    plan = schedule(snapshot(node_list, jobs, busy), CONFIG, NOW)
    assert started(plan)[1].nodes == ("n2",)
    assert set(started(plan)[2].nodes) == {"n1", "n2"}
    assert {name: resources.cpus for name, resources in started(plan)[3].allocation.items()} == {
        "n1": 15, "n2": 5, "n0": 4}


def range_job(job_id, low, high, per_node=None, **fields):
    """-N LOW-HIGH without --gpus (snapshot.py): HIGH nodes, as few as LOW where fewer are free."""
    return pending(job_id, nodes=high, per_node=per_node or cpus(1), min_nodes=low, **fields)


def test_a_node_range_starts_on_the_free_nodes_when_they_are_at_least_its_minimum():
    """fixtures/22.05/node-range: with gpu1 and gpu2's CPUs all held, -N 1-3 and -N 2-4 run at once on
    gpu[3-4] rather than wait for MAX; -N 2-4 -n 6 puts its tasks on those 2 (5, 1); with only the GPUs of
    gpu1 and gpu2 held -N 1-3 takes 3 nodes and -N 1-3 --gres=gpu:1 the 2 with GPUs free."""
    held_cpus = [running(9, ["gpu1", "gpu2"], 60, per_node=cpus(16))]
    for job in (range_job(1, 1, 3), range_job(1, 2, 4)):
        assert started(schedule(snapshot(CPU_NODES, [job], held_cpus), CONFIG, NOW))[1].nodes == ("gpu3", "gpu4")
    tasks = range_job(1, 2, 4, spread=TaskSpread(6, exact_nodes=True))
    start = started(schedule(snapshot(CPU_NODES, [tasks], held_cpus), CONFIG, NOW))[1]
    assert {name: got.cpus for name, got in start.allocation.items()} == {"gpu3": 5, "gpu4": 1}
    held_gpus = [running(9, ["gpu1", "gpu2"], 60, per_node=Resources(cpus=1, gres={"gpu": 8}))]
    assert started(schedule(snapshot(CPU_NODES, [range_job(1, 1, 3)], held_gpus), CONFIG, NOW))[1].nodes == (
        "gpu1", "gpu2", "gpu3")
    one_gpu = range_job(1, 1, 3, per_node=Resources(cpus=1, gres={"gpu": 1}))
    assert started(schedule(snapshot(CPU_NODES, [one_gpu], held_gpus), CONFIG, NOW))[1].nodes == ("gpu3", "gpu4")


def test_a_node_range_waits_for_its_minimum_and_is_planned_on_it():
    """-N 3-4 beside gpu1 and gpu2's held CPUs waits (Resources, not NODES_RESERVED: the partition has its
    3); backfill plans it once one of the holding jobs ends, on the 3 nodes free then, not when both have."""
    held = [running(8, ["gpu1"], 60, per_node=cpus(16)), running(9, ["gpu2"], 5, per_node=cpus(16))]
    plan = schedule(snapshot(CPU_NODES, [range_job(1, 3, 4)], held), CONFIG, NOW)
    assert not plan.starts
    assert plan.waiting[1].reason == "Resources"
    assert plan.waiting[1].estimated_start == NOW + dt.timedelta(minutes=5)
    assert plan.waiting[1].planned_nodes == ("gpu2", "gpu3", "gpu4")


@pytest.mark.parametrize(("reason", "prev_db", "kept"), [
    ("Dependency", "None", "Dependency"),
    ("AssocGrpCpuLimit", "Dependency", "AssocGrpCpuLimit"),  # the last one kept
    ("Resources", "JobHeldUser", "JobHeldUser"),  # None, Priority and Resources are not kept
    ("Priority", "BeginTime", "BeginTime"),
    ("None", "None", "None"),
])
def test_a_queue_build_keeps_a_pending_jobs_reason_for_accounting_unless_none_priority_or_resources(
        reason, prev_db, kept):
    assert reason_prev_db(reason=reason, prev_db=prev_db) == kept
