"""Migrations that change existing rows."""

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

from tests.conftest import container_pool, job_body
from trainhub.jobs.spec import parse_custom_job

BEFORE = [("jobs", "0001_initial")]
AFTER = [("jobs", "0002_job_list_indexes")]


@pytest.mark.django_db(transaction=True)
def test_the_gpu_type_of_existing_jobs_is_filled_from_their_spec(cast):
    executor = MigrationExecutor(connection)
    executor.migrate(BEFORE)
    old_apps = executor.loader.project_state(BEFORE).apps
    CustomJob = old_apps.get_model("jobs", "CustomJob")
    now = timezone.now()
    for job_id, pools in (("1", [container_pool(machine_type="a3-highgpu-8g")]), ("2", [container_pool()]),
                          ("3", [container_pool(), container_pool(replicas=2, accelerator="NVIDIA_TESLA_T4")])):
        CustomJob.objects.create(project_id=cast["alpha"].pk, location="us-central1", job_id=job_id, display_name="x",
                                 spec=parse_custom_job(job_body(*pools)).document, timeout_seconds=60,
                                 create_time=now, update_time=now)
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(AFTER)
    new_apps = executor.loader.project_state(AFTER).apps
    types = dict(new_apps.get_model("jobs", "CustomJob").objects.values_list("job_id", "accelerator_type"))
    executor.migrate(executor.loader.graph.leaf_nodes())  # back to the schema the other tests expect
    assert types == {"1": "NVIDIA_H100_80GB", "2": "ACCELERATOR_TYPE_UNSPECIFIED", "3": "NVIDIA_TESLA_T4"}
