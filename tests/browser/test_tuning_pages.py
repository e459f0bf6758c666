"""A researcher opens a finished study in a real browser: the best trial is highlighted, sorting by
the metric puts it first, and plotly.js draws the parallel-coordinates and metric charts."""

import pytest

from tests.conftest import later
from tests.tuning.helpers import finish_job, hypertune_reports, integer, study, tuning_body
from trainhub.tuning import services

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
