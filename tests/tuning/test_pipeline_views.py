"""Training pipeline pages: list, a pipeline's page, the create form, cancel, access."""

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from tests.conftest import later
from tests.tuning.helpers import custom_pipeline, finish_job, hypertune_reports, tuning_pipeline
from trainhub.tuning import services
from trainhub.tuning.forms import PIPELINE_EXAMPLE
from trainhub.tuning.models import TrainingPipeline

LIST = "/pipelines/"
COLLECTION = "/projects/alpha/locations/us-central1/trainingPipelines"


def create(cast, now, body, capture):
    with capture(execute=True):
        return services.pipeline_create(project=cast["alpha"], location="us-central1", user=cast["uma"],
                                        body=body, now=now)


@pytest.fixture
def browser(client, cast):
    client.force_login(cast["uma"])
    return client


@pytest.fixture
def succeeded(cast, nodes, now, django_capture_on_commit_callbacks):
    pipeline = create(cast, now, custom_pipeline(), django_capture_on_commit_callbacks)
    with django_capture_on_commit_callbacks(execute=True):
        finish_job(pipeline.custom_job, later(now, 5), model_files=[{"path": "weights.bin", "sizeBytes": 10}])
    pipeline.refresh_from_db()
    assert pipeline.state == "PIPELINE_STATE_SUCCEEDED"
    return pipeline


def test_the_list_shows_each_pipeline_its_job_and_model_in_constant_queries(
        browser, cast, nodes, now, succeeded, django_capture_on_commit_callbacks, django_assert_max_num_queries):
    for name in ("second", "third"):
        create(cast, now, custom_pipeline(name), django_capture_on_commit_callbacks)
    with django_assert_max_num_queries(12):
        html = browser.get(LIST).content.decode()
    assert html.count('href="/projects/alpha/locations/us-central1/trainingPipelines/') == 3
    assert f"custom job <a class=\"mono\" href=\"/projects/alpha/locations/us-central1/jobs/" \
           f"{succeeded.custom_job.job_id}/\">" in html
    assert "quadratic</a> v1" in html and "SUCCEEDED" in html and "QUEUED" in html


def test_the_list_names_each_backing_job_without_reading_its_document(browser, cast, now, succeeded,
                                                                      django_capture_on_commit_callbacks):
    tuning = create(cast, now, tuning_pipeline(), django_capture_on_commit_callbacks)
    with CaptureQueriesContext(connection) as captured:
        html = browser.get(LIST).content.decode()
    assert f"/jobs/{succeeded.custom_job.job_id}/" in html and f"/hyperparameterTuningJobs/{tuning.tuning_job.job_id}/" in html
    pipeline_reads = [query["sql"] for query in captured.captured_queries if 'FROM "tuning_trainingpipeline"' in query["sql"]]
    assert pipeline_reads and all('"jobs_customjob"."spec"' not in sql and '"tuning_hyperparametertuningjob"."spec"' not in sql
                                  for sql in pipeline_reads)


def test_the_list_filters_by_pipeline_state_and_refuses_a_bad_cursor(browser, succeeded):
    assert succeeded.display_name in browser.get(LIST, {"state": "PIPELINE_STATE_SUCCEEDED"}).content.decode()
    assert "No training pipelines match" in browser.get(LIST, {"state": "PIPELINE_STATE_FAILED"}).content.decode()
    response = browser.get(LIST, {"cursor": "garbage"})
    assert response.status_code == 200 and "not a link from a previous page" in response.content.decode()


def test_a_pipelines_page_names_its_job_the_registered_model_and_stops_polling_once_ended(browser, succeeded):
    html = browser.get(f"{COLLECTION}/{succeeded.pipeline_id}/").content.decode()
    assert "projects/alpha/locations/us-central1/models/" in html and "version 1" in html
    assert succeeded.custom_job.job_id in html and "Custom job" in html
    assert 'hx-trigger="every 2s"' not in html
    assert "Cancel pipeline" not in html


def test_a_tuning_pipeline_links_its_study_and_its_model_shows_the_best_metric(
        browser, cast, nodes, now, django_capture_on_commit_callbacks):
    pipeline = create(cast, now, tuning_pipeline(), django_capture_on_commit_callbacks)
    live = browser.get(f"{COLLECTION}/{pipeline.pipeline_id}/").content.decode()
    assert f"tuning job <a class=\"mono\" href=\"/projects/alpha/locations/us-central1/hyperparameterTuningJobs/" \
           f"{pipeline.tuning_job.job_id}/\">" in live
    assert "2 trials, 2 at once" in live and 'hx-trigger="every 2s"' in live and "Cancel pipeline" in live
    for trial, score in zip(pipeline.tuning_job.trials.select_related("custom_job"), (0.3, 0.9)):
        with django_capture_on_commit_callbacks(execute=True):
            finish_job(trial.custom_job, later(now, 10), reports=hypertune_reports("score", [(1, score)]),
                       model_files=[{"path": "m.bin", "sizeBytes": 1}])
    status = browser.get(f"{COLLECTION}/{pipeline.pipeline_id}/status").content.decode()
    assert "SUCCEEDED" in status and "score = <span class=\"mono\">0.9</span>" in status


def test_the_create_form_starts_from_a_working_example_and_creates_the_pipeline(browser, cast, nodes):
    page = browser.get("/pipelines/new", follow=True)
    assert page.redirect_chain[-1][0] == f"{COLLECTION}/new"
    assert "fit-quadratic" in page.content.decode()
    response = browser.post(f"{COLLECTION}/new", {"document": PIPELINE_EXAMPLE})
    pipeline = TrainingPipeline.objects.get()
    assert response.status_code == 302 and response["Location"] == f"{COLLECTION}/{pipeline.pipeline_id}/"
    assert pipeline.display_name == "fit-quadratic" and pipeline.custom_job is not None
    assert pipeline.created_by == cast["uma"]


@pytest.mark.parametrize("document, message", [
    ("displayName: [unclosed", "This is not valid YAML or JSON (line 1"),
    ("- a list", "Write one TrainingPipeline object"),
    ('{"displayName": "x", "trainingTaskDefinition": "gs://elsewhere/task.yaml", "trainingTaskInputs": {}}',
     "trainingTaskDefinition: "),
])
def test_the_create_form_shows_what_is_wrong_and_keeps_the_text(browser, cast, nodes, document, message):
    response = browser.post(f"{COLLECTION}/new", {"document": document})
    html = response.content.decode()
    assert response.status_code == 200 and message in html and "The pipeline was not created" in html
    assert not TrainingPipeline.objects.exists()


def test_cancel_from_the_page_cancels_the_job_it_runs(browser, cast, nodes, now, django_capture_on_commit_callbacks):
    pipeline = create(cast, now, custom_pipeline(), django_capture_on_commit_callbacks)
    response = browser.post(f"{COLLECTION}/{pipeline.pipeline_id}/cancel")
    assert response.status_code == 302
    pipeline.refresh_from_db()
    assert pipeline.state in ("PIPELINE_STATE_CANCELLING", "PIPELINE_STATE_CANCELLED")
    assert pipeline.custom_job.state in ("JOB_STATE_CANCELLING", "JOB_STATE_CANCELLED")
    assert "Cancel pipeline" not in browser.get(f"{COLLECTION}/{pipeline.pipeline_id}/").content.decode()


def test_viewers_see_but_cannot_create_or_cancel_and_strangers_get_404(
        client, cast, nodes, now, django_capture_on_commit_callbacks):
    pipeline = create(cast, now, custom_pipeline("alphas-secret-fit"), django_capture_on_commit_callbacks)
    client.force_login(cast["vic"])
    page = client.get(f"{COLLECTION}/{pipeline.pipeline_id}/")
    assert page.status_code == 200 and "Cancel pipeline" not in page.content.decode()
    assert client.post(f"{COLLECTION}/{pipeline.pipeline_id}/cancel").status_code == 403
    assert client.get(f"{COLLECTION}/new").status_code == 403
    client.force_login(cast["mallory"])
    assert client.get(f"{COLLECTION}/{pipeline.pipeline_id}/").status_code == 404
    assert pipeline.display_name not in client.get(LIST).content.decode()


def test_the_cancel_form_needs_its_csrf_token(cast, nodes, now, django_capture_on_commit_callbacks):
    pipeline = create(cast, now, custom_pipeline(), django_capture_on_commit_callbacks)
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(cast["uma"])
    assert browser.post(f"{COLLECTION}/{pipeline.pipeline_id}/cancel").status_code == 403
    pipeline.refresh_from_db()
    assert not pipeline.is_terminal
