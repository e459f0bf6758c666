"""A project's team page: its GPUs running and waiting by type over time, why each of its waiting
jobs waits, its quota use and its cost so far this month, for its members only."""

import csv
import datetime as dt
import io

import pytest
from django.utils import timezone

from tests.conftest import later
from tests.dashboards.test_samples import run_on, t4_job
from tests.dashboards.test_views import figure_of
from tests.slurm.conftest import accounts, admin, cluster, make_job, slurm_pools, start_job  # noqa: F401 - fixtures
from tests.jobs.test_views import submit
from trainhub.dashboards.sources import JobSpan
from trainhub.dashboards.team import bucket_peaks
from trainhub.scheduling.services import quota_set

TEAM = "/dashboards/team/alpha/"


def team_csv(client, key, **params):
    response = client.get(f"{TEAM}charts/{key}.csv", params)
    assert response.status_code == 200 and response["Content-Type"].startswith("text/csv")
    return list(csv.DictReader(io.StringIO(response.content.decode())))


@pytest.fixture
def team(cast, nodes, now, monkeypatch):
    """alpha: a 4-T4 job running for the last 30 minutes, a 2-T4 job waiting for 10; beta: one waiting."""
    monkeypatch.setattr(timezone, "now", lambda: now)
    runner = t4_job(cast, later(now, -1900), name="runner", gpus=4)
    run_on(runner, nodes["t4"].nodes.first(), later(now, -1800))
    waiting = t4_job(cast, later(now, -600), name="stuck", gpus=2)
    submit(cast["beta"], cast["mallory"], name="beta-job", now=later(now, -60))
    return {"runner": runner, "waiting": waiting}


def test_a_member_sees_the_team_page_and_a_stranger_gets_404(client, cast, team):
    client.force_login(cast["vic"])
    page = client.get(TEAM).content.decode()
    for key in ("team-gpus", "team-waiting", "team-quota", "team-cost"):
        assert f'id="chart-{key}"' in page
    assert 'href="/dashboards/team/alpha/?range=24h"' in client.get("/dashboards/").content.decode()
    client.force_login(cast["mallory"])
    assert client.get(TEAM).status_code == 404
    assert client.get(f"{TEAM}charts/team-gpus").status_code == 404


def test_gpus_running_and_waiting_by_type_over_the_range(client, cast, team):
    client.force_login(cast["vic"])
    rows = team_csv(client, "team-gpus", range="1h")
    assert {row["gpu_type"] for row in rows} == {"NVIDIA_TESLA_T4"}
    assert (rows[-1]["running_gpus"], rows[-1]["waiting_gpus"]) == ("4", "2")
    assert (rows[0]["running_gpus"], rows[0]["waiting_gpus"]) == ("0", "0")  # an hour ago: nothing yet
    figure = figure_of(client.get(f"{TEAM}charts/team-gpus?range=1h"))
    assert figure["layout"]["yaxis"]["title"]["text"] == "GPUs running"
    assert figure["layout"]["yaxis2"]["title"]["text"] == "GPUs waiting"
    start, end = (dt.datetime.fromisoformat(edge) for edge in figure["layout"]["xaxis"]["range"])
    assert end - start == dt.timedelta(hours=1)
    assert [trace["name"] for trace in figure["data"] if trace.get("showlegend", True)] == ["T4"]


def test_why_our_jobs_wait_lists_only_this_projects_waiting_jobs(client, cast, team):
    client.force_login(cast["alice"])
    rows = team_csv(client, "team-waiting")
    assert [row["name"] for row in rows] == ["stuck"]


def test_quota_use_and_the_cost_so_far_this_month(client, cast, team, now):
    quota_set(project=cast["alpha"], location="us-central1", metric="custom_model_training_nvidia_t4_gpus", limit=8,
              actor="alice")
    client.force_login(cast["vic"])
    [quota] = team_csv(client, "team-quota")
    assert (quota["in_use_gpus"], quota["limit_gpus"]) == ("4", "8")
    [cost] = team_csv(client, "team-cost")
    hours = min(1800, (now - now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)).total_seconds()) / 3600
    assert cost["gpu_type"] == "NVIDIA_TESLA_T4" and float(cost["gpu_hours"]) == pytest.approx(4 * hours, abs=0.01)
    assert float(cost["cost_usd"]) > 0
    content = client.get(f"{TEAM}charts/team-cost").content.decode()
    assert f"so far in {now:%B %Y}" in content


def test_empty_charts_say_why(client, cast):
    client.force_login(cast["vic"])
    assert "No job of project alpha asked for GPUs in the last 24 hours" in client.get(
        f"{TEAM}charts/team-gpus").content.decode()
    assert "No job of project alpha is waiting" in client.get(f"{TEAM}charts/team-waiting").content.decode()
    assert "No quota limit is set for project alpha" in client.get(f"{TEAM}charts/team-quota").content.decode()
    assert "Nothing billed in" in client.get(f"{TEAM}charts/team-cost").content.decode()


def test_the_cost_so_far_this_month_counts_the_projects_slurm_jobs_at_the_on_demand_price(
        client, cast, accounts, now, monkeypatch):  # noqa: F811
    from trainhub.catalog.pricing import DEFAULT_ON_DEMAND_PER_GPU_HOUR

    monkeypatch.setattr(timezone, "now", lambda: now)
    began = max(later(now, -3600), now.replace(day=1, hour=0, minute=0, second=0, microsecond=0))
    job = make_job(accounts, gpus_per_node=8, num_nodes=1, now=later(began, -60))
    start_job(job, ["a4-0"], now=began)
    client.force_login(cast["vic"])
    [cost] = team_csv(client, "team-cost")
    hours = (now - began).total_seconds() / 3600
    assert (cost["gpu_type"], cost["strategy"], cost["jobs"]) == ("NVIDIA_B200", "SLURM", "1")
    assert float(cost["gpu_hours"]) == pytest.approx(8 * hours, abs=0.01)
    assert float(cost["cost_usd"]) >= 8 * hours * DEFAULT_ON_DEMAND_PER_GPU_HOUR["NVIDIA_B200"] - 0.01
    figure = figure_of(client.get(f"{TEAM}charts/team-cost"))
    assert [trace["name"] for trace in figure["data"]] == ["Slurm jobs, at the on-demand price"]
    assert figure["data"][0]["x"] == ["B200"]


def test_a_job_shorter_than_a_bucket_shows_at_its_peak_and_jobs_one_after_another_do_not_add_up():
    start = dt.datetime(2026, 12, 5, tzinfo=dt.UTC)
    step = dt.timedelta(minutes=12)  # the 24 h range's 120 buckets
    moments = [start + step * (index + 1) for index in range(3)]
    at = lambda minutes: start + dt.timedelta(minutes=minutes)  # noqa: E731
    spans = [JobSpan("NVIDIA_B200", 8, at(13), at(14), at(15)),  # waits a minute, runs a minute, in bucket 2
             JobSpan("NVIDIA_B200", 4, at(1), at(1), at(3)), JobSpan("NVIDIA_B200", 4, at(5), at(5), at(7))]
    assert bucket_peaks(spans, moments, step, until=at(48)) == [(4, 0), (8, 8), (0, 0)]
