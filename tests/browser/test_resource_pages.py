"""An admin creates a persistent resource through the form in a real browser, watches its pool
view fill in live as a job starts on it, and sees the utilisation chart drawn by plotly.js."""

import pytest
from django.utils import timezone

from tests.resources.conftest import submit, t4_job
from trainhub.scheduling.services import scheduler_pass

pytestmark = pytest.mark.django_db(transaction=True)


def test_an_admin_creates_a_resource_and_watches_a_job_start_on_it(page, live_server, login, screenshot, cast,
                                                                     nodes):
    login("alice")
    page.goto(f"{live_server.url}/persistent-resources/")
    page.get_by_role("link", name="Create resource").click()
    page.fill("[name=resource_id]", "seed-pool")
    page.fill("[name=display_name]", "Seed pool")
    page.select_option("[name=pool0-machine_type]", "n1-standard-4")
    page.select_option("[name=pool0-accelerator_type]", "NVIDIA_TESLA_T4")
    page.select_option("[name=pool0-accelerator_count]", "1")
    page.fill("[name=pool0-replica_count]", "2")
    screenshot("resource-create")
    page.get_by_role("button", name="Create resource").click()
    page.wait_for_url("**/persistent-resources/seed-pool/")
    page.get_by_text("RUNNING").first.wait_for()  # the operation ran when the create committed

    job = submit(cast, timezone.now(), t4_job(resource_id="seed-pool"))
    scheduler_pass(now=timezone.now())
    page.locator(f"a[href*='/jobs/{job.job_id}/']").first.wait_for()  # the status fragment polled it in
    page.locator("#resource-chart .js-plotly-plot").wait_for()
    screenshot("resource-detail")
