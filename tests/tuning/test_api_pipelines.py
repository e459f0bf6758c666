"""REST trainingPipelines and models: a pipeline runs its job, then registers the model the job
saved under AIP_MODEL_DIR as a new model version."""

import pytest

from tests.conftest import later
from tests.tuning.helpers import MODELS, PIPELINES, custom_pipeline, finish_job, hypertune_reports, tuning_pipeline
from trainhub.tuning.models import Model, TrainingPipeline

MODEL_FILES = [{"path": "model.json", "sizeBytes": 42}]




@pytest.fixture
def post(api, nodes, django_capture_on_commit_callbacks):
    def create(body, user="uma"):
        with django_capture_on_commit_callbacks(execute=True):
            return api(user).post(PIPELINES, body, format="json")
    return create


@pytest.fixture
def finish(django_capture_on_commit_callbacks):
    def finish_pipeline_job(job, moment, **kwargs):
        with django_capture_on_commit_callbacks(execute=True):
            return finish_job(job, moment, **kwargs)
    return finish_pipeline_job


def pipeline_of(response):
    assert response.status_code == 200, response.content
    return TrainingPipeline.objects.get(pipeline_id=response.json()["name"].rsplit("/", 1)[1])


def test_a_custom_task_pipeline_registers_its_model_on_success(api, post, finish, now):
    created = post(custom_pipeline())
    body = created.json()
    assert body["state"] == "PIPELINE_STATE_QUEUED"
    assert body["trainingTaskMetadata"]["backingCustomJob"].startswith("projects/alpha/locations/us-central1/customJobs/")
    pipeline = pipeline_of(created)
    finish(pipeline.custom_job, later(now, 60), model_files=MODEL_FILES)
    body = api("vic").get(f"{PIPELINES}/{pipeline.pipeline_id}").json()
    assert body["state"] == "PIPELINE_STATE_SUCCEEDED"
    model_name = body["modelToUpload"]["name"]
    assert body["modelToUpload"]["versionId"] == "1"
    model = api("vic").get(f"/v1/{model_name}").json()
    assert model["displayName"] == "quadratic" and model["description"] == "a fitted quadratic"
    assert model["artifactUri"] == "gs://models-bucket/run/model/"
    assert model["trainingPipeline"] == pipeline.resource_name
    assert model["trainhubStatus"]["files"] == MODEL_FILES
    assert model["trainhubStatus"]["customJob"] == pipeline.custom_job.resource_name
    assert [m["name"] for m in api("vic").get(MODELS).json()["models"]] == [model_name]


def test_a_pipeline_with_a_parent_model_adds_a_version(api, post, finish, now):
    first = pipeline_of(post(custom_pipeline(modelId="quad")))
    finish(first.custom_job, later(now, 10), model_files=MODEL_FILES)
    parent = "projects/alpha/locations/us-central1/models/quad"
    second = pipeline_of(post(custom_pipeline(name="again", parentModel=parent)))
    finish(second.custom_job, later(now, 20), model_files=MODEL_FILES)
    versions = api("vic").get(f"{MODELS}/quad:listVersions").json()["models"]
    assert [(v["versionId"], v["versionAliases"]) for v in versions] == [("1", []), ("2", ["default"])]
    assert api("vic").get(f"{MODELS}/quad").json()["versionId"] == "2"


def test_a_model_id_that_exists_is_a_conflict_without_parent_model(post, finish, now):
    first = pipeline_of(post(custom_pipeline(modelId="quad")))
    finish(first.custom_job, later(now, 10), model_files=MODEL_FILES)
    response = post(custom_pipeline(modelId="quad"))
    assert response.status_code == 409 and response.json()["error"]["status"] == "ALREADY_EXISTS"


def test_a_job_that_saved_no_model_fails_the_pipeline(api, post, finish, now):
    pipeline = pipeline_of(post(custom_pipeline()))
    finish(pipeline.custom_job, later(now, 10))
    body = api("uma").get(f"{PIPELINES}/{pipeline.pipeline_id}").json()
    assert body["state"] == "PIPELINE_STATE_FAILED"
    assert "No model artefacts were found under AIP_MODEL_DIR (gs://models-bucket/run/model/" in body["error"]["message"]
    assert not Model.objects.exists()


def test_a_failed_job_fails_the_pipeline_with_its_error(api, post, finish, now):
    pipeline = pipeline_of(post(custom_pipeline()))
    finish(pipeline.custom_job, later(now, 10), exit_code=3)
    body = api("uma").get(f"{PIPELINES}/{pipeline.pipeline_id}").json()
    assert body["state"] == "PIPELINE_STATE_FAILED"
    assert body["error"]["message"] == "The replica workerpool0-0 exited with a non-zero status of 3. Termination reason: Error."


def test_the_fraction_split_reaches_the_job_as_vertex_data_variables(post):
    data = {"datasetId": "1234", "fractionSplit": {"trainingFraction": 0.7, "validationFraction": 0.2,
                                                   "testFraction": 0.1},
            "gcsDestination": {"outputUriPrefix": "gs://data-bucket/export"}}
    pipeline = pipeline_of(post(custom_pipeline(inputDataConfig=data)))
    env = {e["name"]: e["value"] for e in pipeline.custom_job.spec["jobSpec"]["workerPoolSpecs"][0]["containerSpec"]["env"]}
    assert env["AIP_DATA_FORMAT"] == "jsonl"
    assert env["AIP_TRAINING_DATA_URI"].startswith("gs://data-bucket/export/dataset-1234-")
    assert env["AIP_TRAINING_DATA_URI"].endswith("/training-*.jsonl")
    assert env["AIP_TEST_DATA_URI"].endswith("/test-*.jsonl")
    assert pipeline.spec["inputDataConfig"]["fractionSplit"] == data["fractionSplit"]


def test_fractions_summing_above_one_are_refused(post):
    data = {"datasetId": "1", "fractionSplit": {"trainingFraction": 0.8, "validationFraction": 0.2,
                                                "testFraction": 0.1}, "gcsDestination": {"outputUriPrefix": "gs://b"}}
    response = post(custom_pipeline(inputDataConfig=data))
    assert response.status_code == 400
    assert [v["field"] for v in response.json()["error"]["details"][0]["fieldViolations"]] == [
        "inputDataConfig.fractionSplit"]


def test_an_unknown_task_definition_and_bad_inputs_are_field_violations(post):
    response = post({"displayName": "x", "trainingTaskDefinition": "gs://elsewhere/task.yaml",
                     "trainingTaskInputs": {}})
    assert [v["field"] for v in response.json()["error"]["details"][0]["fieldViolations"]] == ["trainingTaskDefinition"]
    response = post(custom_pipeline() | {"trainingTaskInputs": {"workerPoolSpecs": [{"machineSpec": {}}]}})
    assert response.json()["error"]["details"][0]["fieldViolations"][0]["field"].startswith(
        "trainingTaskInputs.workerPoolSpecs[0]")


def test_a_tuning_task_pipeline_registers_the_best_trials_model(api, post, finish, now):
    body = tuning_pipeline()
    pipeline = pipeline_of(post(body))
    trials = list(pipeline.tuning_job.trials.select_related("custom_job"))
    for trial, score in zip(trials, (0.3, 0.9)):
        finish(trial.custom_job, later(now, 10), reports=hypertune_reports("score", [(1, score)]),
               model_files=MODEL_FILES)
    body = api("uma").get(f"{PIPELINES}/{pipeline.pipeline_id}").json()
    assert body["state"] == "PIPELINE_STATE_SUCCEEDED"
    assert body["trainingTaskMetadata"]["backingHyperparameterTuningJob"] == pipeline.tuning_job.resource_name
    model = api("uma").get(f"/v1/{body['modelToUpload']['name']}").json()
    assert model["artifactUri"] == "gs://b/hp/2/model/"
    assert model["trainhubStatus"]["metrics"] == {"score": 0.9}


def test_cancel_ends_the_pipeline_cancelled_and_delete_removes_it(api, post, django_capture_on_commit_callbacks):
    pipeline = pipeline_of(post(custom_pipeline()))
    with django_capture_on_commit_callbacks(execute=True):
        assert api("uma").post(f"{PIPELINES}/{pipeline.pipeline_id}:cancel", {}, format="json").status_code == 200
    # The job was placed but never started: the agent reports its replica stopped.
    from trainhub.jobs.services import replica_exited
    with django_capture_on_commit_callbacks(execute=True):
        for replica in pipeline.custom_job.replicas.filter(active=True):
            replica_exited(replica=replica, exit_code=None, now=replica.assigned_at, lost_reason="stopped")
    body = api("uma").get(f"{PIPELINES}/{pipeline.pipeline_id}").json()
    assert body["state"] == "PIPELINE_STATE_CANCELLED" and body["error"]["code"] == 1
    assert api("uma").delete(f"{PIPELINES}/{pipeline.pipeline_id}").status_code == 200
    assert api("uma").get(f"{PIPELINES}/{pipeline.pipeline_id}").status_code == 404


def test_a_viewer_cannot_create_and_a_stranger_sees_nothing(api, post):
    assert post(custom_pipeline(), user="vic").status_code == 403
    pipeline = pipeline_of(post(custom_pipeline()))
    assert api("mallory").get(f"{PIPELINES}/{pipeline.pipeline_id}").status_code == 404
    assert api("mallory").get(MODELS).status_code == 404
    assert api("uma").delete(f"{MODELS}/anything").status_code == 405
