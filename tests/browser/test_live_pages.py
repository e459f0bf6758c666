"""Pages left open, and every button pressed. A live page polls its sections; a section that polls
the wrong URL (the whole page) nests a copy of the page in itself every few seconds, and a button
posting to the wrong URL answers 200 and changes nothing. These tests open every live page, leave
it open until each of its fast pollers has fired, and press each button of the Slurm job page and
the cluster page once (the other pages' buttons: see tests/browser/README.md)."""

import re

import pytest
from django.utils import timezone

from tests.browser.conftest import answering_confirm, sign_in
from tests.conftest import container_pool, job_body
from tests.slurm.conftest import accounts, admin, cluster, make_job, slurm_pools  # noqa: F401 - fixtures
from trainhub.jobs.services import job_submit
from trainhub.scheduling.services import scheduler_pass
from trainhub.slurm.models import JobState

pytestmark = pytest.mark.django_db(transaction=True)
SLURM = "/slurm/projects/alpha/locations/us-central1/clusters/c1"
#: Longer than the slowest poll ("every 5s") so every poller fires at least once.
LEFT_OPEN_MS = 7_000


def page_shape(page) -> dict:
    return page.evaluate("""() => ({
        height: document.documentElement.scrollHeight,
        mains: document.querySelectorAll('main').length,
        headers: document.querySelectorAll('header').length,
        ids: [...document.querySelectorAll('[id]')].map(e => e.id)
              .filter((id, i, all) => all.indexOf(id) !== i),
        emptyPolls: document.querySelectorAll('[hx-get=""]').length,
        polls: window.thPolls || 0,
    })""")


#: Counts the fragments each page fetched and swapped in by itself (htmx's own event).
COUNT_POLLS = "document.addEventListener('htmx:afterSwap', () => { window.thPolls = (window.thPolls || 0) + 1; });"


def live_pages(cast, accounts, now) -> list[str]:  # noqa: F811
    """One of every page that updates itself, each showing something that is still changing."""
    from tests.resources.conftest import running, t4_pool
    from tests.tuning.helpers import custom_pipeline, integer, study, tuning_body
    from trainhub.tuning import services as tuning

    resource = running(cast, now, t4_pool(), resource_id="left-open")  # first: the jobs below take machines
    slurm_job = make_job(accounts, user="uma")
    custom_job = job_submit(project=cast["alpha"], location="us-central1", user=cast["uma"],
                            body=job_body(container_pool(), name="left-open"))
    study_job = tuning.tuning_job_create(project=cast["alpha"], location="us-central1", user=cast["uma"], now=now,
                                         body=tuning_body(study(integer("n", 1, 3)), name="left-open-study"))
    pipeline = tuning.pipeline_create(project=cast["alpha"], location="us-central1", user=cast["uma"], now=now,
                                      body=custom_pipeline("left-open-pipeline"))
    alpha = "/projects/alpha/locations/us-central1"
    return [f"{SLURM}/jobs/{slurm_job.job_id}/", f"{SLURM}/queue", f"{alpha}/jobs/{custom_job.job_id}/", "/",
            "/nodes/", "/dashboards/", "/dashboards/team/alpha/", "/tuning/",
            f"{alpha}/hyperparameterTuningJobs/{study_job.job_id}/", "/pipelines/",
            f"{alpha}/trainingPipelines/{pipeline.pipeline_id}/", "/persistent-resources/",
            f"{alpha}/persistent-resources/{resource.resource_id}/"]


def test_every_live_page_left_open_keeps_its_size(chromium, live_server, login, page, cast, accounts, nodes,
                                                  now):  # noqa: F811
    """Each live page polls with its own triggers: the fixed ones ("every 2s" .. "every 5s") fire by
    themselves, and the ones that follow the cluster ("th-changed") fire because the test runs a
    scheduler pass, which moves the live version as beat's passes would, every second or so."""
    paths = live_pages(cast, accounts, now)
    login("uma")
    page.context.add_init_script(COUNT_POLLS)
    tabs = []
    for path in paths:
        tab = page.context.new_page()
        assert tab.goto(f"{live_server.url}{path}").status == 200, path
        tab.wait_for_load_state("networkidle")
        tabs.append((path, tab, page_shape(tab)))
    for _ in range(LEFT_OPEN_MS // 1000):
        scheduler_pass(now=timezone.now())
        page.wait_for_timeout(1000)
    for path, tab, before in tabs:
        after = page_shape(tab)
        assert after["polls"] > before["polls"], (path, "never updated itself", after)
        assert after["mains"] == 1 and after["headers"] == before["headers"], (path, before, after)
        assert not after["ids"] and not after["emptyPolls"], (path, after)
        assert after["height"] <= before["height"] * 1.2 + 200, (path, before["height"], after["height"])


def test_every_button_on_the_slurm_job_page_does_what_it_says(page, live_server, login, screenshot,
                                                             accounts):  # noqa: F811
    job = make_job(accounts, user="uma")
    login("uma")
    page.goto(f"{live_server.url}{SLURM}/jobs/{job.job_id}/")
    page.get_by_role("button", name="Hold").click()
    page.get_by_text(f"Held: job {job.job_id}").wait_for()
    job.refresh_from_db()
    assert job.hold == "user"
    page.get_by_role("button", name="Release").click()
    page.get_by_text(f"Released: job {job.job_id}").wait_for()
    job.refresh_from_db()
    assert not job.hold
    assert page.get_by_role("button", name="Release").count() == 0  # released: pending again, or started
    with answering_confirm(page, f"Cancel Slurm job {job.job_id} (scancel)?"):
        page.get_by_role("button", name=re.compile("Cancel")).click()
    page.get_by_text(f"Cancel requested: job {job.job_id}").wait_for()
    job.refresh_from_db()
    assert job.state == JobState.CANCELLED or job.ending_state
    screenshot("slurm-job-cancelled")


def test_every_page_fits_a_phone_and_a_1440_px_screen(chromium, live_server, cast, accounts):  # noqa: F811
    slurm_job = make_job(accounts, user="uma")
    custom_job = job_submit(project=cast["alice"].memberships.get().project, location="us-central1",
                            user=cast["uma"], body=job_body(container_pool(), name="narrow"))
    paths = [f"{SLURM}/", f"{SLURM}/jobs/{slurm_job.job_id}/", f"{SLURM}/queue",
             f"/projects/alpha/locations/us-central1/jobs/{custom_job.job_id}/",
             "/projects/alpha/locations/us-central1/jobs/new", "/", "/dashboards/", "/dashboards/team/alpha/", "/quotas/"]
    for width in (390, 1440):
        context = chromium.new_context(viewport={"width": width, "height": 900})
        page = context.new_page()
        sign_in(page, live_server.url, "uma")
        for path in paths:
            assert page.goto(f"{live_server.url}{path}").status == 200, path
            page.wait_for_load_state("networkidle")
            wide = page.evaluate("document.documentElement.scrollWidth")
            assert wide <= width, f"{path} is {wide} px wide on a {width} px screen"
        context.close()


#: Tables clipped inside their scroll box: the columns a reader must scroll sideways to see.
CLIPPED_TABLES = """() => [...document.querySelectorAll('.table-scroll')]
    .filter((box) => box.scrollWidth > box.clientWidth + 1)
    .map((box) => `${box.closest('section').querySelector('h2').innerText}: ${box.scrollWidth} > ${box.clientWidth} px`)"""


def test_a_jobs_tables_show_every_column_on_a_1440_px_screen(page, live_server, login, cast, accounts, nodes,
                                                              tmp_path):  # noqa: F811
    """A job's replicas, a Slurm job's nodes and runs, and the joined machines have eight or nine
    columns; at 1,440 px none of them hides a column (a timestamp, the actions) behind a sideways
    scroll. On a phone they scroll, which test_every_page_fits_a_phone_and_a_1440_px_screen allows."""
    from tests.agent.harness import join_nodes
    from tests.slurm.conftest import start_job
    from trainhub.iam.services import user_ensure

    custom_job = job_submit(project=cast["alpha"], location="us-central1", user=cast["uma"],
                            body=job_body(container_pool(machine_type="a2-highgpu-1g", replicas=1), name="wide"))
    scheduler_pass(now=timezone.now())
    slurm_job = make_job(accounts, user="uma", num_nodes=2, gpus_per_node=8)
    start_job(slurm_job, ["a4-0", "a4-1"])
    join_nodes(tmp_path)
    user_ensure(username="root-admin", password="root-admin-password", is_staff=True)  # the machines page's
    page.set_viewport_size({"width": 1440, "height": 900})
    for user, path, heading in (
            ("uma", f"/projects/alpha/locations/us-central1/jobs/{custom_job.job_id}/", "a100-"),
            ("uma", f"{SLURM}/jobs/{slurm_job.job_id}/", "a4-1"), ("root-admin", "/nodes/machines", "a100-0")):
        page.context.clear_cookies()
        login(user)
        assert page.goto(f"{live_server.url}{path}").status == 200, path
        page.locator("main table").get_by_text(heading).first.wait_for()
        assert page.evaluate(CLIPPED_TABLES) == [], path


def test_the_cluster_pages_buttons_drain_and_resume_a_node_and_pause_stops_the_updates(page, live_server, login,
                                                                                    accounts):  # noqa: F811
    from trainhub.inventory.models import Node

    login("alice")  # an administrator of c1
    page.goto(f"{live_server.url}{SLURM}/")
    node = Node.objects.filter(name__startswith="a4").order_by("name").first()
    row = page.locator("tr", has=page.locator(f"th a:text-is('{node.name}')"))
    row.locator("input[name=reason]").fill("bad fan")
    row.get_by_role("button", name="Drain").click()
    page.get_by_text(f"Node {node.name} is now DRAIN.").wait_for()
    node.refresh_from_db()
    assert node.state == "DRAIN" and node.state_reason == "bad fan"
    page.locator("tr", has=page.locator(f"th a:text-is('{node.name}')")).get_by_role("button", name="Resume").click()
    page.get_by_text(f"Node {node.name} is now UP.").wait_for()
    node.refresh_from_db()
    assert node.state == "UP"
    page.goto(f"{live_server.url}/")  # a live page: its updates can be paused
    asked = []
    page.on("request", lambda request: asked.append(request.url) if "scheduler:status" in request.url else None)
    toggle = page.locator("[data-live-toggle]")
    toggle.click()
    assert toggle.inner_text() == "Resume updates" and toggle.get_attribute("aria-pressed") == "true"
    asked.clear()
    page.wait_for_timeout(4_500)  # two ticks (every 2 s while the reader is active)
    assert not asked, "paused, the page still asked for the live status"
    with page.expect_request("**/scheduler:status"):  # resumed: at once
        toggle.click()
    assert toggle.inner_text() == "Pause updates"
