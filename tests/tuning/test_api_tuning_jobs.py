"""REST /v1/projects/{p}/locations/{l}/hyperparameterTuningJobs: create, get, list, cancel, delete."""

import pytest

from tests.conftest import container_pool, later
from tests.tuning.helpers import BASE, double, finish_job, hypertune_reports, integer, study, tuning_body
from trainhub.tuning import services
from trainhub.tuning.models import HyperparameterTuningJob


@pytest.fixture
def created(api, nodes):
    response = api("uma").post(BASE, tuning_body(study(double("lr", 0.001, 0.1, scale="UNIT_LOG_SCALE")),
                                                 max_trials=3, parallel=2) | {"labels": {"team": "a"}},
                               format="json")
    assert response.status_code == 200, response.content
    return response.json()


def job_id(body):
    return body["name"].rsplit("/", 1)[1]


def test_create_answers_the_vertex_resource_with_its_first_trials(created):
    assert created["name"].startswith("projects/alpha/locations/us-central1/hyperparameterTuningJobs/")
    assert created["state"] == "JOB_STATE_PENDING"
    assert created["maxTrialCount"] == 3 and created["parallelTrialCount"] == 2
    assert created["studySpec"]["parameters"][0]["scaleType"] == "UNIT_LOG_SCALE"
    assert created["trialJobSpec"]["workerPoolSpecs"][0]["replicaCount"] == "1"
    assert created["labels"] == {"team": "a"}
    assert [t["id"] for t in created["trials"]] == ["1", "2"]
    trial = created["trials"][0]
    assert trial["state"] == "REQUESTED" and trial["parameters"][0]["parameterId"] == "lr"
    assert trial["customJob"].startswith("projects/alpha/locations/us-central1/customJobs/")


def test_grid_search_with_a_double_parameter_is_a_400_with_a_field_violation(api):
    body = tuning_body(study(integer("n", 1, 3), double("lr", 0.1, 1.0), algorithm="GRID_SEARCH"))
    response = api("uma").post(BASE, body, format="json")
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["status"] == "INVALID_ARGUMENT"
    fields = [v["field"] for v in error["details"][0]["fieldViolations"]]
    assert fields == ["studySpec.parameters[1]"]
    assert not HyperparameterTuningJob.objects.exists()


def test_a_broken_trial_job_spec_is_refused_with_trial_job_spec_paths(api):
    body = tuning_body(study(double("x", 0, 1)), pool=container_pool(machine_type="no-such-machine"))
    response = api("uma").post(BASE, body, format="json")
    assert response.status_code == 400
    fields = [v["field"] for v in response.json()["error"]["details"][0]["fieldViolations"]]
    assert fields == ["trialJobSpec.workerPoolSpecs[0].machineSpec.machineType"]


def test_snake_case_and_integer_enums_are_accepted(api, nodes):
    body = {"display_name": "snake", "max_trial_count": "2", "parallel_trial_count": 1,
            "study_spec": {"metrics": [{"metric_id": "m", "goal": 1}], "algorithm": 3,
                           "parameters": [{"parameter_id": "x", "double_value_spec": {"min_value": 0, "max_value": 1}}]},
            "trial_job_spec": {"worker_pool_specs": [container_pool()]}}
    response = api("uma").post(BASE, body, format="json")
    assert response.status_code == 200, response.content
    assert response.json()["studySpec"]["algorithm"] == "RANDOM_SEARCH"


def test_get_shows_measurements_and_the_final_measurement(api, created, now):
    job = HyperparameterTuningJob.objects.get(job_id=job_id(created))
    finish_job(job.trials.get(number=1).custom_job, later(now, 5), reports=hypertune_reports("score", [(5, 0.75)]))
    services.study_advance(tuning_job=job, now=later(now, 6))
    body = api("vic").get(f"{BASE}/{job.job_id}").json()
    trial = body["trials"][0]
    assert trial["state"] == "SUCCEEDED"
    assert trial["finalMeasurement"]["metrics"] == [{"metricId": "score", "value": 0.75}]
    assert trial["finalMeasurement"]["stepCount"] == "5"
    assert trial["measurements"] == [trial["finalMeasurement"]]
    assert "endTime" in trial and body["trainhubStatus"]["bestTrialId"] == "1"


def test_list_pages_through_the_projects_tuning_jobs(api, nodes):
    for index in range(3):
        assert api("uma").post(BASE, tuning_body(study(double("x", 0, 1)), name=f"s{index}", max_trials=1,
                                                 parallel=1), format="json").status_code == 200
    first = api("vic").get(BASE, {"pageSize": 2}).json()
    second = api("vic").get(BASE, {"pageSize": 2, "pageToken": first["nextPageToken"]}).json()
    names = [j["displayName"] for j in first["hyperparameterTuningJobs"] + second["hyperparameterTuningJobs"]]
    assert names == ["s2", "s1", "s0"] and "nextPageToken" not in second


def test_delete_refuses_a_live_job_and_removes_a_cancelled_one(api, created):
    name = job_id(created)
    response = api("uma").delete(f"{BASE}/{name}")
    assert response.status_code == 400 and response.json()["error"]["status"] == "FAILED_PRECONDITION"
    # Its trials' jobs were never placed (no scheduler pass ran), so cancelling ends it at once.
    assert api("uma").post(f"{BASE}/{name}:cancel", {}, format="json").status_code == 200
    assert api("uma").get(f"{BASE}/{name}").json()["state"] == "JOB_STATE_CANCELLED"
    response = api("uma").delete(f"{BASE}/{name}")
    assert response.status_code == 200 and response.json()["done"] is True
    assert api("uma").get(f"{BASE}/{name}").status_code == 404


def test_a_viewer_cannot_create_or_cancel(api, created):
    assert api("vic").post(BASE, tuning_body(study(double("x", 0, 1))), format="json").status_code == 403
    response = api("vic").post(f"{BASE}/{job_id(created)}:cancel", {}, format="json")
    assert response.status_code == 403
    assert "aiplatform.hyperparameterTuningJobs.cancel" in response.json()["error"]["message"]


def test_another_projects_tuning_job_is_not_found(api, created):
    name = job_id(created)
    assert api("mallory").get(f"{BASE}/{name}").status_code == 404
    assert api("mallory").get("/v1/projects/beta/locations/us-central1/hyperparameterTuningJobs/" + name).status_code == 404
    assert api("mallory").post(f"{BASE}/{name}:cancel", {}, format="json").status_code == 404


def test_listing_costs_a_constant_number_of_queries(api, nodes, django_assert_max_num_queries):
    for index in range(4):
        api("uma").post(BASE, tuning_body(study(double("x", 0, 1)), name=f"q{index}"), format="json")
    viewer = api("vic")  # issuing vic's token is not the listing's cost
    with django_assert_max_num_queries(12):
        assert len(viewer.get(BASE).json()["hyperparameterTuningJobs"]) == 4
