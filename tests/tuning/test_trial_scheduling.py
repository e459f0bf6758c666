"""Trials are CustomJobs submitted like any other: FLEX_START, SPOT and persistentResourceId in
trialJobSpec schedule each trial exactly as they schedule a CustomJob."""

import pytest

from tests.conftest import container_pool
from tests.resources.conftest import running, t4_pool
from tests.tuning.helpers import integer, study, tuning_body
from trainhub.common.errors import ApiError
from trainhub.jobs import states
from trainhub.scheduling.services import scheduler_pass
from trainhub.tuning import services

pytestmark = pytest.mark.django_db

A100_POOL = container_pool(machine_type="a2-highgpu-1g", accelerator="NVIDIA_TESLA_A100", count=1)
T4_POOL = container_pool(accelerator="NVIDIA_TESLA_T4", count=1)


def create(cast, now, pool, **trial_spec):
    return services.tuning_job_create(project=cast["alpha"], location="us-central1", user=cast["uma"], now=now,
                                      body=tuning_body(study(integer("n", 1, 4), algorithm="GRID_SEARCH"),
                                                       max_trials=4, parallel=2, pool=pool, **trial_spec))


def trial_jobs(tuning_job):
    return [trial.custom_job for trial in tuning_job.trials.select_related("custom_job").order_by("number")]


@pytest.mark.parametrize("strategy, metric", [
    ("FLEX_START", "custom_model_training_preemptible_nvidia_a100_gpus"),
    ("SPOT", "custom_model_training_preemptible_nvidia_a100_gpus"),
])
def test_trials_run_with_the_strategy_and_quota_of_their_trial_job_spec(cast, nodes, now, strategy, metric):
    tuning_job = create(cast, now, A100_POOL, scheduling={"strategy": strategy})
    jobs = trial_jobs(tuning_job)
    assert len(jobs) == 2  # parallelTrialCount
    assert {job.strategy for job in jobs} == {strategy}
    assert all(job.quota_demand == {metric: 1} for job in jobs)
    scheduler_pass(now=now)
    assert {job.state for job in trial_jobs(tuning_job)} == {states.PENDING}  # both A100 nodes, gang placed


def test_a_trial_job_spec_flex_start_could_never_run_is_refused_at_create(cast, nodes, now):
    with pytest.raises(ApiError) as error:
        create(cast, now, T4_POOL, scheduling={"strategy": "FLEX_START"})
    assert error.value.status == "INVALID_ARGUMENT"
    assert any(v.field.startswith("trialJobSpec.workerPoolSpecs[0].machineSpec") for v in error.value.violations)


def test_trials_on_a_persistent_resource_run_on_its_machines_and_use_no_quota(cast, nodes, now):
    resource = running(cast, now, t4_pool(2))
    tuning_job = create(cast, now, T4_POOL, persistentResourceId="pr")
    scheduler_pass(now=now)
    jobs = trial_jobs(tuning_job)
    assert all(job.quota_demand == {} for job in jobs)
    held_by = {replica.node.dedicated_to for job in jobs for replica in job.replicas.select_related("node")}
    assert held_by == {resource.owner}
