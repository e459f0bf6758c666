import datetime as dt

import pytest

from tests.conftest import container_pool, job_body
from trainhub.jobs import services, states
from trainhub.jobs.models import CustomJob

BASE = "/v1/projects/alpha/locations/us-central1/customJobs"


@pytest.fixture
def jobs(cast, now):
    created = []
    for index in range(5):
        body = job_body(container_pool(), name=f"train-{index}")
        body["labels"] = {"team": "vision" if index % 2 else "nlp"}
        created.append(services.job_submit(project=cast["alpha"], location="us-central1", user=cast["uma"],
                                           body=body, now=now + dt.timedelta(seconds=index)))
    return created


def test_get_returns_the_job(api, jobs):
    response = api("vic").get(f"{BASE}/{jobs[0].job_id}")
    assert response.status_code == 200
    assert response.json()["displayName"] == "train-0"


def test_get_of_another_projects_job_is_404(api, jobs):
    assert api("mallory").get(f"{BASE}/{jobs[0].job_id}").status_code == 404
    response = api("mallory").get(f"/v1/projects/beta/locations/us-central1/customJobs/{jobs[0].job_id}")
    assert response.status_code == 404


def test_list_pages_newest_first_with_tokens(api, jobs):
    first = api("vic").get(BASE, {"pageSize": 2}).json()
    assert [j["displayName"] for j in first["customJobs"]] == ["train-4", "train-3"]
    second = api("vic").get(BASE, {"pageSize": 2, "pageToken": first["nextPageToken"]}).json()
    assert [j["displayName"] for j in second["customJobs"]] == ["train-2", "train-1"]
    third = api("vic").get(BASE, {"pageSize": 2, "pageToken": second["nextPageToken"]}).json()
    assert [j["displayName"] for j in third["customJobs"]] == ["train-0"]
    assert "nextPageToken" not in third


def test_list_rejects_a_forged_page_token_and_bad_page_size(api, jobs):
    assert api("vic").get(BASE, {"pageToken": "garbage!"}).status_code == 400
    assert api("vic").get(BASE, {"pageSize": "-1"}).status_code == 400


@pytest.mark.parametrize(
    "expression, expected",
    [
        ('display_name="train-1"', ["train-1"]),
        ('display_name:"train-*" AND labels.team=vision', ["train-3", "train-1"]),
        ('displayName!="train-0" AND labels.team="nlp"', ["train-4", "train-2"]),
        ('state="JOB_STATE_CANCELLED"', ["train-2"]),
        ('state!="JOB_STATE_QUEUED"', ["train-2"]),
        ("labels.team:*", ["train-4", "train-3", "train-2", "train-1", "train-0"]),
    ],
)
def test_list_filters_like_vertex(api, jobs, expression, expected):
    services.job_cancel(job=jobs[2])
    response = api("vic").get(BASE, {"filter": expression})
    assert response.status_code == 200, response.content
    assert [j["displayName"] for j in response.json()["customJobs"]] == expected


def test_list_filters_on_create_time(api, jobs):
    cutoff = jobs[2].create_time.strftime("%Y-%m-%dT%H:%M:%SZ")
    names = [j["displayName"] for j in api("vic").get(BASE, {"filter": f'create_time>"{cutoff}"'}).json()["customJobs"]]
    assert names == ["train-4", "train-3"]


@pytest.mark.parametrize("expression", ['colour="red"', 'state>"JOB_STATE_QUEUED"', "display_name", 'a="b" OR c="d"',
                                        'create_time>"yesterday"'])
def test_list_rejects_bad_filters(api, jobs, expression):
    response = api("vic").get(BASE, {"filter": expression})
    assert response.status_code == 400
    assert response.json()["error"]["details"][0]["fieldViolations"][0]["field"] == "filter"


def test_list_query_count_is_constant(api, jobs, django_assert_max_num_queries, cast):
    client = api("vic")
    with django_assert_max_num_queries(8):
        assert len(client.get(BASE).json()["customJobs"]) == 5
    for index in range(20):
        services.job_submit(project=cast["alpha"], location="us-central1", user=cast["uma"],
                            body=job_body(container_pool(), name=f"more-{index}"))
    with django_assert_max_num_queries(8):
        assert len(client.get(BASE).json()["customJobs"]) == 25


def test_cancel_of_a_queued_job_cancels_it_and_sets_error_code_1(api, jobs):
    response = api("uma").post(f"{BASE}/{jobs[0].job_id}:cancel", {}, format="json")
    assert response.status_code == 200 and response.json() == {}
    body = api("uma").get(f"{BASE}/{jobs[0].job_id}").json()
    assert body["state"] == "JOB_STATE_CANCELLED"
    assert body["error"]["code"] == 1
    assert body["endTime"]


def test_cancel_of_a_finished_job_is_a_no_op(api, jobs):
    api("uma").post(f"{BASE}/{jobs[0].job_id}:cancel", {}, format="json")
    first = api("uma").get(f"{BASE}/{jobs[0].job_id}").json()
    assert api("uma").post(f"{BASE}/{jobs[0].job_id}:cancel", {}, format="json").status_code == 200
    assert api("uma").get(f"{BASE}/{jobs[0].job_id}").json()["updateTime"] == first["updateTime"]


def test_viewer_cannot_cancel_or_delete(api, jobs):
    assert api("vic").post(f"{BASE}/{jobs[0].job_id}:cancel", {}, format="json").status_code == 403
    assert api("vic").delete(f"{BASE}/{jobs[0].job_id}").status_code == 403
    assert CustomJob.objects.get(pk=jobs[0].pk).state == states.QUEUED


def test_delete_needs_a_finished_job_and_returns_an_operation(api, jobs):
    response = api("uma").delete(f"{BASE}/{jobs[1].job_id}")
    assert response.status_code == 400
    assert response.json()["error"]["status"] == "FAILED_PRECONDITION"
    api("uma").post(f"{BASE}/{jobs[1].job_id}:cancel", {}, format="json")
    response = api("uma").delete(f"{BASE}/{jobs[1].job_id}")
    assert response.status_code == 200
    operation = response.json()
    assert operation["done"] is True
    assert "/operations/" in operation["name"]
    assert api("uma").get(f"{BASE}/{jobs[1].job_id}").status_code == 404


def test_logs_endpoint_rejects_a_bad_task_name(api, jobs):
    response = api("vic").get(f"{BASE}/{jobs[0].job_id}/logs", {"taskName": "chief"})
    assert response.status_code == 400


def test_openapi_schema_renders(api):
    response = api("vic").get("/api/schema/")
    assert response.status_code == 200
    assert b"customJobs.create" in response.content
