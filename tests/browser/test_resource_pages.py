"""An admin creates a persistent resource through the form in a real browser, watches its pool
view fill in live as a job starts on it, sees the utilisation chart drawn by plotly.js, then
presses each of the page's buttons once: resize, reboot, delete."""

import pytest
from django.utils import timezone

from tests.browser.conftest import answering_confirm
from tests.resources.conftest import submit, t4_job
from trainhub.resources.models import PersistentResource
from trainhub.scheduling.services import scheduler_pass

pytestmark = pytest.mark.django_db(transaction=True)


def test_an_admin_creates_a_resource_a_job_runs_on_then_resizes_reboots_and_deletes_it(page, live_server, login,
                                                                                        screenshot, cast,
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

    page.locator("form[action$='/resize'] [name$='-replica_count']").fill("3")
    page.get_by_role("button", name="Resize").click()
    page.get_by_text("Resizing seed-pool").wait_for()
    resource = PersistentResource.objects.get(resource_id="seed-pool")
    assert resource.pools.get().replica_count == 3
    page.get_by_role("button", name="Reboot").click()
    page.get_by_text("Rebooting seed-pool").wait_for()
    assert resource.operations.filter(kind="REBOOT").exists()
    with answering_confirm(page, "Delete persistent resource seed-pool?", accept=False):
        page.get_by_role("button", name="Delete").click()
    assert resource.operations.filter(kind="DELETE").count() == 0 and "/persistent-resources/seed-pool/" in page.url
    with answering_confirm(page, "Delete persistent resource seed-pool?"):
        page.get_by_role("button", name="Delete").click()
    page.wait_for_url("**/persistent-resources/")
    page.get_by_text("Deleting seed-pool").wait_for()
    resource.refresh_from_db()
    assert resource.state in ("STOPPING", "DELETED") or not PersistentResource.objects.filter(pk=resource.pk).exists()
