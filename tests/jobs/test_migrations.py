"""Migrations that change existing rows."""

import datetime as dt

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

from tests.conftest import container_pool, job_body
from trainhub.jobs.spec import parse_custom_job

pytestmark = pytest.mark.django_db(transaction=True)


def migrate(targets):
    """Migrate to ``targets`` (every leaf when None) and return the apps of that state."""
    executor = MigrationExecutor(connection)
    targets = targets or executor.loader.graph.leaf_nodes()
    executor.migrate(targets)
    return MigrationExecutor(connection).loader.project_state(targets).apps


@pytest.fixture
def back_to():
    """Migrate back to a migration for the test, and forward to the latest schema afterwards."""
    yield lambda target: migrate([("jobs", target)])
    migrate(None)


def test_the_gpu_type_of_existing_jobs_is_filled_from_their_spec(cast, back_to):
    CustomJob = back_to("0001_initial").get_model("jobs", "CustomJob")
    now = timezone.now()
    for job_id, pools in (("1", [container_pool(machine_type="a3-highgpu-8g")]), ("2", [container_pool()]),
                          ("3", [container_pool(), container_pool(replicas=2, accelerator="NVIDIA_TESLA_T4")])):
        CustomJob.objects.create(project_id=cast["alpha"].pk, location="us-central1", job_id=job_id, display_name="x",
                                 spec=parse_custom_job(job_body(*pools)).document, timeout_seconds=60,
                                 create_time=now, update_time=now)
    jobs = migrate([("jobs", "0003_job_list_indexes")]).get_model("jobs", "CustomJob")
    types = dict(jobs.objects.values_list("job_id", "accelerator_type"))
    assert types == {"1": "NVIDIA_H100_80GB", "2": "ACCELERATOR_TYPE_UNSPECIFIED", "3": "NVIDIA_TESLA_T4"}


def test_the_cost_ledger_starts_with_the_jobs_already_finished(cast, back_to):
    CustomJob = back_to("0003_job_list_indexes").get_model("jobs", "CustomJob")
    now = timezone.now()
    for job_id, strategy, end in (("1", "STANDARD", now), ("2", "STANDARD", now), ("3", "SPOT", now),
                                  ("4", "SPOT", None)):
        parsed = parse_custom_job(job_body(container_pool(machine_type="a3-highgpu-8g"),
                                           scheduling={"strategy": strategy}))
        metric = "custom_model_training_" + ("preemptible_" if strategy == "SPOT" else "") + "nvidia_h100_gpus"
        CustomJob.objects.create(project_id=cast["alpha"].pk, location="us-central1", job_id=job_id, display_name="x",
                                 spec=parsed.document, strategy=strategy, timeout_seconds=60, create_time=now,
                                 update_time=now, start_time=now - dt.timedelta(hours=1), end_time=end,
                                 state="JOB_STATE_SUCCEEDED" if end else "JOB_STATE_RUNNING",
                                 quota_demand={metric: 8})
    ledger = migrate([("jobs", "0004_cost_ledger_active_replicas")]).get_model("jobs", "CostLedger")
    assert {row.strategy: (row.jobs, row.gpu_seconds) for row in ledger.objects.all()} == {
        "STANDARD": (2, {"NVIDIA_H100_80GB": 2 * 8 * 3600.0}), "SPOT": (1, {"NVIDIA_H100_80GB": 8 * 3600.0})}


def test_the_persistent_resource_of_existing_jobs_is_filled_from_their_spec(cast, back_to):
    CustomJob = back_to("0004_cost_ledger_active_replicas").get_model("jobs", "CustomJob")
    now = timezone.now()
    for job_id, extra in (("1", {"persistentResourceId": "pr"}), ("2", {})):
        CustomJob.objects.create(project_id=cast["alpha"].pk, location="us-central1", job_id=job_id, display_name="x",
                                 spec=parse_custom_job(job_body(container_pool(), **extra)).document,
                                 timeout_seconds=60, create_time=now, update_time=now)
    jobs = migrate([("jobs", "0005_job_persistent_resource_id")]).get_model("jobs", "CustomJob")
    assert dict(jobs.objects.values_list("job_id", "persistent_resource_id")) == {"1": "pr", "2": None}
