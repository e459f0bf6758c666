"""Where srun puts a step's tasks in an allocation (trainhub.slurm.steps, pure)."""

import pytest

from trainhub.slurm.steps import BAD_GRES, NOT_AVAILABLE, StepRefused, StepRequest, layout

TWO_NODES = [(0, 1), (0, 1)]


def tasks(request, gpus=TWO_NODES, job_tasks=4):
    return [(part.allocation_index, part.task_ids, part.gpu_indices)
            for part in layout(request, allocation_gpus=gpus, job_tasks=job_tasks)]


def test_without_options_a_step_runs_the_jobs_tasks_on_every_node_in_blocks():
    assert tasks(StepRequest()) == [(0, (0, 1), (0, 1)), (1, (2, 3), (0, 1))]


def test_uneven_tasks_put_the_extra_ones_on_the_first_nodes():
    """fixtures/22.05/srun/out-1.txt: srun -n 3 on two nodes runs tasks 0 and 1 on the first."""
    assert tasks(StepRequest(tasks=3, gpus_per_node=1)) == [(0, (0, 1), (0,)), (1, (2,), (0,))]


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
