"""Benchmarks empty the job table between runs with plain SQL; what points at a job must not stop them."""

import copy

from bench.scheduler_pass import clear_jobs
from tests.conftest import SEED_REST_BODY
from trainhub.jobs.models import CustomJob, JobEvent
from trainhub.jobs.services import job_submit
from trainhub.tuning.models import TrainingPipeline


def test_clearing_the_jobs_deletes_their_events_and_unlinks_a_pipeline_that_ran_one(cast, nodes, now):
    job = job_submit(project=cast["alpha"], location="us-central1", user=cast["uma"],
                     body=copy.deepcopy(SEED_REST_BODY), now=now)
    pipeline = TrainingPipeline.objects.create(project=cast["alpha"], location="us-central1", pipeline_id="1",
                                               display_name="p", spec={}, create_time=now, update_time=now,
                                               custom_job=job)

    clear_jobs()

    assert not CustomJob.objects.exists() and not JobEvent.objects.exists()
    pipeline.refresh_from_db()
    assert pipeline.custom_job_id is None
