"""Bodies no field can hold answer 400 in Google's error format on the real endpoints, and store
nothing: a lone surrogate (named by its field), nesting 1,000 deep (also on the unauthenticated
/auth/token, whatever DEBUG is)."""

import json

import pytest
from django.test import Client

from tests.conftest import container_pool, job_body
from tests.json_documents import DEEP_TEXT
from tests.security.conftest import assert_in_google_error_format
from trainhub.jobs.models import CustomJob
from trainhub.resources.models import PersistentResource

JOBS = "/v1/projects/alpha/locations/us-central1/customJobs"


@pytest.mark.parametrize("body, field", [
    (job_body(container_pool(), name="\udc80"), "displayName"),
    (job_body(container_pool(command=["python3", "-c", "print('\udc80')"])),
     "jobSpec.workerPoolSpecs[0].containerSpec.command[2]"),
    ({**job_body(container_pool()), "labels": {"team": "ok\ud800"}}, "labels.team"),
])
def test_a_lone_surrogate_in_a_job_is_refused_naming_the_field_and_nothing_is_stored(api, nodes, body, field):
    response = api("uma").post(JOBS, json.dumps(body), content_type="application/json")
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert_in_google_error_format(400, response.json())
    assert error["details"][0]["fieldViolations"][0]["field"] == field
    assert not CustomJob.objects.exists()
    assert api("uma").get(JOBS).status_code == 200


@pytest.mark.parametrize("path, who", [("/auth/token", None), (JOBS, "uma")])
def test_a_lone_surrogate_in_a_key_is_refused_with_the_key_escaped_in_the_answer(api, cast, nodes, path, who):
    # Named as it was, the key made the 400 itself unencodable: a 500, unauthenticated on /auth/token.
    body = {**job_body(container_pool()), "labels": {"te\udc80am": "ok"}}
    client = api(who) if who else Client(raise_request_exception=False)
    response = client.post(path, json.dumps(body), content_type="application/json")
    assert response.status_code == 400, response.content[:300]
    assert_in_google_error_format(400, response.json())
    assert response.json()["error"]["details"][0]["fieldViolations"][0]["field"] == "labels.te\\udc80am"
    assert not CustomJob.objects.exists()


def test_a_lone_surrogate_in_a_persistent_resource_is_refused(api, nodes):
    body = {"displayName": "\udc80", "resourcePools": [{"machineSpec": {"machineType": "n1-standard-4"},
                                                          "replicaCount": 1}]}
    response = api("alice").post("/v1/projects/alpha/locations/us-central1/persistentResources?persistentResourceId=r",
                                 json.dumps(body), content_type="application/json")
    assert response.status_code == 400
    assert not PersistentResource.objects.exists()


@pytest.mark.parametrize("debug", [False, True])
@pytest.mark.parametrize("path, who", [("/auth/token", None), (JOBS, "uma"),
                                       ("/v1/projects/alpha/locations/us-central1/hyperparameterTuningJobs", "uma")])
def test_nesting_1000_deep_answers_400_in_googles_format_whatever_debug_is(api, cast, settings, debug, path, who):
    settings.DEBUG = debug
    client = api(who) if who else Client(raise_request_exception=False)
    response = client.post(path, DEEP_TEXT, content_type="application/json")
    assert response.status_code == 400, response.content[:300]
    assert response["Content-Type"] == "application/json"
    assert_in_google_error_format(400, response.json())
    assert "nested at most" in response.json()["error"]["message"]
