"""Playwright driving Debian's headless Chromium (/usr/bin/chromium; never a downloaded browser)
against a live trainhub server. Screenshots go to artifacts/screenshots/."""

import os
from contextlib import contextmanager
from pathlib import Path

import pytest

CHROMIUM = os.environ.get("TRAINHUB_CHROMIUM", "/usr/bin/chromium")
SCREENSHOTS = Path(__file__).resolve().parents[2] / "artifacts" / "screenshots"

# Playwright's sync API runs an event loop in this thread; the tests still call the ORM directly.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")


def pytest_collection_modifyitems(items):
    for item in items:
        if "tests/browser/" in str(item.fspath):
            item.add_marker(pytest.mark.browser)


@pytest.fixture(scope="session")
def chromium():
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} not found: install Debian's chromium package (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True,
            args=["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"],
        )
        yield browser
        browser.close()


@pytest.fixture
def page(chromium):
    context = chromium.new_context(viewport={"width": 1400, "height": 900})
    page = context.new_page()
    page.set_default_timeout(15_000)
    yield page
    context.close()


@pytest.fixture
def screenshot(page):
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)

    def take(name: str) -> None:
        page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=True)

    return take


def sign_in(page, base_url: str, username: str) -> None:
    """Log ``username`` in (the cast's password) through the login form, in ``page``'s context."""
    page.goto(f"{base_url}/login/")
    page.fill("[name=username]", username)
    page.fill("[name=password]", f"{username}-password")
    page.click("button[type=submit]")
    page.wait_for_url(f"{base_url}/")


@contextmanager
def answering_confirm(page, says: str, accept: bool = True):
    """The browser's confirm() a destructive button raises must say ``says``; accepted or declined."""
    asked: list[str] = []

    def answer(dialog) -> None:
        asked.append(dialog.message)
        dialog.accept() if accept else dialog.dismiss()

    page.once("dialog", answer)
    yield
    assert asked and says in asked[0], asked


def apply_state_filter(page, state: str) -> None:
    """Pick ``state`` in a list's state filter and apply it (the tuning and pipeline lists)."""
    page.select_option("[name=state]", state)
    page.get_by_role("button", name="Apply filters").click()
    page.wait_for_url(f"**state={state}*")


@pytest.fixture
def login(page, live_server):
    def as_user(username: str) -> None:
        sign_in(page, live_server.url, username)

    return as_user


@pytest.fixture
def open_table(page, live_server, screenshot):
    """open_table(path, columns, shot=None) -> the table's rows, as lists of cell texts.

    Opens a page, checks that its table has these column headers (case-insensitive, in this
    order, others may come between), saves a screenshot named ``shot`` if given. A page test is
    then a few lines, e.g. for a Slurm sprio page:
    ``rows = open_table("/slurm/demo/sprio", ["JOBID", "PRIORITY", "AGE", "FAIRSHARE"], shot="sprio")``.
    """

    def open_page(path: str, columns: list[str], shot: str | None = None) -> list[list[str]]:
        response = page.goto(f"{live_server.url}{path}")
        assert response.status == 200, f"{path} answered {response.status}"
        table = page.locator("main table").first
        table.wait_for()
        headers = [text.strip().lower() for text in table.locator("thead th").all_inner_texts()]
        wanted = iter(headers)
        missing = [column for column in columns if not any(column.lower() in header for header in wanted)]
        assert not missing, f"{path}: columns {missing} not found in {headers}"
        if shot:
            screenshot(shot)
        return [[cell.strip() for cell in row.locator("th, td").all_inner_texts()]
                for row in table.locator("tbody tr").all()]

    return open_page


@pytest.fixture
def busy_cluster(cast):
    from django.utils import timezone

    from tests.browser.cluster import load_busy_cluster

    return load_busy_cluster(cast, timezone.now())
