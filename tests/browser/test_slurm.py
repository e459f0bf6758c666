"""Slurm pages in a real browser: submit through the form, the queue, the cluster page, and a job's
priority breakdown whose Plotly chart draws. Screenshots to artifacts/screenshots/slurm-*.png."""

import datetime as dt

import pytest

from tests.slurm.conftest import accounts, admin, cluster, run_pass, slurm_pools  # noqa: F401 - fixtures
from trainhub.inventory.models import Node, NodeState
from trainhub.slurm.models import SlurmJob

pytestmark = pytest.mark.django_db(transaction=True)
BASE = "/slurm/projects/alpha/locations/us-central1/clusters/c1"


def test_submit_queue_and_priority_pages(page, login, live_server, screenshot, accounts):  # noqa: F811
    Node.objects.filter(name__startswith="a4").update(state=NodeState.DRAIN, state_reason="maintenance")
    login("uma")
    page.goto(f"{live_server.url}{BASE}/jobs/new")
    page.fill("[name=gpus_per_node]", "8")
    page.fill("[name=time]", "1:00:00")
    page.fill("[name=wrap]", "python train.py")
    screenshot("slurm-submit")
    page.click("form.job-form button[type=submit]")
    page.wait_for_selector("text=Submitted batch job")
    job = SlurmJob.objects.get()
    run_pass(accounts, dt.datetime.now(dt.UTC))
    page.goto(f"{live_server.url}{BASE}/queue")
    assert "(Resources)" in page.inner_text("#report-output")
    screenshot("slurm-queue")
    page.goto(f"{live_server.url}{BASE}/priority")
    page.click(f"#report-output a:text-is('{job.job_id}')")
    page.wait_for_selector("[data-plotly-figure] .main-svg")
    screenshot("slurm-priority")
    page.goto(f"{live_server.url}{BASE}/")
    assert "maintenance" in page.inner_text("main")
    screenshot("slurm-cluster")
