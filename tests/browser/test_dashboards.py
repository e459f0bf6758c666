"""The dashboards in a real browser: every chart drawn by the vendored plotly.js, a chart's data
downloaded as CSV, the time range picker, the wall screen and back; the team page from the overview.
One busy cluster per test: building it is most of each test's time."""

import csv

import pytest

from trainhub.dashboards.charts import CHARTS

pytestmark = pytest.mark.django_db(transaction=True)

#: Charts with data in the busy cluster (fair-share has no Slurm cluster to report).
DRAWN = len(CHARTS) - 1


def wait_for_charts(page, count=DRAWN):
    page.wait_for_function(f"document.querySelectorAll('.chart__plot .main-svg').length >= {count}", timeout=30_000)
    assert page.locator(".chart[aria-busy=true]").count() == 0


def test_the_dashboard_draws_every_chart_downloads_csv_switches_range_and_goes_to_the_wall_screen(
        page, live_server, login, busy_cluster, screenshot, tmp_path):
    login("uma")
    page.goto(f"{live_server.url}/dashboards/?range=24h")
    wait_for_charts(page)
    assert page.get_by_text("No Slurm clusters").is_visible()
    assert "waiting" in page.locator("#chart-queue-depth .chart__summary").inner_text()
    page.get_by_text("Why it waits").first.wait_for()
    screenshot("dashboard")

    with page.expect_download() as download:
        page.locator("#chart-queue-depth").get_by_role("link", name="CSV").click()
    path = tmp_path / download.value.suggested_filename
    download.value.save_as(path)
    assert download.value.suggested_filename.startswith("trainhub-queue-depth-24h-")
    rows = list(csv.DictReader(path.open()))
    assert list(rows[0]) == ["time", "gpu_type", "queued_jobs", "pending_jobs", "running_jobs", "waiting_gpus",
                             "oldest_wait_seconds"]
    assert len({row["time"] for row in rows}) >= 90  # 15-minute buckets over a day

    page.get_by_role("link", name="7 days").click()
    page.wait_for_url("**/dashboards/?range=7d")
    wait_for_charts(page)
    assert "7 days" in page.locator("#chart-wait-times h2").inner_text()

    page.set_viewport_size({"width": 1920, "height": 1080})  # the wall screen fills a 1080p screen
    page.get_by_role("link", name="Wall screen").click()
    page.wait_for_url("**/dashboards/?range=7d&wall=1")
    wait_for_charts(page)
    assert page.locator("nav.mainnav").count() == 0
    screenshot("dashboard-wall")
    page.get_by_role("link", name="Exit wall screen").click()
    page.wait_for_url("**/dashboards/?range=7d")
    wait_for_charts(page)  # also: no chart request left in flight when the test's database goes
    assert page.locator("nav.mainnav").is_visible()


def test_the_team_page_opens_from_the_overview_and_its_range_picker_redraws_it(page, live_server, login,
                                                                              busy_cluster):
    from trainhub.dashboards.team import TEAM_CHARTS

    login("uma")
    page.goto(f"{live_server.url}/dashboards/?range=24h")
    page.locator("main .subtitle, main p").get_by_role("link", name="alpha").first.click()
    page.wait_for_url("**/dashboards/team/alpha/?range=24h")
    page.get_by_role("heading", name="Team alpha").wait_for()
    page.wait_for_function("document.querySelectorAll('.chart[aria-busy=true]').length === 0", timeout=30_000)
    assert page.locator(".chart").count() == len(TEAM_CHARTS)
    assert page.locator(".chart__plot .main-svg").count() >= 1
    page.get_by_role("navigation", name="Time range").get_by_role("link", name="7 days").click()
    page.wait_for_url("**/dashboards/team/alpha/?range=7d")
    assert page.get_by_role("navigation", name="Time range").locator("[aria-current=true]").inner_text() == "7 days"
    page.get_by_role("link", name="Dashboards").first.click()
    page.wait_for_url("**/dashboards/")
    wait_for_charts(page)
