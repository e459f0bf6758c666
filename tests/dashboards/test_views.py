"""The dashboard page, its chart fragments and their CSV downloads."""

import csv
import datetime as dt
import io
import json
import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from tests.conftest import later
from tests.dashboards.test_samples import run_on, t4_job
from tests.jobs.test_views import submit
from tests.plotting import assert_drawn_as_graph_objects_would
from trainhub.common.redis import get_redis
from trainhub.dashboards.charts import CHARTS
from trainhub.dashboards.services import samples_record
from trainhub.dashboards.sources import FairShareRow, _fairshare_providers, register_fairshare_provider
from trainhub.iam.roles import VIEWER
from trainhub.iam.services import membership_set, user_ensure
from trainhub.jobs import services
from trainhub.scheduling import working_memory
from trainhub.scheduling.services import quota_set

pytestmark = pytest.mark.django_db

OVERVIEW = reverse("dashboards:overview")


def chart_url(key, **params):
    query = "&".join(f"{name}={value}" for name, value in params.items())
    return reverse("dashboards:chart", args=[key]) + (f"?{query}" if query else "")


def csv_rows(client, key, **params) -> list[dict]:
    response = client.get(reverse("dashboards:chart_csv", args=[key]), params)
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/csv")
    assert re.match(rf'attachment; filename="trainhub-{key}(-\w+)?-\d{{8}}T\d{{4}}Z\.csv"',
                    response["Content-Disposition"])
    return list(csv.DictReader(io.StringIO(response.content.decode())))


def figure_of(response) -> dict:
    match = re.search(r'<script type="application/json" class="chart__figure">(.*?)</script>',
                      response.content.decode(), re.S)
    assert match, response.content.decode()[:2000]
    figure = json.loads(match.group(1))
    assert_drawn_as_graph_objects_would(figure)
    return figure


@pytest.fixture
def history(cast, nodes, now, monkeypatch):
    """An hour of samples: a T4 job waiting from the start, one running from minute 10. The pages
    read the clock the hour was written against, so a test crossing a minute boundary sees the
    same sixty buckets."""
    start = now.replace(second=0) - dt.timedelta(minutes=60)
    # Two seconds after the last sample, whatever second of the minute the test began in.
    monkeypatch.setattr(timezone, "now", lambda: later(start, 3600 + 2))
    waiting = t4_job(cast, start, name="stuck-t4", gpus=4)
    samples_record(now=start)
    running = t4_job(cast, later(start, 60), name="runner")
    for minute in range(1, 61):
        if minute == 10:
            run_on(running, nodes["t4"].nodes.first(), later(start, 600))
        samples_record(now=later(start, minute * 60 + 1))
    return {"waiting": waiting, "running": running}


# Access -------------------------------------------------------------------------------------

def test_every_dashboard_url_sends_anonymous_visitors_to_login(client):
    for url in (OVERVIEW, reverse("dashboards:kpis"), chart_url("queue-depth"),
                reverse("dashboards:chart_csv", args=["queue-depth"])):
        response = client.get(url)
        assert response.status_code == 302 and response["Location"].startswith("/login/"), url


def test_a_user_in_no_project_is_refused(client, cast):
    client.force_login(user_ensure(username="loner", password="loner-password"))
    response = client.get(OVERVIEW)
    assert response.status_code == 403
    assert b"aiplatform.nodes.list" in response.content
    assert client.get(chart_url("queue-depth")).status_code == 403


def test_an_unknown_chart_is_404(client, cast):
    client.force_login(cast["vic"])
    assert client.get(chart_url("nope")).status_code == 404
    assert client.get(reverse("dashboards:chart_csv", args=["nope"])).status_code == 404


# The page -----------------------------------------------------------------------------------

def test_the_page_shows_the_cluster_now_and_a_loading_card_per_chart(client, cast, history):
    client.force_login(cast["vic"])
    response = client.get(OVERVIEW, {"range": "6h"})
    content = response.content.decode()
    assert response.status_code == 200
    assert "vendor/plotly.min.js" in content and "cdn" not in content.lower()
    kpi = response.context["kpi"]
    assert (kpi["gpus_allocated"], kpi["gpus_total"], kpi["running_jobs"], kpi["waiting_jobs"]) == (4, 22, 1, 1)
    assert kpi["started_last_hour"] == 1 and kpi["mean_wait_seconds"] == 540
    for key in CHARTS:
        assert f'hx-get="{chart_url(key, range="6h")}"' in content, key
        assert f'href="{reverse("dashboards:chart_csv", args=[key])}?range=6h"' in content, key
    assert content.count('hx-trigger="load"') == len(CHARTS)
    assert 'aria-current="true">6 hours</a>' in content


def test_the_wall_screen_mode_drops_the_menu_and_draws_on_dark(client, cast, history):
    client.force_login(cast["vic"])
    content = client.get(OVERVIEW, {"wall": "1"}).content.decode()
    assert 'class="wall"' in content and 'class="mainnav"' not in content and "Exit wall screen" in content
    figure = figure_of(client.get(chart_url("queue-depth", wall=1)))
    assert figure["layout"]["font"]["color"] == "#e8edf3"


def test_the_page_and_every_chart_cost_a_fixed_number_of_queries(client, cast, nodes, now,
                                                                  django_assert_max_num_queries):
    client.force_login(cast["alice"])
    samples_record(now=now)
    urls = [OVERVIEW, reverse("dashboards:kpis"), *(chart_url(key) for key in CHARTS)]
    counts = {}
    for url in urls:
        with CaptureQueriesContext(connection) as queries:
            assert client.get(url).status_code == 200
        counts[url] = len(queries)
    for index in range(20):
        t4_job(cast, later(now, -600 + index), name=f"more-{index}")
        quota_set(project=cast["alpha"], location=f"region-{index}", metric="custom_model_training_nvidia_t4_gpus",
                  limit=8, actor="test")
    for minute in range(1, 30):
        samples_record(now=later(now, 60 * minute))
    for url in urls:
        with django_assert_max_num_queries(counts[url]):
            client.get(url)


# Charts -------------------------------------------------------------------------------------

@pytest.mark.parametrize("key", list(CHARTS))
def test_every_chart_draws_a_plotly_figure_or_says_why_not(client, cast, history, key):
    client.force_login(cast["alice"])
    response = client.get(chart_url(key, range="1h"))
    content = response.content.decode()
    assert response.status_code == 200 and "<html" not in content
    assert 'hx-trigger="th-changed from:body throttle:30s"' in content
    if key == "fair-share":
        assert "No Slurm clusters" in content and "chart__figure" not in content
    elif key == "quota-usage":
        assert "No quota limit is set" in content
    else:
        figure = figure_of(response)
        assert figure["data"], key
        assert re.search(r'class="chart__summary"[^>]*>[^<]+\.</p>', content), key


def test_gpu_allocation_shows_each_gpu_type_with_its_pools_and_capacity(client, cast, history):
    client.force_login(cast["vic"])
    figure = figure_of(client.get(chart_url("gpu-allocation", range="1h")))
    titles = [axis["title"]["text"] for name, axis in sorted(figure["layout"].items()) if name.startswith("yaxis")]
    assert titles == ["A100 GPUs", "H100 80GB GPUs", "T4 GPUs"]  # each panel says its unit
    names = [trace["name"] for trace in figure["data"]]
    assert "t4" in names and "capacity" in names
    rows = csv_rows(client, "gpu-allocation", range="1h")
    t4 = [row for row in rows if row["scope"] == "t4"]
    assert len(t4) == 60  # one-minute buckets over the hour
    assert t4[-1]["allocated_gpus"] == "4.0" and t4[0]["allocated_gpus"] == "0.0" and t4[-1]["total_gpus"] == "12.0"


def test_coarser_ranges_average_levels_over_buckets(client, cast, history):
    client.force_login(cast["vic"])
    rows = [row for row in csv_rows(client, "queue-depth", range="24h") if row["gpu_type"] == "NVIDIA_TESLA_T4"]
    assert 4 <= len(rows) <= 5  # the 15-minute blocks of an hour of samples, and the minutes of the one filling
    assert all(float(row["queued_jobs"]) <= 2 for row in rows)
    assert {row["oldest_wait_seconds"] for row in rows} != {"0"}


def test_wait_times_count_started_jobs_by_how_long_they_waited(client, cast, history):
    client.force_login(cast["vic"])
    rows = csv_rows(client, "wait-times", range="1h")
    started = [row for row in rows if row["started_jobs"] != "0"]
    assert len(started) == 1
    assert (started[0]["mean_wait_seconds"], started[0]["waited_1_10m"]) == ("540", "1")
    assert "1 jobs started in the last 1 hour" in client.get(chart_url("wait-times", range="1h")).content.decode()


def test_jobs_by_state_counts_active_jobs_now_and_ended_ones_in_the_range(client, cast, history):
    client.force_login(cast["vic"])
    rows = {(row["state"], row["gpu_type"]): row for row in csv_rows(client, "jobs-by-state", range="1h")}
    assert rows[("JOB_STATE_QUEUED", "NVIDIA_TESLA_T4")]["active_jobs"] == "1"
    assert rows[("JOB_STATE_RUNNING", "NVIDIA_TESLA_T4")]["active_gpus"] == "2"


def test_quota_usage_shows_the_users_projects_against_their_limits(client, cast, history):
    quota_set(project=cast["alpha"], location="us-central1", metric="custom_model_training_nvidia_t4_gpus", limit=8,
              actor="test")
    quota_set(project=cast["beta"], location="us-central1", metric="custom_model_training_nvidia_t4_gpus", limit=1,
              actor="test")
    client.force_login(cast["vic"])
    rows = csv_rows(client, "quota-usage")
    assert rows == [{"project": "alpha", "region": "us-central1", "metric": "custom_model_training_nvidia_t4_gpus",
                     "in_use_gpus": "2", "limit_gpus": "8"}]
    figure = figure_of(client.get(chart_url("quota-usage")))
    assert figure["data"][1]["text"] == ["25%"]
    assert figure["data"][0]["y"] == ["T4"]  # vic's one project goes without saying
    membership_set(project=cast["beta"], user=cast["vic"], role=VIEWER)
    figure = figure_of(client.get(chart_url("quota-usage")))
    assert figure["data"][0]["y"] == ["alpha · T4", "beta · T4"]


def test_why_jobs_wait_lists_the_users_waiting_jobs_with_the_passes_reasons(client, cast, nodes, history):
    waiting = history["waiting"]
    working_memory.waits_write(get_redis(), {waiting.pk: working_memory.WaitExplanation(
        ["Quota custom_model_training_nvidia_t4_gpus is short by 4 GPUs <urgent>."], 3, None, "")})
    submit(cast["beta"], cast["mallory"], name="beta-secret")
    starting = t4_job(cast, waiting.create_time, name="placed-and-starting")
    services.jobs_place(assignments={starting.pk: {(0, 0): (list(nodes["t4"].nodes.all())[1].pk, [0])}},
                        now=waiting.create_time)
    client.force_login(cast["vic"])
    content = client.get(chart_url("waiting-jobs")).content.decode()
    assert "stuck-t4" in content and "beta-secret" not in content and "placed-and-starting" not in content
    assert "is short by 4 GPUs &lt;urgent&gt;." in content  # in the table, escaped
    assert "\\u003curgent\\u003e" in content  # in the figure's JSON, unable to close its <script>
    rows = csv_rows(client, "waiting-jobs")
    assert [(row["name"], row["queue_position"]) for row in rows] == [("stuck-t4", "3")]


def test_fair_share_draws_what_a_slurm_provider_reports(client, cast, monkeypatch):
    monkeypatch.setattr("trainhub.dashboards.sources._fairshare_providers", list(_fairshare_providers))
    register_fairshare_provider(lambda user: [FairShareRow("gpu-cluster", "physics", 0.6, 0.8, 0.3),
                                              FairShareRow("gpu-cluster", "biology", 0.4, 0.2, 0.9)])
    client.force_login(cast["vic"])
    response = client.get(chart_url("fair-share"))
    figure = figure_of(response)
    assert [trace["name"] for trace in figure["data"]] == ["shares", "effective usage"]
    assert "1 of 2 accounts use more than their share." in response.content.decode()
    assert csv_rows(client, "fair-share")[0] == {"cluster": "gpu-cluster", "account": "physics", "user": "",
                                                 "raw_shares": "", "norm_shares": "0.6", "effective_usage": "0.8",
                                                 "fairshare": "0.3"}


def test_charts_without_samples_say_so(client, cast):
    client.force_login(cast["vic"])
    for key in ("gpu-allocation", "queue-depth"):
        assert "No samples yet" in client.get(chart_url(key)).content.decode()
    assert "No job started in the last 24 hours." in client.get(chart_url("wait-times")).content.decode()


# Axes and units at every range ------------------------------------------------------------------

def test_with_one_sample_the_time_axis_spans_an_hour_or_four_buckets_and_the_sample_shows(client, cast, nodes, now,
                                                                                          monkeypatch):
    monkeypatch.setattr(timezone, "now", lambda: now)
    t4_job(cast, now, name="stuck-t4", gpus=4)
    samples_record(now=now)
    client.force_login(cast["vic"])
    for range_key, hours in (("1h", 1), ("24h", 1), ("7d", 8)):
        response = client.get(chart_url("queue-depth", range=range_key))
        figure = figure_of(response)
        start, end = (dt.datetime.fromisoformat(edge) for edge in figure["layout"]["xaxis"]["range"])
        assert end - start == dt.timedelta(hours=hours)  # not a millisecond around the one sample
        assert all("markers" in trace["mode"] for trace in figure["data"])
        assert figure["layout"]["yaxis"]["title"]["text"] == "jobs" and figure["layout"]["yaxis"]["dtick"] == 1
        assert ("The history starts at" in response.content.decode()) == (range_key != "1h")


def test_a_history_shorter_than_the_range_fills_the_chart_from_its_first_sample_and_says_so(client, cast, history,
                                                                                           now):
    client.force_login(cast["vic"])
    for key in ("gpu-allocation", "queue-depth", "wait-times"):
        response = client.get(chart_url(key, range="24h"))
        start, end = (dt.datetime.fromisoformat(edge) for edge in figure_of(response)["layout"]["xaxis"]["range"])
        # The hour of samples in 15-minute buckets, and one bucket before them: not a sliver of a day.
        assert dt.timedelta(minutes=60) <= end - start <= dt.timedelta(minutes=95), key
        assert "The history starts at" in response.content.decode() and "not 24 hours ago" in response.content.decode()
    response = client.get(chart_url("queue-depth", range="1h"))
    start, end = (dt.datetime.fromisoformat(edge) for edge in figure_of(response)["layout"]["xaxis"]["range"])
    assert end - start == dt.timedelta(hours=1) and "The history starts at" not in response.content.decode()


def test_mean_wait_ticks_are_round_numbers_even_for_one_sample(client, cast, nodes, now, monkeypatch):
    # at the minute's start: a start 4.82 s on falls in the minute the sample 61 s on counts (at
    # hh:mm:56 it fell in the next one, which only the next sample counts)
    now = now.replace(second=0)
    monkeypatch.setattr(timezone, "now", lambda: later(now, 120))
    job = t4_job(cast, now, name="quick")
    run_on(job, nodes["t4"].nodes.first(), later(now, 4.82))
    samples_record(now=later(now, 61))
    client.force_login(cast["vic"])
    figure = figure_of(client.get(chart_url("wait-times", range="1h")))
    axis = figure["layout"]["yaxis2"]
    assert axis["title"]["text"] == "mean wait (seconds)"
    mean = next(trace for trace in figure["data"] if trace["name"].startswith("mean wait"))
    (wait,) = [value for value in mean["y"] if value is not None]
    # Ticks at whole seconds, up to four of them past the one mean (Plotly's own: 4.82, 9.64, ...).
    assert axis["range"][0] == 0 and wait <= axis["range"][1] <= wait + 2 * axis["dtick"]
    assert axis["dtick"] in (1, 2, 5) and axis["range"][1] / axis["dtick"] <= 4 and axis["autorange"] is False


def test_mean_wait_is_drawn_in_a_unit_that_reads_well_and_says_which(client, cast, history):
    client.force_login(cast["vic"])
    figure = figure_of(client.get(chart_url("wait-times", range="1h")))
    mean = next(trace for trace in figure["data"] if trace["name"].startswith("mean wait"))
    assert mean["name"] == "mean wait" and figure["layout"]["yaxis2"]["title"]["text"] == "mean wait (minutes)"
    assert [value for value in mean["y"] if value is not None] == [9.0]  # 540 s, not 0.15 of an hour
    assert figure["layout"]["yaxis"]["title"]["text"] == "jobs started"


def test_waiting_jobs_are_labelled_by_a_short_name_and_by_their_id_only_where_names_repeat(client, cast, nodes,
                                                                                          now):
    long_name = "a-very-long-experiment-name-that-goes-on"
    for name in ("twin", "twin", long_name):
        t4_job(cast, now, name=name, gpus=4)  # no scheduler pass: they wait
    client.force_login(cast["vic"])
    (bars,) = figure_of(client.get(chart_url("waiting-jobs")))["data"]
    labels = sorted(bars["y"])
    assert labels[0] == long_name[:23] + "…"
    assert [label.split(" · …")[0] for label in labels[1:]] == ["twin", "twin"] and labels[1] != labels[2]


def test_queue_depth_without_a_waiting_job_says_so_instead_of_drawing_empty_axes(client, cast, nodes, now,
                                                                                  monkeypatch):
    monkeypatch.setattr(timezone, "now", lambda: now)
    samples_record(now=now)
    client.force_login(cast["vic"])
    content = client.get(chart_url("queue-depth")).content.decode()
    assert "No job waited in the last 24 hours: every sample found the queue empty." in content
    assert "chart__figure" not in content
