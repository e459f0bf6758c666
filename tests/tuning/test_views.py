"""Tuning pages: list, detail fragments, sort by metric, create form, model registry, access."""

import pytest
from django.db.models.signals import post_init

from tests.conftest import container_pool, later
from tests.tuning.helpers import categorical, double, finish_job, hypertune_reports, integer, study, tuning_body
from trainhub.tuning import services
from trainhub.tuning.models import HyperparameterTuningJob, Trial

DETAIL = "/projects/alpha/locations/us-central1/hyperparameterTuningJobs"
CREATE = "/projects/alpha/locations/us-central1/hyperparameterTuningJobs/new"


@pytest.fixture
def finished(cast, nodes, now):
    """A three-trial grid study, all finished: scores 0.2, 0.9, 0.5 (trial 2 is best)."""
    job = services.tuning_job_create(project=cast["alpha"], location="us-central1", user=cast["uma"], now=now,
                                     body=tuning_body(study(integer("n", 1, 3), algorithm="GRID_SEARCH"),
                                                      name="grid", max_trials=3, parallel=3))
    for trial, score in zip(job.trials.select_related("custom_job"), (0.2, 0.9, 0.5)):
        finish_job(trial.custom_job, later(now, 5), reports=hypertune_reports("score", [(1, score)]))
    services.study_advance(tuning_job=job, now=later(now, 6))
    job.refresh_from_db()
    return job


@pytest.fixture
def browser(client, cast):
    client.force_login(cast["uma"])
    return client


def trial_numbers_in_order(html):
    table = html.split('<table id="trials">', 1)[1].split("</table>", 1)[0]
    return [int(row.split('<th scope="row">', 1)[1].split("<", 1)[0].split()[0])
            for row in table.split("<tr")[2:]]


def test_the_detail_page_sorts_trials_by_metric_and_highlights_the_best(browser, finished):
    html = browser.get(f"{DETAIL}/{finished.job_id}/").content.decode()
    assert trial_numbers_in_order(html) == [1, 2, 3]
    assert "trial 2 · score = <span class=\"mono\" title=\"0.9\">0.9</span>" in html
    by_metric = browser.get(f"{DETAIL}/{finished.job_id}/?sort=metric").content.decode()
    assert trial_numbers_in_order(by_metric) == [2, 3, 1]
    assert by_metric.count('class="row--best"') == 1
    assert 'src="/static/vendor/plotly.min.js"' in html
    assert "Plotly.newPlot" in html and 'id="tuning-parcoords"' in html and 'id="tuning-metric"' in html


def test_the_default_algorithm_is_named_not_shown_as_its_enum(browser, cast, nodes, now):
    job = services.tuning_job_create(project=cast["alpha"], location="us-central1", user=cast["uma"], now=now,
                                     body=tuning_body(study(integer("n", 1, 3)), name="bayes"))
    html = browser.get(f"{DETAIL}/{job.job_id}/").content.decode()
    assert "<dt>Algorithm</dt><dd>Bayesian (default)</dd>" in html and "ALGORITHM_UNSPECIFIED" not in html
    assert "<dt>Final measurement</dt><dd>Last reported (default)</dd>" in html and "_UNSPECIFIED" not in html


def test_the_trials_table_rounds_parameter_values_and_keeps_them_in_a_tooltip(browser, cast, nodes, now):
    job = services.tuning_job_create(project=cast["alpha"], location="us-central1", user=cast["uma"], now=now,
                                     body=tuning_body(study(double("lr", 0.0001, 0.1)), name="lr"))
    trial = job.trials.first()
    trial.parameters = [{"parameterId": "lr", "value": 0.055002694790650605}]
    trial.save(update_fields=["parameters"])
    html = browser.get(f"{DETAIL}/{job.job_id}/").content.decode()
    assert '<td class="mono" title="0.055002694790650605">0.055</td>' in html


def test_the_best_score_is_rounded_like_the_trials_table_with_its_full_value_in_a_tooltip(browser, cast, nodes,
                                                                                          now):
    job = services.tuning_job_create(project=cast["alpha"], location="us-central1", user=cast["uma"], now=now,
                                     body=tuning_body(study(integer("n", 1, 1), algorithm="GRID_SEARCH"),
                                                      name="close", max_trials=1, parallel=1))
    finish_job(job.trials.get().custom_job, later(now, 5),
               reports=hypertune_reports("score", [(1, -0.23069408724396176)]))
    services.study_advance(tuning_job=job, now=later(now, 6))
    rounded = '<span class="mono" title="-0.23069408724396176">-0.2307</span>'
    assert f"trial 1 · score = {rounded}" in browser.get(f"{DETAIL}/{job.job_id}/").content.decode()
    assert f"trial 1 · {rounded}" in browser.get("/tuning/").content.decode()


def test_a_minimizing_study_sorts_the_lowest_first(browser, cast, nodes, now):
    job = services.tuning_job_create(project=cast["alpha"], location="us-central1", user=cast["uma"], now=now,
                                     body=tuning_body(study(integer("n", 1, 2), goal="MINIMIZE", metric="loss",
                                                            algorithm="GRID_SEARCH"), max_trials=2, parallel=2))
    for trial, loss in zip(job.trials.select_related("custom_job"), (0.2, 0.1)):
        finish_job(trial.custom_job, later(now, 5), reports=hypertune_reports("loss", [(1, loss)]))
    services.study_advance(tuning_job=job, now=later(now, 6))
    html = browser.get(f"{DETAIL}/{job.job_id}/?sort=metric").content.decode()
    assert trial_numbers_in_order(html) == [2, 1]


def test_a_running_study_polls_its_fragments_and_a_finished_one_stops(browser, cast, nodes, now, finished):
    live = services.tuning_job_create(project=cast["alpha"], location="us-central1", user=cast["uma"], now=now,
                                      body=tuning_body(study(double("x", 0, 1))))
    html = browser.get(f"{DETAIL}/{live.job_id}/").content.decode()
    assert 'hx-trigger="every 2s"' in html and 'hx-trigger="every 5s"' in html
    assert "The charts appear when the first trial has reported its metric." in html
    status = browser.get(f"{DETAIL}/{live.job_id}/status?sort=metric")
    assert status.status_code == 200 and b'id="tuning-status"' in status.content and b"<html" not in status.content
    done = browser.get(f"{DETAIL}/{finished.job_id}/").content.decode()
    assert "hx-trigger" not in done.split('id="tuning-status"', 1)[1].split("</section>", 1)[0]


def test_the_list_shows_each_study_with_its_best_trial_in_constant_queries(browser, finished, cast, nodes, now,
                                                                            django_assert_max_num_queries):
    for index in range(3):
        services.tuning_job_create(project=cast["alpha"], location="us-central1", user=cast["uma"], now=now,
                                   body=tuning_body(study(double("x", 0, 1)), name=f"other{index}"))
    with django_assert_max_num_queries(10):
        html = browser.get("/tuning/").content.decode()
    assert "grid" in html and "trial 2 · <span class=\"mono\" title=\"0.9\">0.9</span>" in html
    assert '<td class="num">3 / 3</td>' in html
    assert browser.get("/tuning/rows").status_code == 200


def test_the_list_counts_trials_without_building_them(browser, finished, cast, nodes, now):
    """Trials are read as values (selectors.trial_summaries): no Trial object per trial of 50 studies."""
    minimizing = services.tuning_job_create(
        project=cast["alpha"], location="us-central1", user=cast["uma"], now=now,
        body=tuning_body(study(integer("n", 1, 2), goal="MINIMIZE", metric="loss", algorithm="GRID_SEARCH"),
                         name="minimizing", max_trials=2, parallel=2))
    for trial, loss in zip(minimizing.trials.select_related("custom_job"), (0.2, 0.1)):
        finish_job(trial.custom_job, later(now, 5), reports=hypertune_reports("loss", [(1, loss)]))
    services.study_advance(tuning_job=minimizing, now=later(now, 6))
    built = []

    def count(instance, **_):
        built.append(instance)

    post_init.connect(count, sender=Trial)
    try:
        html = browser.get("/tuning/rows").content.decode()
    finally:
        post_init.disconnect(count, sender=Trial)
    assert built == []
    rows = {row.split("</a>", 1)[0].rsplit(">", 1)[1]: row for row in html.split("<tr>")[1:]}
    assert '<td class="num">3 / 3</td>' in rows["grid"] and 'trial 2 · <span class="mono" title="0.9">0.9</span>' in rows["grid"]
    assert '<td class="num">2 / 2</td>' in rows["minimizing"]
    assert 'trial 2 · <span class="mono" title="0.1">0.1</span>' in rows["minimizing"]


def test_the_form_creates_a_tuning_job(browser, nodes):
    data = {"display_name": "from-the-form", "location": "us-central1", "strategy": "STANDARD",
            "pool0-machine_type": "n1-standard-4", "pool0-image_uri": "python:3.11",
            "pool0-command": "python3\ntrain.py", "study-metric_id": "accuracy", "study-goal": "MAXIMIZE",
            "study-parameters": "lr double 0.0001 0.1 log\nlayers integer 1 4\nopt categorical sgd,adam",
            "study-algorithm": "RANDOM_SEARCH", "study-measurement_selection": "BEST_MEASUREMENT",
            "study-max_trial_count": "4", "study-parallel_trial_count": "2", "study-max_failed_trial_count": "0"}
    response = browser.post(CREATE, data)
    assert response.status_code == 302, response.content.decode()[:2000]
    job = HyperparameterTuningJob.objects.get(display_name="from-the-form")
    assert response["Location"].endswith(f"/hyperparameterTuningJobs/{job.job_id}/")
    assert job.spec["studySpec"]["parameters"][0] == {"parameterId": "lr", "scaleType": "UNIT_LOG_SCALE",
                                                      "doubleValueSpec": {"minValue": 0.0001, "maxValue": 0.1}}
    assert job.spec["studySpec"]["measurementSelectionType"] == "BEST_MEASUREMENT"
    assert job.trials.count() == 2


def form_data(parameters, algorithm):
    return {"display_name": "bad", "location": "us-central1", "strategy": "STANDARD",
            "pool0-machine_type": "n1-standard-4", "pool0-image_uri": "python:3.11", "pool0-command": "python3",
            "study-metric_id": "m", "study-goal": "MAXIMIZE", "study-parameters": parameters,
            "study-algorithm": algorithm, "study-measurement_selection": "LAST_MEASUREMENT",
            "study-max_trial_count": "4", "study-parallel_trial_count": "2", "study-max_failed_trial_count": "0"}


def test_the_form_shows_a_grid_search_violation_on_the_parameters_field(browser):
    html = browser.post(CREATE, form_data("lr double 0.1 1", "GRID_SEARCH")).content.decode()
    assert "The tuning job was not created." in html
    assert "<strong>Study · Parameters</strong>" in html and "GRID_SEARCH needs every parameter" in html
    assert "studySpec.parameters[0]" not in html
    assert not HyperparameterTuningJob.objects.exists()


def test_the_form_reports_an_unparseable_parameter_line(browser):
    html = browser.post(CREATE, form_data("lr float 0.1 1", "RANDOM_SEARCH")).content.decode()
    assert "Line 1: the type must be double, integer, categorical or discrete" in html


def test_a_viewer_is_refused_the_form_and_cancel(client, cast, finished):
    client.force_login(cast["vic"])
    assert client.get(CREATE).status_code == 403
    assert client.post(f"{DETAIL}/{finished.job_id}/cancel").status_code == 403
    assert client.get(f"{DETAIL}/{finished.job_id}/").status_code == 200


def test_another_projects_study_is_not_found_and_pages_need_login(client, cast, finished):
    for path in ("/tuning/", "/tuning/rows", "/tuning/new", "/models/", CREATE, f"{DETAIL}/{finished.job_id}/"):
        response = client.get(path)
        assert response.status_code == 302 and response["Location"].startswith("/login/"), path
    client.force_login(cast["mallory"])
    for suffix in ("/", "/status", "/charts"):
        assert client.get(f"{DETAIL}/{finished.job_id}{suffix}").status_code == 404
    assert "grid" not in client.get("/tuning/").content.decode()


def test_cancel_from_the_page_needs_a_csrf_token(cast, nodes, now):
    from django.test import Client

    job = services.tuning_job_create(project=cast["alpha"], location="us-central1", user=cast["uma"], now=now,
                                     body=tuning_body(study(categorical("c", "a", "b"))))
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(cast["uma"])
    assert browser.post(f"{DETAIL}/{job.job_id}/cancel").status_code == 403
    job.refresh_from_db()
    assert not job.is_terminal


def test_a_studys_page_costs_the_same_queries_for_20_trials_as_for_2(browser, cast, nodes, now,
                                                                     django_assert_max_num_queries):
    for name, trials in (("small", 2), ("large", 20)):
        job = services.tuning_job_create(project=cast["alpha"], location="us-central1", user=cast["uma"], now=now,
                                         body=tuning_body(study(double("x", 0, 1)), name=name, max_trials=trials,
                                                          parallel=trials))
        assert job.trials.count() == trials
        for suffix in ("/", "/status", "/charts", "/?sort=metric"):
            with django_assert_max_num_queries(9):
                assert browser.get(f"{DETAIL}/{job.job_id}{suffix}").status_code == 200


def test_the_model_registry_lists_versions_with_their_job_and_metrics(browser, cast, nodes, now,
                                                                      django_capture_on_commit_callbacks,
                                                                      django_assert_max_num_queries):
    body = {"displayName": "p", "trainingTaskDefinition":
            "gs://google-cloud-aiplatform/schema/trainingjob/definition/custom_task_1.0.0.yaml",
            "trainingTaskInputs": {"workerPoolSpecs": [container_pool()],
                                   "baseOutputDirectory": {"outputUriPrefix": "gs://m/run"}},
            "modelToUpload": {"displayName": "registry-model"}}
    for _ in range(2):
        with django_capture_on_commit_callbacks(execute=True):
            pipeline = services.pipeline_create(project=cast["alpha"], location="us-central1", user=cast["uma"],
                                                body=body, now=now)
            finish_job(pipeline.custom_job, later(now, 5), model_files=[{"path": "weights.bin", "sizeBytes": 2048}])
    with django_assert_max_num_queries(10):
        html = browser.get("/models/").content.decode()
    assert html.count("registry-model") == 2 and "weights.bin" in html and "2.0\xa0KB" in html
    assert pipeline.custom_job.job_id in html
