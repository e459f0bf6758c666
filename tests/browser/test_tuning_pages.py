"""A researcher opens a finished study in a real browser: the best trial is highlighted, sorting by
the metric puts it first, and plotly.js draws the parallel-coordinates and metric charts. Another
creates a study through the form, cancels it from its page and finds it with the list's filters."""

import re

import pytest

from tests.browser.conftest import answering_confirm, apply_state_filter
from tests.conftest import later
from tests.tuning.helpers import finish_job, hypertune_reports, integer, study, tuning_body
from trainhub.tuning import services
from trainhub.tuning.models import HyperparameterTuningJob

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_finished_study_shows_its_best_trial_and_draws_its_charts(page, live_server, login, screenshot, cast,
                                                                   nodes, now):
    job = services.tuning_job_create(project=cast["alpha"], location="us-central1", user=cast["uma"], now=now,
                                     body=tuning_body(study(integer("n", 1, 3), algorithm="GRID_SEARCH"),
                                                      name="grid-study", max_trials=3, parallel=3))
    for trial, score in zip(job.trials.select_related("custom_job").order_by("number"), (0.2, 0.9, 0.5)):
        finish_job(trial.custom_job, later(now, 5), reports=hypertune_reports("score", [(1, score)]))
    services.study_advance(tuning_job=job, now=later(now, 6))

    login("uma")
    page.get_by_role("link", name="Tuning").click()
    page.get_by_role("link", name="grid-study").click()
    page.locator("#tuning-parcoords.js-plotly-plot").wait_for()
    page.locator("#tuning-metric.js-plotly-plot").wait_for()
    assert page.locator("#best-trial").inner_text().startswith("trial 2")
    page.get_by_role("link", name="score, best first").click()
    first_row = page.locator("#trials tbody tr").first
    assert first_row.get_attribute("class") == "row--best" and first_row.locator("th").inner_text().startswith("2")
    screenshot("tuning-detail")


def test_a_tuning_job_created_in_the_form_is_cancelled_from_its_page_and_found_by_the_filters(page, live_server,
                                                                                             login, cast, nodes):
    login("uma")
    page.get_by_role("link", name="Tuning").click()
    page.get_by_role("link", name="New tuning job").click()
    page.fill("[name=display_name]", "browser-study")
    page.select_option("[name=pool0-machine_type]", "n1-standard-4")
    page.fill("[name=pool0-image_uri]", "python:3.11")
    page.fill("[name=pool0-command]", "python3 train.py")
    page.get_by_role("button", name="Create tuning job").click()
    page.get_by_text("Tuning job browser-study created.").wait_for()
    job = HyperparameterTuningJob.objects.get(display_name="browser-study")
    assert job.trials.count() == 2  # two trials at once, from the form's defaults

    with answering_confirm(page, "Cancel tuning job browser-study?"):
        page.get_by_role("button", name="Cancel tuning job").click()
    page.get_by_text("Cancel requested for browser-study.").wait_for()
    job.refresh_from_db()
    assert job.state in ("JOB_STATE_CANCELLING", "JOB_STATE_CANCELLED")
    page.locator("#tuning-status").get_by_text(re.compile("CANCELL(ING|ED)")).first.wait_for()  # agents stop it
    assert page.get_by_role("button", name="Cancel tuning job").count() == 0

    page.get_by_role("navigation", name="Main").get_by_role("link", name="Tuning", exact=True).click()
    apply_state_filter(page, "JOB_STATE_SUCCEEDED")
    assert page.locator("#tuning-rows").get_by_text("browser-study").count() == 0
    job.refresh_from_db()
    apply_state_filter(page, job.state)
    page.locator("#tuning-rows").get_by_text("browser-study").wait_for()
