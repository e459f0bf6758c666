"""A researcher and an admin use trainhub in a real browser: log in, submit a job through the
form and watch it reach SUCCEEDED live, cancel one, edit a quota, get refused as a viewer.

The scheduler and the node agent are stepped from the test (tick / scheduler_pass) while the
page polls on its own, so what the test waits for is the page updating without a reload."""

import re
import time

import pytest
from django.utils import timezone

from tests.agent.test_end_to_end import make_agent
from tests.browser.conftest import answering_confirm
from trainhub.jobs.models import CustomJob
from trainhub.scheduling.models import Quota
from trainhub.scheduling.services import scheduler_pass

pytestmark = pytest.mark.django_db(transaction=True)


def drive_until(page, agent, text, seconds=30):
    """Step scheduler + agent in real time until the page shows ``text`` by itself (bounded)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        agent.tick(now=timezone.now())
        scheduler_pass(now=timezone.now())
        if page.get_by_text(text, exact=False).count():
            return
        page.wait_for_timeout(300)
    raise AssertionError(f"the page never showed {text!r}")


def submit_through_form(page, live_server, name, command, args):
    page.goto(f"{live_server.url}/projects/alpha/locations/us-central1/jobs/new")
    page.fill("[name=display_name]", name)
    page.select_option("[name=pool0-machine_type]", "n1-standard-4")
    page.fill("[name=pool0-image_uri]", "python:3.11")
    page.fill("[name=pool0-command]", command)
    page.fill("[name=pool0-args]", args)
    page.get_by_role("button", name="Submit job").click()
    page.wait_for_load_state()
    assert re.search(r"/jobs/\d+/$", page.url), page.inner_text("main")[:2000]
    return CustomJob.objects.get(display_name=name)


def test_a_job_submitted_in_the_form_reaches_succeeded_live(page, live_server, login, cast, nodes, tmp_path,
                                                            screenshot):
    login("uma")
    screenshot("job-list-empty")
    page.goto(f"{live_server.url}/projects/alpha/locations/us-central1/jobs/new")
    screenshot("submit-form")
    offered = page.locator("[name=pool0-machine_type] option").count()
    page.get_by_role("link", name="Show the whole catalog").click()  # past this location's machine types
    page.wait_for_url("**/jobs/new?catalog=1")
    assert page.locator("[name=pool0-machine_type] option").count() > offered
    page.get_by_role("link", name=re.compile("^Only the types")).click()
    page.wait_for_url("**/jobs/new?")
    assert page.locator("[name=pool0-machine_type] option").count() == offered
    page.goto(f"{live_server.url}/projects/alpha/locations/us-central1/jobs/new")
    page.fill("[name=pool0-command]", "python3 -c \"print('hello from the browser')\"")
    page.locator("#pool0-argv li").nth(2).wait_for()  # the argument list, shown before submit
    assert page.locator("#pool0-argv li").all_inner_texts() == ["python3", "-c", "print('hello from the browser')"]
    screenshot("submit-form-argv")
    job = submit_through_form(page, live_server, "browser-hello", "python3 -c \"print('hello from the browser')\"", "")
    assert page.get_by_text("browser-hello").count()
    drive_until(page, make_agent(tmp_path), "SUCCEEDED")
    page.get_by_text("hello from the browser").first.wait_for()
    screenshot("job-detail-succeeded")
    page.select_option("[name=task]", "workerpool0-0")  # the log's task picker
    page.get_by_role("button", name="Show").click()
    page.wait_for_url("**?task=workerpool0-0#logs")
    page.locator("#log-lines").get_by_text("hello from the browser").wait_for()
    job.refresh_from_db()
    assert job.state == "JOB_STATE_SUCCEEDED"
    page.goto(f"{live_server.url}/?tab=finished")
    page.get_by_text("browser-hello").first.wait_for()


def test_a_running_job_is_cancelled_from_its_page(page, live_server, login, cast, nodes, tmp_path, screenshot):
    login("uma")
    job = submit_through_form(page, live_server, "browser-sleeper", "sleep", "60")
    agent = make_agent(tmp_path)
    drive_until(page, agent, "RUNNING")
    with answering_confirm(page, f"Cancel job {job.display_name}?"):
        page.get_by_role("button", name=re.compile("cancel", re.I)).first.click()
    drive_until(page, agent, "CANCELLED")
    screenshot("job-detail-cancelled")
    job.refresh_from_db()
    assert job.state == "JOB_STATE_CANCELLED"


def test_an_admin_edits_a_quota(page, live_server, login, cast, screenshot):
    cast["alice"].is_staff = True
    cast["alice"].save()
    login("alice")
    page.goto(f"{live_server.url}/quotas/")
    page.select_option("[name=project]", "alpha")
    page.fill("[name=location]", "us-central1")
    page.select_option("[name=metric]", "custom_model_training_nvidia_a100_gpus")
    page.fill("[name=limit]", "16")
    page.get_by_role("button", name="Save limit").click()
    page.get_by_text("custom_model_training_nvidia_a100_gpus for alpha in us-central1 set to 16").wait_for()
    screenshot("quotas")
    assert Quota.objects.get().limit == 16


def test_a_viewer_is_refused_the_submit_form(page, live_server, login, cast, screenshot):
    page.goto(f"{live_server.url}/login/")
    screenshot("login")
    login("vic")
    page.goto(f"{live_server.url}/account/token")
    screenshot("api-token")
    response = page.goto(f"{live_server.url}/projects/alpha/locations/us-central1/jobs/new")
    assert response.status == 403
    screenshot("viewer-refused")
