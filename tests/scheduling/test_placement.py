"""The pure gang placement: all-or-nothing, best fit, no node used twice (property-based too)."""

from hypothesis import given, settings
from hypothesis import strategies as st

from trainhub.jobs.spec import ReplicaShape
from trainhub.scheduling.placement import CapacityIndex, FreeNode, GangRequest, Shortfall, _demand, plan_pass

A100 = ReplicaShape("a2-highgpu-1g", "NVIDIA_TESLA_A100", 1)
T4_1 = ReplicaShape("n1-standard-4", "NVIDIA_TESLA_T4", 1)
T4_4 = ReplicaShape("n1-standard-4", "NVIDIA_TESLA_T4", 4)
CPU = ReplicaShape("n1-standard-4", "ACCELERATOR_TYPE_UNSPECIFIED", 0)


def a100_nodes(count, start=0):
    return [FreeNode(1, start + i, "a2-highgpu-1g", "NVIDIA_TESLA_A100") for i in range(count)]


def test_a_gang_is_placed_whole_or_not_at_all():
    plan = plan_pass([GangRequest.from_pools("big", [(0, 1, A100), (1, 3, A100)]),
                      GangRequest.from_pools("small", [(0, 1, A100)])], a100_nodes(3))
    assert "big" not in plan.placements
    assert plan.shortfalls["big"][0].needed == 4 and plan.shortfalls["big"][0].free == 3
    assert plan.placements["small"] == {(0, 0): 0}


def test_a_blocked_gang_does_not_consume_nodes():
    plan = plan_pass([GangRequest.from_pools("big", [(0, 1, A100), (1, 2, A100)]),
                      GangRequest.from_pools("two", [(0, 1, A100), (1, 1, A100)])], a100_nodes(2))
    assert set(plan.placements["two"].values()) == {0, 1}


def test_machine_type_and_accelerator_must_match():
    nodes = a100_nodes(1) + [FreeNode(4, 10, "n1-standard-4", "NVIDIA_TESLA_T4")]
    plan = plan_pass([GangRequest.from_pools("t4", [(0, 1, T4_1)]),
                      GangRequest.from_pools("h100", [(0, 1, ReplicaShape("a3-highgpu-8g", "NVIDIA_H100_80GB", 8))])],
                     nodes)
    assert plan.placements["t4"] == {(0, 0): 10}
    assert "h100" in plan.shortfalls
    assert "a3-highgpu-8g" in plan.shortfalls["h100"][0].describe()


def test_smallest_sufficient_node_is_chosen_first():
    nodes = [FreeNode(4, 1, "n1-standard-4", "NVIDIA_TESLA_T4"), FreeNode(1, 2, "n1-standard-4", "NVIDIA_TESLA_T4")]
    plan = plan_pass([GangRequest.from_pools("one", [(0, 1, T4_1)]), GangRequest.from_pools("four", [(0, 1, T4_4)])],
                     nodes)
    assert plan.placements["one"] == {(0, 0): 2}
    assert plan.placements["four"] == {(0, 0): 1}


def test_cpu_replicas_prefer_nodes_without_gpus():
    nodes = [FreeNode(4, 1, "n1-standard-4", "NVIDIA_TESLA_T4"),
             FreeNode(0, 2, "n1-standard-4", "ACCELERATOR_TYPE_UNSPECIFIED")]
    plan = plan_pass([GangRequest.from_pools("cpu", [(0, 1, CPU)]), GangRequest.from_pools("cpu2", [(0, 1, CPU)])],
                     nodes)
    assert plan.placements["cpu"] == {(0, 0): 2}
    assert plan.placements["cpu2"] == {(0, 0): 1}


shapes = st.sampled_from([A100, T4_1, T4_4, CPU])
gangs = st.lists(st.tuples(shapes, st.integers(1, 4), st.integers(0, 3)), min_size=1, max_size=3)


@settings(max_examples=200, deadline=None)
@given(
    requests=st.lists(gangs, min_size=1, max_size=12),
    a100=st.integers(0, 6),
    t4=st.lists(st.sampled_from([1, 2, 4]), max_size=6),
)
def test_no_node_is_ever_given_twice_and_gangs_are_whole(requests, a100, t4):
    nodes = a100_nodes(a100) + [FreeNode(g, 100 + i, "n1-standard-4", "NVIDIA_TESLA_T4") for i, g in enumerate(t4)]
    by_id = {n.node_id: n for n in nodes}
    gang_requests = []
    for key, gang in enumerate(requests):
        pools = [(index, count, shape) for index, (shape, count, _) in enumerate(gang)]
        gang_requests.append(GangRequest.from_pools(key, pools))
    plan = plan_pass(gang_requests, nodes)
    used = [node for assignment in plan.placements.values() for node in assignment.values()]
    assert len(used) == len(set(used))
    for request in gang_requests:
        if request.key in plan.placements:
            assignment = plan.placements[request.key]
            assert len(assignment) == len(request.replicas)
            for pool_index, replica_index, shape in request.replicas:
                node = by_id[assignment[(pool_index, replica_index)]]
                assert node.machine_type == shape.machine_type
                assert node.gpu_count >= shape.accelerator_count
                if shape.accelerator_count:
                    assert node.accelerator_type == shape.accelerator_type
        else:
            assert plan.shortfalls[request.key]


@settings(max_examples=200, deadline=None)
@given(
    earlier=st.lists(gangs, max_size=4),
    gang=gangs,
    a100=st.integers(0, 4),
    t4=st.lists(st.sampled_from([1, 2, 4]), max_size=6),
    cpu=st.integers(0, 3),
)
def test_the_shortfall_check_agrees_with_taking_the_nodes(earlier, gang, a100, t4, cpu):
    nodes = (a100_nodes(a100) + [FreeNode(g, 100 + i, "n1-standard-4", "NVIDIA_TESLA_T4") for i, g in enumerate(t4)]
             + [FreeNode(0, 200 + i, "n1-standard-4", "ACCELERATOR_TYPE_UNSPECIFIED") for i in range(cpu)])
    index = CapacityIndex(nodes)
    for taken in earlier:  # some nodes already gone, as later in a pass
        index.take(_demand(GangRequest.from_pools("x", [(i, n, shape) for i, (shape, n, _) in enumerate(taken)]).pools))
    demand = _demand(GangRequest.from_pools("gang", [(i, n, shape) for i, (shape, n, _) in enumerate(gang)]).pools)
    predicted = index.shortfall(demand)
    taken = index.take(demand)
    if predicted is None:
        assert not isinstance(taken, Shortfall)
        assert [len(nodes) for nodes in taken] == [count for _, count in demand]
    else:
        assert taken == predicted


def test_spot_jobs_are_preempted_newest_first_only_as_far_as_needed():
    from trainhub.scheduling.placement import Victim

    victims = [Victim("spot-new", tuple(a100_nodes(1, start=10))), Victim("spot-old", tuple(a100_nodes(1, start=20))),
               Victim("spot-older", tuple(a100_nodes(1, start=30)))]
    request = GangRequest.from_pools("standard", [(0, 1, A100), (1, 1, A100)], can_preempt=True)
    plan = plan_pass([request], a100_nodes(1), victims=victims)
    assert plan.preemptions == {"standard": ["spot-new"]}
    assert set(plan.placements["standard"].values()) == {0, 10}


def test_nobody_is_preempted_when_even_all_spot_jobs_would_not_make_room():
    from trainhub.scheduling.placement import Victim

    request = GangRequest.from_pools("huge", [(0, 1, A100), (1, 5, A100)], can_preempt=True)
    plan = plan_pass([request, GangRequest.from_pools("small", [(0, 1, A100)])], a100_nodes(1),
                     victims=[Victim("spot", tuple(a100_nodes(1, start=10)))])
    assert plan.preemptions == {}
    assert plan.placements["small"] == {(0, 0): 0}


def test_spot_requests_never_preempt():
    from trainhub.scheduling.placement import Victim

    plan = plan_pass([GangRequest.from_pools("spot2", [(0, 1, A100)])], [],
                     victims=[Victim("spot", tuple(a100_nodes(1)))])
    assert plan.preemptions == {} and "spot2" in plan.shortfalls


def test_a_reserving_gang_holds_idle_nodes_against_smaller_jobs():
    big = GangRequest.from_pools("big", [(0, 1, A100), (1, 3, A100)], reserve=True)
    small = GangRequest.from_pools("small", [(0, 1, A100)])
    plan = plan_pass([big, small], a100_nodes(3), inventory=a100_nodes(4))
    assert plan.reservations == {"big": a100_nodes(3)}
    assert "small" in plan.shortfalls and "small" not in plan.placements
    assert plan.held_against == {"small": "big"}


def test_a_gang_the_usable_inventory_cannot_hold_reserves_nothing_and_small_jobs_run():
    """Accepted for a 4-node pool; one node since went DOWN (it is no longer in the usable
    inventory): the 4-node gang can never start on what is left, so it holds no idle node."""
    big = GangRequest.from_pools("big", [(0, 4, A100)], reserve=True)
    small = GangRequest.from_pools("small", [(0, 1, A100)])
    plan = plan_pass([big, small], a100_nodes(3), inventory=a100_nodes(3))
    assert plan.reservations == {} and plan.held_against == {}
    assert plan.unreservable["big"].missing == 1
    assert set(plan.placements) == {"small"}


def test_the_next_candidate_the_inventory_can_hold_reserves_instead():
    never = GangRequest.from_pools("never", [(0, 5, A100)], reserve=True)
    next_gang = GangRequest.from_pools("next", [(0, 3, A100)], reserve=True)
    small = GangRequest.from_pools("small", [(0, 1, A100)])
    plan = plan_pass([never, next_gang, small], a100_nodes(2), inventory=a100_nodes(4))
    assert set(plan.unreservable) == {"never"}
    assert plan.reservations == {"next": a100_nodes(2)}
    assert plan.held_against == {"small": "next"}  # "never" waits for capacity, not behind the hold


def test_a_reservation_holds_only_against_jobs_short_of_the_kind_it_holds():
    big = GangRequest.from_pools("big", [(0, 3, A100)], reserve=True)
    t4 = GangRequest.from_pools("t4", [(0, 2, T4_1)])
    plan = plan_pass([big, t4], [*a100_nodes(2), FreeNode(1, 9, "n1-standard-4", "NVIDIA_TESLA_T4")],
                     inventory=a100_nodes(3))
    assert "t4" in plan.shortfalls and plan.held_against == {}


def test_quota_admits_jobs_in_order_until_the_limit():
    from trainhub.scheduling.quota import QuotaBook

    book = QuotaBook(limits={("p", "us", "custom_model_training_nvidia_a100_gpus"): 2},
                     usage={("p", "us", "custom_model_training_nvidia_a100_gpus"): 1})
    demand = (("custom_model_training_nvidia_a100_gpus", 1),)
    first = GangRequest.from_pools("first", [(0, 1, A100)], project="p", location="us", quota_demand=demand)
    second = GangRequest.from_pools("second", [(0, 1, A100)], project="p", location="us", quota_demand=demand)
    other = GangRequest.from_pools("other", [(0, 1, A100)], project="q", location="us", quota_demand=demand)
    plan = plan_pass([first, second, other], a100_nodes(5), quotas=book)
    assert set(plan.placements) == {"first", "other"}
    shortfall = plan.quota_shortfalls["second"][0]
    assert (shortfall.in_use, shortfall.requested, shortfall.limit) == (2, 1, 2)
    assert "short by 1" in shortfall.describe()


A100_QUOTA = "custom_model_training_nvidia_a100_gpus"
T4_QUOTA = "custom_model_training_nvidia_t4_gpus"


def _quota_stream(big_holds: bool):
    """A 4-GPU job of a 4-GPU quota, 3 in use, then younger 1-GPU jobs of its project, another
    project's, and one of its project needing another metric."""
    from trainhub.scheduling.quota import QuotaBook

    book = QuotaBook(limits={("p", "us", A100_QUOTA): 4, ("q", "us", A100_QUOTA): 4, ("p", "us", T4_QUOTA): 4},
                     usage={("p", "us", A100_QUOTA): 3})
    big = GangRequest.from_pools("big", [(0, 4, A100)], project="p", location="us",
                                 quota_demand=((A100_QUOTA, 4),), holds_quota=big_holds)
    small = GangRequest.from_pools("small", [(0, 1, A100)], project="p", location="us",
                                   quota_demand=((A100_QUOTA, 1),), holds_quota=True)
    other = GangRequest.from_pools("other-project", [(0, 1, A100)], project="q", location="us",
                                   quota_demand=((A100_QUOTA, 1),))
    t4 = GangRequest.from_pools("t4", [(0, 1, T4_1)], project="p", location="us", quota_demand=((T4_QUOTA, 1),))
    nodes = [*a100_nodes(8), FreeNode(1, 20, "n1-standard-4", "NVIDIA_TESLA_T4")]
    return plan_pass([big, small, other, t4], nodes, quotas=book)


def test_without_a_hold_younger_small_jobs_take_the_quota_a_big_job_waits_for():
    plan = _quota_stream(big_holds=False)
    assert set(plan.placements) == {"small", "other-project", "t4"} and "big" in plan.quota_shortfalls


def test_a_job_short_of_quota_past_the_threshold_holds_it_against_younger_jobs_of_its_project():
    plan = _quota_stream(big_holds=True)
    assert plan.quota_holds == {"big": [A100_QUOTA]}
    assert plan.quota_held_against == {"small": "big"}  # even though it too has waited past the threshold
    assert set(plan.placements) == {"other-project", "t4"}  # another project, another metric: unaffected


def test_a_holder_starts_once_its_quota_frees_and_then_holds_nothing():
    from trainhub.scheduling.quota import QuotaBook

    book = QuotaBook(limits={("p", "us", A100_QUOTA): 4}, usage={("p", "us", A100_QUOTA): 0})
    big = GangRequest.from_pools("big", [(0, 4, A100)], project="p", location="us",
                                 quota_demand=((A100_QUOTA, 4),), holds_quota=True)
    small = GangRequest.from_pools("small", [(0, 1, A100)], project="p", location="us",
                                   quota_demand=((A100_QUOTA, 1),))
    plan = plan_pass([big, small], a100_nodes(8), quotas=book)
    assert set(plan.placements) == {"big"} and plan.quota_holds == {} and plan.quota_held_against == {}
    assert "small" in plan.quota_shortfalls


def test_a_job_asking_for_more_than_the_limit_outright_holds_nothing():
    from trainhub.scheduling.quota import QuotaBook

    book = QuotaBook(limits={("p", "us", A100_QUOTA): 2})
    huge = GangRequest.from_pools("huge", [(0, 3, A100)], project="p", location="us",
                                  quota_demand=((A100_QUOTA, 3),), holds_quota=True)
    small = GangRequest.from_pools("small", [(0, 1, A100)], project="p", location="us",
                                   quota_demand=((A100_QUOTA, 1),))
    plan = plan_pass([huge, small], a100_nodes(8), quotas=book)
    assert set(plan.placements) == {"small"} and plan.quota_holds == {}


@settings(max_examples=150, deadline=None)
@given(limit=st.integers(0, 8), requests=st.lists(st.integers(1, 4), min_size=1, max_size=10),
       in_use=st.integers(0, 8))
def test_quota_usage_never_exceeds_a_limit(limit, requests, in_use):
    from trainhub.scheduling.quota import QuotaBook

    metric = "custom_model_training_nvidia_a100_gpus"
    in_use = min(in_use, limit)
    book = QuotaBook(limits={("p", "us", metric): limit}, usage={("p", "us", metric): in_use})
    gangs = [GangRequest.from_pools(i, [(0, 1, A100), (1, n - 1, A100)], project="p", location="us",
                                    quota_demand=((metric, n),)) for i, n in enumerate(requests)]
    plan = plan_pass(gangs, a100_nodes(40), quotas=book)
    assert in_use + sum(requests[k] for k in plan.placements) <= limit
    assert book.usage[("p", "us", metric)] <= limit


def test_each_location_has_its_own_reserving_gang():
    us = [FreeNode(1, i, "a2-highgpu-1g", "NVIDIA_TESLA_A100", "us-central1") for i in range(2)]
    eu = [FreeNode(1, 10 + i, "a2-highgpu-1g", "NVIDIA_TESLA_A100", "europe-west4") for i in range(2)]
    plan = plan_pass([GangRequest.from_pools("us", [(0, 3, A100)], reserve=True, location="us-central1"),
                      GangRequest.from_pools("eu", [(0, 3, A100)], reserve=True, location="europe-west4"),
                      GangRequest.from_pools("eu-small", [(0, 1, A100)], location="europe-west4")],
                     us + eu, inventory=[*us, *eu, FreeNode(1, 5, "a2-highgpu-1g", "NVIDIA_TESLA_A100", "us-central1"),
                                          FreeNode(1, 15, "a2-highgpu-1g", "NVIDIA_TESLA_A100", "europe-west4")])
    assert plan.reservations == {"us": us, "eu": eu}
    assert plan.held_against == {"eu-small": "eu"}
