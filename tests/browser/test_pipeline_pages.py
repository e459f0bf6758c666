"""A researcher creates a training pipeline from the form in a real browser, watches its page turn
SUCCEEDED live when its job ends, and finds the model it registered in the model registry."""

import pytest
from django.utils import timezone

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
