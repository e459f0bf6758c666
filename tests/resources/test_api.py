"""REST: /v1/projects/{p}/locations/{l}/persistentResources, its operations, wire formats,
permissions and other projects."""

import pytest

from tests.resources.conftest import T4, create, t4_pool
from trainhub.resources import services
from trainhub.resources.models import PersistentResource, ResourceOperation

pytestmark = pytest.mark.django_db

BASE = "/v1/projects/alpha/locations/us-central1/persistentResources"

#: The seed's pool (n1-standard-4, replica_count 1) as the Python SDK sends it: snake_case,
#: enums as numbers, int64 as strings (`$alt=json;enum-encoding=int`).
SDK_BODY = {"display_name": "seed", "resource_pools": [
    {"machine_spec": {"machine_type": "n1-standard-4", "accelerator_type": 5, "accelerator_count": 1},
     "replica_count": "1"}]}


def advance(now):
    services.persistent_resources_advance(now=now)


def created(api, now, resource_id="pr", body=None, user="alice"):
    response = api(user).post(f"{BASE}?persistentResourceId={resource_id}", body or SDK_BODY, format="json")
    assert response.status_code == 200, response.content
    advance(now)
    return response.json()


def test_create_answers_a_pollable_operation_that_ends_with_the_resource(api, nodes, now):
    operation = api("alice").post(f"{BASE}?persistent_resource_id=pr", SDK_BODY, format="json").json()
    assert operation["done"] is False
    assert operation["metadata"]["@type"] == ("type.googleapis.com/google.cloud.aiplatform.v1."
                                              "CreatePersistentResourceOperationMetadata")
    assert operation["name"].startswith("projects/alpha/locations/us-central1/persistentResources/pr/operations/")
    advance(now)
    polled = api("vic").get(f"/v1/{operation['name']}").json()
    assert polled["done"] is True and "error" not in polled
    resource = polled["response"]
    assert resource["@type"] == "type.googleapis.com/google.cloud.aiplatform.v1.PersistentResource"
    assert resource["state"] == "RUNNING"
    (pool,) = resource["resourcePools"]
    assert pool == {"id": "n1-standard-4-nvidia-tesla-t4", "machineSpec": T4, "replicaCount": "1",
                    "diskSpec": {"bootDiskType": "pd-ssd", "bootDiskSizeGb": 100}, "usedReplicaCount": "0"}


def test_an_operation_is_also_found_under_the_locations_operations(api, nodes, now):
    operation = created(api, now)
    operation_id = operation["name"].rsplit("/", 1)[1]
    polled = api("vic").get(f"/v1/projects/alpha/locations/us-central1/operations/{operation_id}").json()
    assert polled["name"] == operation["name"] and polled["done"]


def test_get_and_list_render_the_resource(api, nodes, now):
    created(api, now, "first")
    created(api, now, "second", {"displayName": "two", "labels": {"team": "nlp"}, "network": "projects/1/global/n",
                                 "resourcePools": [t4_pool(1, "p")]})
    resource = api("vic").get(f"{BASE}/second").json()
    assert resource["name"] == "projects/alpha/locations/us-central1/persistentResources/second"
    assert (resource["displayName"], resource["labels"], resource["network"]) == ("two", {"team": "nlp"},
                                                                                 "projects/1/global/n")
    assert resource["startTime"] and resource["createTime"]
    assert resource["trainhubStatus"]["resourcePools"] == [{"id": "p", "provisionedReplicaCount": "1",
                                                            "usedReplicaCount": "0", "freeReplicaCount": "1"}]
    assert resource["trainhubStatus"]["cost"]["perHour"]["gpuHours"] == {"NVIDIA_TESLA_T4": 1.0}
    page = api("vic").get(f"{BASE}?pageSize=1").json()
    assert [r["name"].rsplit("/", 1)[1] for r in page["persistentResources"]] == ["second"]
    rest = api("vic").get(f"{BASE}?pageSize=1&pageToken={page['nextPageToken']}").json()
    assert [r["name"].rsplit("/", 1)[1] for r in rest["persistentResources"]] == ["first"]
    assert "nextPageToken" not in rest


def test_list_runs_a_constant_number_of_queries(api, cast, nodes, now, django_assert_max_num_queries):
    for index in range(3):
        create(cast, now, t4_pool(1), resource_id=f"pr-{index}")
    advance(now)
    client = api("vic")
    with django_assert_max_num_queries(8):
        assert len(client.get(BASE).json()["persistentResources"]) == 3


def test_an_invalid_id_or_body_is_a_400_listing_the_fields(api, nodes):
    response = api("alice").post(f"{BASE}?persistentResourceId=Bad_Id", SDK_BODY, format="json")
    assert response.status_code == 400
    assert response.json()["error"]["details"][0]["fieldViolations"][0]["field"] == "persistentResourceId"
    response = api("alice").post(f"{BASE}?persistentResourceId=ok", {"resourcePools": [
        {"machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": "0"}]}, format="json")
    assert response.json()["error"]["details"][0]["fieldViolations"][0]["field"] == "resourcePools[0].replicaCount"


def test_a_duplicate_id_is_409(api, nodes, now):
    created(api, now)
    error = api("alice").post(f"{BASE}?persistentResourceId=pr", SDK_BODY, format="json").json()["error"]
    assert (error["code"], error["status"]) == (409, "ALREADY_EXISTS")


def test_patch_resizes_through_an_operation(api, nodes, now):
    created(api, now, body={"resourcePools": [t4_pool(1)]})
    operation = api("alice").patch(f"{BASE}/pr?updateMask=resourcePools.replicaCount",
                                   {"resourcePools": [{"id": "t4", "replicaCount": "2"}]}, format="json").json()
    assert operation["metadata"]["@type"].endswith("UpdatePersistentResourceOperationMetadata")
    assert api("vic").get(f"{BASE}/pr").json()["state"] == "UPDATING"
    advance(now)
    done = api("vic").get(f"/v1/{operation['name']}").json()
    assert done["done"] and done["response"]["resourcePools"][0]["replicaCount"] == "2"


def test_patch_refuses_a_path_it_cannot_update_naming_it(api, nodes, now):
    created(api, now)
    error = api("alice").patch(f"{BASE}/pr?update_mask=network", {"network": "x"}, format="json").json()["error"]
    assert error["code"] == 400
    assert error["details"][0]["fieldViolations"][0]["field"] == "network"
    assert api("alice").patch(f"{BASE}/pr", {}, format="json").json()["error"]["details"][0][
        "fieldViolations"][0]["field"] == "updateMask"


def test_reboot_is_only_for_running_or_error(api, cast, nodes, now):
    create(cast, now, t4_pool(1))
    error = api("alice").post(f"{BASE}/pr:reboot", {}, format="json").json()["error"]
    assert (error["code"], error["status"]) == (400, "FAILED_PRECONDITION")
    advance(now)
    operation = api("alice").post(f"{BASE}/pr:reboot", {}, format="json").json()
    assert operation["metadata"]["@type"].endswith("RebootPersistentResourceOperationMetadata")
    assert api("vic").get(f"{BASE}/pr").json()["state"] == "REBOOTING"


def test_delete_answers_an_operation_that_stays_pollable_after_the_resource_is_gone(api, nodes, now):
    created(api, now)
    operation = api("alice").delete(f"{BASE}/pr").json()
    assert operation["metadata"]["@type"].endswith("DeleteOperationMetadata") and not operation["done"]
    assert api("vic").get(f"{BASE}/pr").json()["state"] == "STOPPING"
    advance(now)
    assert api("vic").get(f"{BASE}/pr").status_code == 404
    done = api("vic").get(f"/v1/{operation['name']}").json()
    assert done["done"] and done["response"] == {"@type": "type.googleapis.com/google.protobuf.Empty"}
    assert api("vic").get(BASE).json()["persistentResources"] == []


def test_a_failed_operation_carries_the_error(api, cast, nodes, now):
    create(cast, now, t4_pool(3), resource_id="hog")
    advance(now)
    operation = created(api, now)
    polled = api("vic").get(f"/v1/{operation['name']}").json()
    assert polled["done"] and polled["error"]["code"] == 8 and "response" not in polled
    assert api("vic").get(f"{BASE}/pr").json()["error"]["code"] == 8


# Permissions -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("user, can_read, can_manage", [("vic", True, False), ("uma", True, False),
                                                        ("alice", True, True)])
def test_viewers_and_users_read_and_admins_manage(api, cast, nodes, now, user, can_read, can_manage):
    create(cast, now, t4_pool(1), resource_id="existing")
    advance(now)
    client = api(user)
    assert (client.get(BASE).status_code == 200) == can_read
    assert (client.get(f"{BASE}/existing").status_code == 200) == can_read
    statuses = [
        client.post(f"{BASE}?persistentResourceId=new", SDK_BODY, format="json").status_code,
        client.patch(f"{BASE}/existing?updateMask=displayName", {"displayName": "x"}, format="json").status_code,
        client.post(f"{BASE}/existing:reboot", {}, format="json").status_code,
        client.delete(f"{BASE}/existing").status_code,
    ]
    assert statuses == ([200] * 4 if can_manage else [403] * 4)


def test_a_refusal_names_the_missing_permission(api, cast, nodes, now):
    error = api("uma").post(f"{BASE}?persistentResourceId=x", SDK_BODY, format="json").json()["error"]
    assert "aiplatform.persistentResources.create" in error["message"]


def test_another_projects_resources_and_operations_are_404(api, cast, nodes, now):
    operation = create(cast, now, t4_pool(1))
    advance(now)
    stranger = api("mallory")
    assert stranger.get(f"{BASE}/pr").status_code == 404
    assert stranger.get(BASE).status_code == 404
    assert stranger.get(f"/v1/{operation.name}").status_code == 404
    assert stranger.delete(f"{BASE}/pr").status_code == 404
    assert stranger.post(f"{BASE}/pr:reboot", {}, format="json").status_code == 404
    assert stranger.get(f"/v1/projects/beta/locations/us-central1/operations/{operation.operation_id}").status_code \
        == 404
    assert PersistentResource.objects.get().state == "RUNNING"


def test_an_operation_is_not_found_under_another_resources_name(api, cast, nodes, now):
    operation = create(cast, now, t4_pool(1))
    response = api("vic").get(f"{BASE}/other/operations/{operation.operation_id}")
    assert response.status_code == 404


def test_anonymous_callers_are_refused(client, cast, nodes, now):
    operation = create(cast, now, t4_pool(1))
    for method, path in [("get", BASE), ("post", BASE), ("get", f"{BASE}/pr"), ("patch", f"{BASE}/pr"),
                         ("delete", f"{BASE}/pr"), ("post", f"{BASE}/pr:reboot"), ("get", f"/v1/{operation.name}")]:
        assert getattr(client, method)(path, content_type="application/json").status_code == 401, (method, path)
    assert ResourceOperation.objects.count() == 1
