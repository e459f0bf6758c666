import copy
import json
from functools import partial

import pytest
import redis
from django.db import connection
from django.test.utils import CaptureQueriesContext
from redis.exceptions import ConnectionError as RedisConnectionError

from tests.conftest import SEED_REST_BODY, container_pool, job_body
from trainhub.common.live import LIVE_VERSION
from trainhub.jobs.models import CustomJob
from trainhub.scheduling import tasks, working_memory
from trainhub.scheduling.pass_requests import PASS_REQUESTED

BASE = "/v1/projects/alpha/locations/us-central1/customJobs"


def test_it_accepts_the_seed_body_and_answers_in_vertex_form(api, nodes):
    response = api("uma").post(BASE, copy.deepcopy(SEED_REST_BODY), format="json")
    assert response.status_code == 200
    body = response.json()
    assert body["name"].startswith("projects/alpha/locations/us-central1/customJobs/")
    assert body["name"].rsplit("/", 1)[1].isdigit()
    assert body["displayName"] == "MyDwsJob"
    assert body["state"] == "JOB_STATE_QUEUED"
    assert body["createTime"].endswith("Z") and body["updateTime"].endswith("Z")
    assert "startTime" not in body and "endTime" not in body and "error" not in body
    pool = body["jobSpec"]["workerPoolSpecs"][0]
    assert pool["replicaCount"] == "1"  # int64 as a string, like the v1 API
    assert body["jobSpec"]["scheduling"] == {"strategy": "FLEX_START", "timeout": "604800s",
                                             "maxWaitDuration": "1800s"}


def test_it_rejects_viewer(api):
    response = api("vic").post(BASE, job_body(container_pool()), format="json")
    assert response.status_code == 403
    assert response.json()["error"]["status"] == "PERMISSION_DENIED"
    assert "aiplatform.customJobs.create" in response.json()["error"]["message"]
    assert not CustomJob.objects.exists()


def test_it_hides_other_projects(api):
    response = api("mallory").post(BASE, job_body(container_pool()), format="json")
    assert response.status_code == 404
    assert response.json()["error"]["status"] == "NOT_FOUND"


def test_it_requires_authentication(client, cast):
    response = client.post(BASE, {}, content_type="application/json")
    assert response.status_code == 401
    assert response.json()["error"]["status"] == "UNAUTHENTICATED"
    assert response["WWW-Authenticate"].startswith("Bearer")


def test_it_rejects_a_wrong_token(client, cast):
    response = client.get(BASE, HTTP_AUTHORIZATION="Bearer th_not-a-token")
    assert response.status_code == 401


def test_invalid_spec_is_400_with_field_violations(api):
    body = job_body(container_pool("a2-highgpu-1g", accelerator="NVIDIA_TESLA_T4"))
    response = api("uma").post(BASE, body, format="json")
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == 400 and error["status"] == "INVALID_ARGUMENT"
    detail = error["details"][0]
    assert detail["@type"] == "type.googleapis.com/google.rpc.BadRequest"
    assert detail["fieldViolations"][0]["field"] == "jobSpec.workerPoolSpecs[0].machineSpec.acceleratorType"
    assert not CustomJob.objects.exists()


def test_malformed_json_is_400_not_500(api):
    response = api("uma").post(BASE, data="{not json", content_type="application/json")
    assert response.status_code == 400
    assert response.json()["error"]["status"] == "INVALID_ARGUMENT"


def test_a_body_over_the_upload_limit_is_400_not_500(api, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    body = json.dumps({"displayName": "x" * 2000})
    response = api("uma").post(BASE, data=body, content_type="application/json")
    assert response.status_code == 400
    assert response.json()["error"] == {"code": 400, "status": "INVALID_ARGUMENT", "details": [],
                                        "message": "Request payload size exceeds the limit: 1000 bytes."}


def test_nul_characters_are_refused_in_bodies_paths_and_query_strings(api):
    """PostgreSQL text cannot hold NUL: a request carrying one was a 500 there."""
    body = job_body(container_pool(), name="x")
    body["jobSpec"]["baseOutputDirectory"] = {"outputUriPrefix": "gs://bucket/\u0000"}
    answer = api("uma").post(BASE, data=json.dumps(body), content_type="application/json")
    assert answer.status_code == 400
    assert "NUL characters" in answer.json()["error"]["message"]
    for path in (f"{BASE}/%00", f"{BASE}?filter=display_name%3D%22%00%22",
                 "/v1/projects/%00/locations/us-central1/customJobs"):
        answer = api("uma").get(path)
        assert answer.status_code == 400, path
        assert answer.json()["error"]["status"] == "INVALID_ARGUMENT", path
    assert not CustomJob.objects.exists()


def test_a_json_list_body_is_400(api):
    response = api("uma").post(BASE, data="[1, 2]", content_type="application/json")
    assert response.status_code == 400


def test_non_json_content_type_is_400(api):
    response = api("uma").post(BASE, data="a=b", content_type="application/x-www-form-urlencoded")
    assert response.status_code == 400
    assert response.json()["error"]["status"] == "INVALID_ARGUMENT"


def test_unknown_api_path_is_a_json_404(api):
    response = api("uma").get("/v1/projects/alpha/locations/us-central1/widgets")
    assert response.status_code == 404
    assert response.json()["error"]["status"] == "NOT_FOUND"


def test_a_submission_costs_the_same_few_queries_however_many_replicas(api, cast):
    """Token with the membership, quota limits, then the job and its creation event: one statement on
    PostgreSQL, elsewhere two INSERTs in one transaction (a savepoint inside the test's own).
    Nothing per replica or pool, nothing read back for the answer."""
    client = api("uma")
    client.post(BASE, job_body(container_pool()), format="json")  # the token's last_used is recorded once
    gpu_pool = partial(container_pool, "a2-highgpu-1g", accelerator="NVIDIA_TESLA_A100")
    statements = {}
    for replicas, body in ((1, job_body(gpu_pool())), (16, job_body(gpu_pool(), gpu_pool(replicas=15)))):
        with CaptureQueriesContext(connection) as captured:
            assert client.post(BASE, body, format="json").status_code == 200
        statements[replicas] = [query["sql"].split(None, 1)[0].upper() for query in captured.captured_queries]
    assert CustomJob.objects.get(replica_count=16).gpu_count == 16
    insert = ["WITH"] if connection.vendor == "postgresql" else ["SAVEPOINT", "INSERT", "INSERT", "RELEASE"]
    assert statements[1] == statements[16] == ["SELECT", "SELECT", *insert]


@pytest.mark.django_db(transaction=True)  # outside a transaction, as in production: on-commit writes run at once
def test_a_submission_queues_the_job_asks_for_a_pass_and_bumps_live_pages_in_one_redis_round_trip(
        api, cast, redis_client, monkeypatch):
    client = api("uma")
    client.post(BASE, job_body(container_pool()), format="json")  # the token's last_used is recorded once
    redis_client.delete(PASS_REQUESTED)
    live_before = int(redis_client.get(LIVE_VERSION) or 0)
    tasks_sent, round_trips = [], []
    monkeypatch.setattr(tasks.scheduler_pass, "delay", lambda: tasks_sent.append(1))
    execute, command = redis.client.Pipeline.execute, redis.Redis.execute_command
    monkeypatch.setattr(redis.client.Pipeline, "execute",
                        lambda pipe, *a, **k: round_trips.append("pipeline") or execute(pipe, *a, **k))
    monkeypatch.setattr(redis.Redis, "execute_command",
                        lambda r, *a, **k: round_trips.append(a[0]) or command(r, *a, **k))
    response = client.post(BASE, job_body(container_pool()), format="json")
    assert response.status_code == 200
    job = CustomJob.objects.get(job_id=response.json()["name"].rsplit("/", 1)[1])
    assert round_trips == ["pipeline"]
    monkeypatch.undo()
    assert working_memory.pending_ids(redis_client)[-1] == job.pk
    assert redis_client.hexists(working_memory.DETAILS, job.pk)
    assert redis_client.exists(PASS_REQUESTED) and tasks_sent == [1]
    assert int(redis_client.get(LIVE_VERSION)) == live_before + 1


def test_a_submission_is_stored_even_when_redis_does_not_answer(api, cast, monkeypatch):
    def refuse(*args, **kwargs):
        raise RedisConnectionError("connection refused")

    monkeypatch.setattr(redis.client.Pipeline, "execute", refuse)
    monkeypatch.setattr(tasks.scheduler_pass, "delay", lambda: None)
    response = api("uma").post(BASE, job_body(container_pool()), format="json")
    assert response.status_code == 200
    job = CustomJob.objects.get(job_id=response.json()["name"].rsplit("/", 1)[1])
    assert list(job.events.values_list("state", flat=True)) == ["JOB_STATE_QUEUED"]


def test_a_location_that_no_column_can_hold_is_400_naming_it_on_every_create(api):
    """PostgreSQL refuses a location over 32 characters: every create with one was a 500 there."""
    long = "l" * 33
    for path, body in ((f"/v1/projects/alpha/locations/{long}/customJobs", job_body(container_pool())),
                       (f"/v1/projects/alpha/locations/{long}/hyperparameterTuningJobs", {}),
                       (f"/v1/projects/alpha/locations/{long}/trainingPipelines", {}),
                       (f"/v1/projects/alpha/locations/{long}/persistentResources?persistentResourceId=r1", {}),
                       ("/v1/projects/alpha/locations/US_Central1/customJobs", job_body(container_pool()))):
        answer = api("alice").post(path, body, format="json")
        assert answer.status_code == 400, path
        assert answer.json()["error"]["details"][0]["fieldViolations"][0]["field"] == "location", path
    assert not CustomJob.objects.exists()
