"""Every page of the app photographed at 1,440 and 390 px wide, the way a user looks it over.

Not part of the browser suite (the file name does not start with ``test_``): run it by name,

    /work/main/.venv/bin/python -m pytest -m browser tests/browser/screenshots.py -q

It fills the app with a busy cluster (cluster.py), a Slurm cluster with accounts and a waiting job,
and a study, a pipeline and a persistent resource still running; opens every page as an
administrator (the login page signed out) and writes ``var/screenshots/<width>/<NN>-<page>.png``
with ``var/screenshots/report.txt``: per page and width, its height and anything wider than the
screen. It fails if a page scrolls sideways.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.slurm.conftest import accounts, admin, cluster, slurm_pools  # noqa: F401 - fixtures

pytestmark = pytest.mark.django_db(transaction=True)

OUT = Path(__file__).resolve().parents[2] / "var" / "screenshots"
WIDTHS = (1440, 390)
#: What is wider than the screen: the elements (not inside a scrolling box) that stick out.
OVERFLOW = """(width) => [...document.querySelectorAll('main *')].filter((element) => {
    const box = element.getBoundingClientRect();
    if (box.right <= width + 1 || box.width === 0) return false;
    for (let up = element.parentElement; up; up = up.parentElement) {
        const style = getComputedStyle(up);
        if (['auto', 'scroll', 'hidden'].includes(style.overflowX)) return false;
    }
    return true;
}).slice(0, 5).map((element) => `${element.tagName.toLowerCase()}${element.id ? '#' + element.id : ''}`
    + `${element.className && typeof element.className === 'string' ? '.' + element.className.split(' ')[0] : ''}`
    + ` (${Math.round(element.getBoundingClientRect().right)} px)`)"""


def _slug(path: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", path.lower()).strip("-")[-70:] or "home"


def _pages(live: list[str]) -> list[str]:
    """Every page: the live ones given, the lists, forms and reports, the Slurm admin pages."""
    from trainhub.jobs.models import CustomJob
    from trainhub.slurm.models import Association

    alpha = "/projects/alpha/locations/us-central1"
    finished = CustomJob.objects.filter(project__project_id="alpha", end_time__isnull=False).order_by("pk").first()
    association = Association.objects.exclude(user="").order_by("pk").first()
    slurm = live[1].removesuffix("queue")
    return [*live, "/?tab=finished", f"{alpha}/jobs/{finished.job_id}/", "/jobs/new", "/nodes/machines",
            "/quotas/", "/account/token", "/dashboards/?wall=1", "/models/", f"{alpha}/jobs/new",
            f"{alpha}/hyperparameterTuningJobs/new", f"{alpha}/trainingPipelines/new",
            f"{alpha}/persistent-resources/new", "/slurm/", slurm, f"{slurm}config", f"{slurm}scripts/prolog",
            f"{slurm}partitions/a4", f"{slurm}priority", f"{slurm}fairshare?all=on&long=on",
            f"{slurm}accounting?allusers=on", f"{slurm}nodes?nodes=on&long=on", f"{slurm}sacctmgr",
            f"{slurm}accounts", f"{slurm}accounts/associations/{association.pk}", f"{slurm}accounts/qos/normal",
            f"{slurm}jobs/new", f"{live[0]}priority"]


def test_every_page_at_1440_and_390_px(chromium, live_server, cast, accounts, nodes, now):  # noqa: F811
    from tests.browser.cluster import load_busy_cluster
    from tests.browser.conftest import sign_in
    from tests.browser.test_live_pages import live_pages

    live = live_pages(cast, accounts, now)  # first: the busy cluster takes every machine
    load_busy_cluster(cast, now)
    paths = _pages(live)
    report, wide = [], []
    for width in WIDTHS:
        (OUT / str(width)).mkdir(parents=True, exist_ok=True)
        anonymous = chromium.new_context(viewport={"width": width, "height": 900})
        shoot(anonymous.new_page(), live_server.url, "/login/", width, 0, report, wide)
        anonymous.close()
        context = chromium.new_context(viewport={"width": width, "height": 900})
        sign_in(context.new_page(), live_server.url, "alice")
        for index, path in enumerate(paths, start=1):
            shoot(context.new_page(), live_server.url, path, width, index, report, wide)
        context.close()
    (OUT / "report.txt").write_text("\n".join(report) + "\n")
    assert not wide, "\n".join(wide)


def shoot(page, base_url: str, path: str, width: int, index: int, report: list[str], wide: list[str]) -> None:
    response = page.goto(f"{base_url}{path}")
    page.wait_for_load_state("networkidle")
    page.wait_for_timeout(300)  # Plotly's responsive relayout
    name = f"{index:02d}-{_slug(path.split('?')[0])}{'-' + _slug(path.split('?')[1]) if '?' in path else ''}"
    page.screenshot(path=str(OUT / str(width) / f"{name}.png"), full_page=True)
    scroll = page.evaluate("document.documentElement.scrollWidth")
    height = page.evaluate("document.documentElement.scrollHeight")
    line = f"{width:>5} {response.status} {height:>6} px  {name}  {path}"
    if scroll > width:
        sticking_out = ", ".join(page.evaluate(OVERFLOW, width))
        line += f"\n        WIDER THAN THE SCREEN: {scroll} px; {sticking_out}"
        wide.append(f"{path} at {width} px: {scroll} px ({sticking_out})")
    report.append(line)
    page.close()
