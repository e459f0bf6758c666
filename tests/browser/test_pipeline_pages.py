"""A researcher creates a training pipeline from the form in a real browser, watches its page turn
SUCCEEDED live when its job ends, and finds the model it registered in the model registry; another
pipeline is cancelled from its page and found with the list's filters."""

import re

import pytest
from django.utils import timezone

from tests.browser.conftest import answering_confirm, apply_state_filter
from tests.tuning.helpers import finish_job
from trainhub.tuning.models import TrainingPipeline

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_pipeline_created_in_the_browser_registers_its_model(page, live_server, login, screenshot, cast, nodes):
    login("uma")
    page.get_by_role("link", name="Pipelines").click()
    page.get_by_role("link", name="New pipeline").click()
    page.wait_for_url("**/trainingPipelines/new")
    screenshot("pipeline-create")
    page.get_by_role("button", name="Create pipeline").click()
    page.wait_for_url("**/trainingPipelines/*/")
    page.get_by_text("QUEUED").first.wait_for()

    pipeline = TrainingPipeline.objects.get()
    finish_job(pipeline.custom_job, timezone.now(), model_files=[{"path": "model.txt", "sizeBytes": 3}])
    page.locator("#registered-model a").wait_for()  # the status fragment polled the success in
    assert "SUCCEEDED" in page.locator("#pipeline-status").inner_text()
    screenshot("pipeline-detail")

    page.locator("#registered-model a").click()
    page.get_by_role("heading", name="Model registry").wait_for()
    assert "model.txt" in page.locator("main").inner_text()
    screenshot("model-registry")
    page.get_by_role("link", name="Pipelines").click()
    page.get_by_text("fit-quadratic").wait_for()
    screenshot("pipeline-list")


def test_a_pipeline_is_cancelled_from_its_page_and_found_by_the_list_filters(page, live_server, login, cast,
                                                                            nodes):
    login("uma")
    page.goto(f"{live_server.url}/pipelines/new")
    page.get_by_role("button", name="Create pipeline").click()
    page.wait_for_url("**/trainingPipelines/*/")
    with answering_confirm(page, "Cancel pipeline fit-quadratic?"):
        page.get_by_role("button", name="Cancel pipeline").click()
    page.get_by_text("Cancel requested for fit-quadratic.").wait_for()
    pipeline = TrainingPipeline.objects.get()
    assert pipeline.custom_job.state in ("JOB_STATE_CANCELLING", "JOB_STATE_CANCELLED")
    page.locator("#pipeline-status").get_by_text(re.compile("CANCELL(ING|ED)")).first.wait_for()  # agents stop it
    assert page.get_by_role("button", name="Cancel pipeline").count() == 0

    page.get_by_role("navigation", name="Main").get_by_role("link", name="Pipelines").click()
    apply_state_filter(page, "PIPELINE_STATE_SUCCEEDED")
    assert page.locator("#pipeline-rows").get_by_text("fit-quadratic").count() == 0
    pipeline.refresh_from_db()
    apply_state_filter(page, pipeline.state)
    page.locator("#pipeline-rows").get_by_text("fit-quadratic").wait_for()
