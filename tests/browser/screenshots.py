"""Every page of the app photographed at 1,440 and 390 px wide, the way a user looks it over.

Not part of the browser suite (the file name does not start with ``test_``): run it by name,

    /work/main/.venv/bin/python -m pytest -m browser tests/browser/screenshots.py -q

It builds a small copy of the page benchmark's dataset (bench/pages.py: jobs in every state, studies,
pipelines, models, resources, a Slurm cluster with a queue and history, a week of dashboard samples),
opens each page the benchmark samples (fragments aside: they are no page), and writes
``var/screenshots/<width>/<NN>-<page>.png`` with ``var/screenshots/report.txt``: per page and
width, its height, and anything wider than the screen. It fails if a page scrolls sideways.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.django_db(transaction=True)

OUT = Path(__file__).resolve().parents[2] / "var" / "screenshots"
WIDTHS = (1440, 390)
#: The page benchmark's dataset, small: the finished tab's deep page needs 2,501 finished jobs.
SIZES = {"page_active_jobs": 150, "page_finished_jobs": 2_600, "page_nodes": 24, "page_studies": 3,
         "page_pipelines": 3, "page_models": 2, "page_resources": 2, "page_slurm_pending": 60,
         "page_slurm_finished": 120}
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


def _slug(label: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", label.lower()).strip("-")[:60]


def _session_cookie(user, base_url: str) -> dict:
    from django.conf import settings
    from django.test import Client

    client = Client()
    client.force_login(user)
    return {"name": settings.SESSION_COOKIE_NAME, "value": client.cookies[settings.SESSION_COOKIE_NAME].value,
            "url": base_url}


def test_every_page_at_1440_and_390_px(chromium, live_server):
    from bench.pages import _samples, build_dataset
    from bench.scheduler_pass import QUICK

    dataset = build_dataset(dataclasses.replace(QUICK, **SIZES))
    users = {"member": dataset.user, "admin": dataset.slurm_admin, "anonymous": None}
    report, wide = [], []
    for width in WIDTHS:
        (OUT / str(width)).mkdir(parents=True, exist_ok=True)
        contexts = {}
        for who, user in users.items():
            contexts[who] = chromium.new_context(viewport={"width": width, "height": 900})
            if user is not None:
                contexts[who].add_cookies([_session_cookie(user, live_server.url)])
        seen = set()
        for index, sample in enumerate(_samples()):
            url = sample.url(dataset)
            if sample.status != 200 or url in seen:
                continue
            seen.add(url)
            page = contexts[sample.who].new_page()
            response = page.goto(f"{live_server.url}{url}")
            if not response.headers.get("content-type", "").startswith("text/html") or not page.locator(
                    "body > main").count():
                page.close()  # a fragment, a download: no page
                continue
            page.wait_for_load_state("networkidle")
            page.wait_for_timeout(300)  # Plotly's responsive relayout
            name = f"{index:02d}-{_slug(sample.label)}"
            page.screenshot(path=str(OUT / str(width) / f"{name}.png"), full_page=True)
            scroll = page.evaluate("document.documentElement.scrollWidth")
            sticking_out = page.evaluate(OVERFLOW, width)
            height = page.evaluate("document.documentElement.scrollHeight")
            report.append(f"{width:>5} {response.status} {height:>6} px  {name}  {url}"
                          + (f"\n        WIDER THAN THE SCREEN: {scroll} px; {', '.join(sticking_out)}"
                             if scroll > width else ""))
            if scroll > width:
                wide.append(f"{sample.label} at {width} px: {scroll} px ({', '.join(sticking_out)})")
            page.close()
        for context in contexts.values():
            context.close()
    (OUT / "report.txt").write_text("\n".join(report) + "\n")
    assert not wide, "\n".join(wide)
