"""The pure gang placement: all-or-nothing, best fit, no node used twice (property-based too)."""

from hypothesis import given, settings
from hypothesis import strategies as st

from trainhub.jobs.spec import ReplicaShape
from trainhub.scheduling.placement import FreeNode, GangRequest, plan_pass

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
