"""The queue, priority, fair-share and accounting pages show the commands' text; a job's priority
page explains each factor and draws the queue's contributions with Plotly."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from tests.plotting import assert_drawn_as_graph_objects_would

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


def test_accounting_reads_only_the_columns_its_records_show(browser, queue):
    """A job's script, environment and priority factors stay in the database: a third of the columns."""
    with CaptureQueriesContext(connection) as captured:
        page = browser.get(f"{BASE}/accounting", {"allusers": "on", "format": "JobID,JobName,State,Elapsed,NodeList"})
    assert page.status_code == 200 and "JobName" in page.content.decode()
    job_reads = [query["sql"] for query in captured.captured_queries if 'FROM "slurm_slurmjob"' in query["sql"]]
    assert job_reads and all('"script"' not in sql and '"factor_tres"' not in sql for sql in job_reads)


def test_flags_reach_the_command(browser, queue):
    text = browser.get(f"{BASE}/priority", {"weights": "on"}).content.decode()
    assert "Weights" in text


def test_the_queue_page_takes_squeue_o_and_O(browser, queue):
    text = browser.get(f"{BASE}/queue", {"format": "%i|%B|%o"}).content.decode()
    assert "JOBID|EXEC_HOST|COMMAND" in text and "|n/a|(null)" in text
    text = browser.get(f"{BASE}/queue", {"outputFormat": "JobID:6,BatchFlag:11,CPUFreq"}).content.decode()
    assert "JOBID BATCH_FLAG " in text
    assert "squeue: error: Invalid job format specification: CPUFreq" in text


def test_the_job_priority_page_explains_each_factor(browser, queue):
    page = browser.get(f"{BASE}/jobs/1/priority")
    assert page.status_code == 200
    lines = {line.name: line for line in page.context["lines"]}
    assert lines["fairshare"].contribution == pytest.approx(10000 / 4)  # 1 of 4 user associations (root first)
    assert lines["age"].why.startswith("eligible since") and "PriorityMaxAge 7-00:00:00" in lines["age"].why
    assert "Fair Tree for uma@ml" in lines["fairshare"].why
    figure = page.context["figure"]
    assert_drawn_as_graph_objects_would(figure)
    assert {trace["name"] for trace in figure["data"]} == {"age", "fairshare"}
    assert figure["data"][1]["x"][0] == "3"  # highest priority first: bob's job
    body = page.content.decode()
    assert 'data-plotly-figure="priority-figure"' in body and "vendor/plotly.min.js" in body


def test_a_started_jobs_priority_page_says_why_it_draws_no_queue(browser, queue):
    from trainhub.slurm.models import JobState, SlurmJob

    SlurmJob.objects.filter(cluster=queue["uma"].cluster).update(state=JobState.COMPLETED)
    page = browser.get(f"{BASE}/jobs/1/priority")
    body = page.content.decode()
    assert page.context["breakdown"] and page.context["figure"] is None  # its last factors, no empty axes
    assert "No job is pending on the cluster now, so there is no queue to compare with" in body
    assert "data-plotly-figure" not in body and "plotly.min.js" not in body
    assert "computed <time datetime=" in body


def test_report_pages_are_for_members_only(client, cast, queue):
    client.force_login(cast["mallory"])
    for page in ("queue", "priority", "fairshare", "accounting", "jobs/1/priority"):
        assert client.get(f"{BASE}/{page}").status_code == 404


def _linked_jobs(page) -> list[str]:
    return [job_id for job_id in ("1", "2", "3") if f"/jobs/{job_id}/" in page.context["output"]]


@pytest.mark.parametrize(("page", "query"), [("priority", {}), ("queue", {}), ("accounting", {"allusers": "on"}),
                                             ("accounting", {"allusers": "on", "state": "PD"})])
def test_long_outputs_are_shown_a_page_of_jobs_at_a_time_with_the_total(browser, queue, monkeypatch, page, query):
    from trainhub.slurm.views import reports

    monkeypatch.setattr(reports, "PAGE_LINES", 2)
    first = browser.get(f"{BASE}/{page}", query)
    assert first.context["pager"]["total"] == 3 and first.context["pager"]["previous"] is None
    assert "1–2 of 3" in first.content.decode()
    second = browser.get(f"{BASE}/{page}" + first.context["pager"]["next"])
    assert (second.context["pager"]["first"], second.context["pager"]["last"]) == (3, 3)
    assert second.context["pager"]["next"] is None and "offset=0" in second.context["pager"]["previous"]
    assert len(_linked_jobs(first)) == 2 and len(_linked_jobs(second)) == 1
    assert set(_linked_jobs(first) + _linked_jobs(second)) == {"1", "2", "3"}


def test_the_sprio_api_still_prints_every_job(api, queue, monkeypatch):
    from trainhub.slurm.views import reports

    monkeypatch.setattr(reports, "PAGE_LINES", 2)
    text = api("vic").get("/v1/projects/alpha/locations/us-central1/slurmClusters/c1/sprio").json()["text"]
    assert [line.split()[0] for line in text.splitlines()[1:]] == ["1", "2", "3"]


@pytest.mark.parametrize("offset", ["abc", "-2", "99999999999", "1", "\u00b2"])
def test_a_bad_or_odd_offset_shows_a_page_not_an_error(browser, queue, offset):
    page = browser.get(f"{BASE}/priority", {"offset": offset})
    assert page.status_code == 200
    assert page.context["pager"] is None and len(_linked_jobs(page)) == 3  # rounded down to the first page



@pytest.mark.parametrize("query", [{}, {"start": "on"}, {"states": "PD"}, {"states": "R"}, {"long": "on"}])
def test_the_queue_pages_put_together_are_squeues_whole_output(browser, api, queue, monkeypatch, query):
    from trainhub.slurm.views import reports

    monkeypatch.setattr(reports, "PAGE_LINES", 1)
    api_query = {key: "true" if value == "on" else value for key, value in query.items()}
    text = api("vic").get("/v1/projects/alpha/locations/us-central1/slurmClusters/c1/squeue", api_query).json()["text"]
    whole = [line.split()[0] for line in text.splitlines()[1:]]
    paged = [_linked_jobs(browser.get(f"{BASE}/queue", {**query, "offset": str(first)})) for first in range(3)]
    assert [job for jobs in paged for job in jobs] == whole


def test_every_slurm_page_says_the_cluster_is_simulated_and_sinfo_has_one(browser, accounts):
    client = browser
    for page in ("/", "/queue", "/priority", "/fairshare", "/accounting", "/nodes", "/sacctmgr"):
        content = client.get(f"{BASE}{page}").content.decode()
        assert "the nodes of pool(s) a4 are simulated" in content, page
    content = client.get(f"{BASE}/nodes", {"summarize": "on"}).content.decode()
    assert "NODES(A/I/O/T)" in content and "0/2/0/2" in content


def test_the_nodes_page_shows_scontrol_show_node_for_the_nodes_named(browser, accounts):
    """The cluster page's node names link there; an unknown name shows scontrol's line after the
    nodes found, a list scontrol cannot parse its message beside the form (a 400)."""
    assert f'<a href="{BASE}/nodes?node=a4-1" title="scontrol show node a4-1">a4-1</a>' in (
        browser.get(f"{BASE}/").content.decode())
    content = browser.get(f"{BASE}/nodes", {"node": "a4-1,gpu9"}).content.decode()
    assert "<code>scontrol show node</code>" in content
    assert "NodeName=a4-1 Arch=x86_64 CoresPerSocket=1 \n   CPUAlloc=0 " in content
    assert "\n\nNode gpu9 not found\n</pre>" in content and "NODES(A/I/O/T)" not in content
    refused = browser.get(f"{BASE}/nodes", {"node": "gpu[2-3]x"})
    assert refused.status_code == 400 and "unable to parse node list gpu[2-3]x" in refused.content.decode()


def test_the_cluster_list_marks_a_simulated_cluster(browser, accounts):
    assert '<span class="badge" title="Some of its nodes are simulated' in browser.get("/slurm/").content.decode()


def test_an_array_tasks_line_links_to_the_task(client, cast, accounts, now):
    from tests.slurm.conftest import run_pass
    from trainhub.slurm.services.jobs import Submission, job_submit

    job_submit(cluster=accounts, user=cast["uma"], submission=Submission(argv=("--array=1-20", "--gres=gpu:8",
                                                                               "--wrap", "true")), now=now)
    run_pass(accounts, now)
    client.force_login(cast["uma"])
    queue = client.get(f"{BASE}/queue").content.decode()
    assert f'<a href="{BASE}/jobs/1_1/">1_1</a>' in queue
    assert f'<a href="{BASE}/jobs/1/">1</a>_[3-20]' in queue
    assert client.get(f"{BASE}/jobs/1_1/").status_code == 200
