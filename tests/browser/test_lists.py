"""The job list and the nodes page in a real browser: filters, tabs, search, and rows that
follow the cluster without a reload."""

import re

import pytest
from django.utils import timezone

from trainhub.inventory.models import NodeState
from trainhub.inventory.services import node_set_state
from trainhub.jobs.models import CustomJob
from trainhub.scheduling.services import scheduler_pass

pytestmark = pytest.mark.django_db(transaction=True)

JOB_COLUMNS = ["Name", "Project", "User", "State", "Strategy", "GPU type", "GPUs", "Created"]


def test_on_a_phone_the_job_list_shows_every_jobs_state_without_scrolling_sideways(page, live_server, login,
                                                                                 busy_cluster):
    page.set_viewport_size({"width": 390, "height": 844})
    login("uma")
    page.goto(f"{live_server.url}/")
    badges = page.locator("#job-rows .badge")
    assert badges.count() > 0
    for index in range(badges.count()):
        box = badges.nth(index).bounding_box()
        assert box and box["x"] + box["width"] <= 390, box
    assert page.get_by_role("columnheader", name="Project").is_hidden()


def test_the_job_list_filters_by_gpu_type_state_and_search(page, live_server, login, busy_cluster, open_table,
                                                           screenshot):
    login("uma")
    rows = open_table("/", JOB_COLUMNS, shot="job-list")
    assert len(rows) == CustomJob.objects.filter(project__project_id="alpha", end_time__isnull=True).count()
    page.select_option("[name=accelerator_type]", "NVIDIA_H100_80GB")
    page.get_by_role("button", name="Apply").click()
    page.wait_for_url(re.compile(r"accelerator_type=NVIDIA_H100_80GB"))
    gpu_types = {row[5] for row in table_rows(page)}
    assert gpu_types == {"H100 80GB"}
    page.fill("[name=q]", "bert")
    page.get_by_role("button", name="Apply").click()
    page.wait_for_url(re.compile(r"q=bert"))
    assert all(row[0].startswith("bert") for row in table_rows(page)) and table_rows(page)
    page.get_by_role("link", name="Clear filters").click()
    page.get_by_role("columnheader", name="GPUs").get_by_role("link").click()  # a sortable column's header
    page.wait_for_url(re.compile(r"sort=gpus"))
    gpus = [int(row[6]) for row in table_rows(page)]
    assert gpus == sorted(gpus, reverse=True) and gpus[0] > gpus[-1]
    assert page.get_by_role("columnheader", name="GPUs").get_attribute("aria-sort") == "descending"
    page.get_by_role("link", name=re.compile("^Finished")).click()
    page.wait_for_url(re.compile(r"tab=finished"))
    page.select_option("[name=state]", "JOB_STATE_FAILED")
    page.get_by_role("button", name="Apply").click()
    page.wait_for_url(re.compile(r"state=JOB_STATE_FAILED"))
    states = {row[3] for row in table_rows(page)}
    assert states == {"FAILED"}
    page.goto(f"{live_server.url}/?tab=finished")
    screenshot("job-list-finished")


def table_rows(page) -> list[list[str]]:
    return [[cell.strip() for cell in row.locator("th, td").all_inner_texts()]
            for row in page.locator("main table tbody tr").all()]


def test_the_nodes_page_shows_a_node_going_down_without_a_reload(page, live_server, login, busy_cluster, open_table):
    login("vic")
    rows = open_table("/nodes/?pool=h100-pool", ["Node", "Pool", "State", "Last heartbeat", "Job"], shot="nodes")
    assert [row[2] for row in rows].count("UP") == 4
    node = busy_cluster["nodes"][6]  # an H100 node
    node_set_state(node=node, state=NodeState.DOWN, reason="power supply failed")
    deadline = timezone.now() + timezone.timedelta(seconds=20)
    while not page.get_by_text("power supply failed").count():
        assert timezone.now() < deadline, "the nodes page never showed the node going down"
        scheduler_pass(now=timezone.now())  # a pass moves the live version, as beat's would
        page.wait_for_timeout(500)
    # The pool cards are a fragment of their own, fetched on the same live signal as the rows but
    # in another request: it may answer after them.
    down = page.locator("#pool-cards").get_by_text("Down")
    down.first.wait_for(timeout=10_000)
    assert down.count()


def test_the_job_lists_pager_goes_to_the_next_page_and_back_to_the_first(page, live_server, login, busy_cluster, cast):
    import random

    from tests.browser.cluster import _submit

    rng = random.Random(11)
    for index in range(50, 80):  # more waiting jobs than one page holds
        _submit(cast, rng, index, timezone.now(), strategy="FLEX_START")
    active = CustomJob.objects.filter(project__project_id="alpha", end_time__isnull=True).count()
    assert active > 50
    login("uma")
    page.goto(f"{live_server.url}/")
    first_page = table_rows(page)
    assert len(first_page) == 50
    page.get_by_role("link", name="Next page").click()
    page.wait_for_url(re.compile(r"cursor="))
    second_page = table_rows(page)
    assert len(second_page) == active - 50
    assert {row[0] for row in second_page}.isdisjoint(row[0] for row in first_page)
    page.get_by_role("link", name="First page").click()
    page.wait_for_url(lambda url: "cursor=" not in url)
    assert [row[0] for row in table_rows(page)] == [row[0] for row in first_page]  # (waiting times have moved on)
