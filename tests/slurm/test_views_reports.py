"""The queue, priority, fair-share and accounting pages show the commands' text; a job's priority
page explains each factor and draws the queue's contributions with Plotly."""

import pytest

BASE = "/slurm/projects/alpha/locations/us-central1/clusters/c1"


@pytest.fixture
def browser(client, cast):
    client.force_login(cast["vic"])
    return client


def test_each_report_page_shows_its_commands_text(browser, queue):
    assert "JOBID PARTITION     NAME     USER ST" in browser.get(f"{BASE}/queue").content.decode()
    priority = browser.get(f"{BASE}/priority").content.decode()
    assert "JOBID PARTITION   PRIORITY       SITE        AGE  FAIRSHARE" in priority
    assert f'<a href="{BASE}/jobs/1/priority">1</a> a4' in priority
    assert "RawShares  NormShares" in browser.get(f"{BASE}/fairshare", {"all": "on"}).content.decode()
    assert "AllocCPUS" in browser.get(f"{BASE}/accounting", {"allusers": "on"}).content.decode()


def test_flags_reach_the_command(browser, queue):
    text = browser.get(f"{BASE}/priority", {"weights": "on"}).content.decode()
    assert "Weights" in text


def test_the_job_priority_page_explains_each_factor(browser, queue):
    page = browser.get(f"{BASE}/jobs/1/priority")
    assert page.status_code == 200
    lines = {line.name: line for line in page.context["lines"]}
    assert lines["fairshare"].contribution == pytest.approx(10000 / 3)
    assert lines["age"].why.startswith("eligible since") and "PriorityMaxAge 7-00:00:00" in lines["age"].why
    assert "Fair Tree for uma@ml" in lines["fairshare"].why
    figure = page.context["figure"]
    assert {trace["name"] for trace in figure["data"]} == {"age", "fairshare"}
    assert figure["data"][1]["x"][0] == "3"  # highest priority first: bob's job
    body = page.content.decode()
    assert 'data-plotly-figure="priority-figure"' in body and "vendor/plotly.min.js" in body


def test_report_pages_are_for_members_only(client, cast, queue):
    client.force_login(cast["mallory"])
    for page in ("queue", "priority", "fairshare", "accounting", "jobs/1/priority"):
        assert client.get(f"{BASE}/{page}").status_code == 404
