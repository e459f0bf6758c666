"""Where srun puts a step's tasks in an allocation (trainhub.slurm.steps, pure)."""

import pytest

from trainhub.slurm.steps import (BAD_GRES, NOT_AVAILABLE, TOO_MANY_CPUS, NodeShare, StepRefused, StepRequest, layout,
                                  place)

TWO_NODES = [(0, 1), (0, 1)]


def tasks(request, gpus=TWO_NODES, job_tasks=4):
    return [(part.allocation_index, part.task_ids, part.gpu_indices)
            for part in layout(request, allocation_gpus=gpus, job_tasks=job_tasks)]


def test_without_options_a_step_runs_the_jobs_tasks_on_every_node_in_blocks():
    assert tasks(StepRequest()) == [(0, (0, 1), (0, 1)), (1, (2, 3), (0, 1))]


def test_uneven_tasks_put_the_extra_ones_on_the_first_nodes():
    """fixtures/22.05/srun/out-1.txt: srun -n 3 on two nodes runs tasks 0 and 1 on the first."""
    assert tasks(StepRequest(tasks=3, gpus_per_node=1)) == [(0, (0, 1), (0,)), (1, (2,), (0,))]


def test_cyclic_and_plane_deal_the_task_ids_round_the_nodes():
    assert tasks(StepRequest(tasks=5, distribution="cyclic")) == [(0, (0, 2, 4), (0, 1)), (1, (1, 3), (0, 1))]
    assert tasks(StepRequest(tasks=5, distribution="plane", plane_size=2)) == [
        (0, (0, 1, 4), (0, 1)), (1, (2, 3), (0, 1))]


def test_a_node_without_room_is_skipped_until_every_node_is_full():
    """fixtures/22.05/srun-dist/out-1.txt: -m cyclic over 4 + 1 CPUs runs 0,2,3,4 and 1; and past
    every node's room the dealing goes on round them all (Slurm oversubscribes)."""
    def dealt(request, room, job_tasks=5):
        return [part.task_ids for part in layout(request, allocation_gpus=[()] * len(room), job_tasks=job_tasks,
                                                 task_room=room)]

    assert dealt(StepRequest(distribution="cyclic"), [4, 1]) == [(0, 2, 3, 4), (1,)]
    assert dealt(StepRequest(distribution="plane", plane_size=3), [4, 1]) == [(0, 1, 2, 4), (3,)]
    assert dealt(StepRequest(distribution="cyclic"), [1, 1], job_tasks=3) == [(0, 2), (1,)]
    # every node gets one: a plane of 4 for 3 tasks on two nodes (srun-dist/out-1.txt) and on three (out-2.txt)
    assert dealt(StepRequest(distribution="plane", plane_size=4), [4, 1], job_tasks=3) == [(0, 1), (2,)]
    assert dealt(StepRequest(distribution="plane", plane_size=4), [5, 1, 1], job_tasks=3) == [(0,), (1,), (2,)]


def test_fewer_tasks_than_nodes_use_as_many_nodes_as_tasks():
    assert tasks(StepRequest(tasks=1)) == [(0, (0,), (0, 1))]


def test_nodes_alone_run_one_task_per_node_and_tasks_per_node_multiplies():
    assert tasks(StepRequest(nodes=1)) == [(0, (0,), (0, 1))]
    assert tasks(StepRequest(tasks_per_node=3)) == [(0, (0, 1, 2), (0, 1)), (1, (3, 4, 5), (0, 1))]


@pytest.mark.parametrize("request_, reason", [(StepRequest(nodes=3), NOT_AVAILABLE),
                                              (StepRequest(tasks=0), NOT_AVAILABLE),
                                              (StepRequest(gpus_per_node=3), BAD_GRES)])
def test_more_than_the_allocation_holds_is_refused(request_, reason):
    with pytest.raises(StepRefused, match=reason.replace("(", r"\(").replace(")", r"\)")):
        tasks(request_)


# --- steps sharing the allocation (fixtures/22.05/steps/) ----------------------------------------

def placed(request, shares, cpus_per_task=1):
    parts = layout(request, allocation_gpus=[share.gpus for share in shares], job_tasks=1)
    found = place(request, parts, shares, cpus_per_task=cpus_per_task)
    return None if found is None else [(p.cpus, p.gpu_indices) for p in found]


EIGHT = (0, 1, 2, 3, 4, 5, 6, 7)


def test_a_step_takes_every_cpu_of_the_job_on_its_node_unless_exact():
    """sacct.txt: 2.0 (srun -n1 in a 2-CPU job) holds cpu=2, 3.0 (--exact) cpu=1."""
    free = [NodeShare(cpus=2, gpus=())]
    assert placed(StepRequest(tasks=1), free) == [(2, ())]
    assert placed(StepRequest(tasks=1, exact=True), free) == [(1, ())]
    assert placed(StepRequest(tasks=1, exact=True), free, cpus_per_task=2) == [(2, ())]


def test_a_step_waits_while_other_steps_hold_the_cpus_it_needs():
    """out-2.txt: the second srun -n1 waits for the first; out-3.txt: with --exact both run."""
    half = [NodeShare(cpus=2, gpus=(), held_cpus=1)]
    assert placed(StepRequest(tasks=1), half) is None
    assert placed(StepRequest(tasks=1, exact=True), half) == [(1, ())]
    assert placed(StepRequest(tasks=1, exact=True), [NodeShare(cpus=2, gpus=(), held_cpus=2)]) is None


def test_a_step_takes_the_lowest_free_gpus_and_waits_when_too_few_are_free():
    """out-1.txt: srun --gres=gpu:8 waits while another step holds the job's 8 GPUs."""
    share = NodeShare(cpus=4, gpus=EIGHT, held_cpus=1, held_gpus=frozenset({0, 2}))
    assert placed(StepRequest(tasks=1, exact=True, gpus_per_node=3), [share]) == [(1, (1, 3, 4))]
    assert placed(StepRequest(tasks=1, exact=True, gpus_per_node=7), [share]) is None
    assert placed(StepRequest(tasks=1, exact=True, gpus_per_node=0), [share]) == [(1, ())]


def test_a_step_without_gres_needs_every_gpu_of_the_job_free():
    """out-6.txt / sacct.txt: 6.1 (no --gres, --exact) started only when 6.0 gave its GPUs back."""
    assert placed(StepRequest(tasks=1, exact=True), [NodeShare(cpus=3, gpus=(0, 1), held_cpus=1,
                                                               held_gpus=frozenset({1}))]) is None
    assert placed(StepRequest(tasks=1, exact=True), [NodeShare(cpus=3, gpus=(0, 1))]) == [(1, (0, 1))]


def test_an_overlapping_step_ignores_what_others_hold():
    """out-4.txt: srun --overlap runs beside a step holding every CPU of the job."""
    busy = [NodeShare(cpus=2, gpus=(0, 1), held_cpus=2, held_gpus=frozenset({0, 1}))]
    assert placed(StepRequest(tasks=1, overlap=True), busy) == [(2, (0, 1))]


def test_a_step_that_can_never_fit_is_refused_with_sruns_reasons():
    """out-5.txt: srun -n 3 in a 2-CPU job; srun --gres=gpu:4 in a job with 2 GPUs a node."""
    share = [NodeShare(cpus=2, gpus=(0, 1), held_cpus=2)]
    with pytest.raises(StepRefused, match=TOO_MANY_CPUS):
        placed(StepRequest(tasks=3), share)
    with pytest.raises(StepRefused) as refused:
        placed(StepRequest(tasks=1, gpus_per_node=4), share)
    assert (str(refused.value), refused.value.detail) == (
        BAD_GRES, "Step requested gres_per_node=gpu:4 is more than the job's gres_per_node=gpu:2")
