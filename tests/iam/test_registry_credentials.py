"""Per-project registry credentials: set by administrators, sealed at rest, handed only to the node
running that project's replica whose image lives on that registry."""

import json

import pytest
from django.db import connection
from django.test import override_settings
from django.utils import timezone

from tests.conftest import container_pool, job_body
from trainhub.common.sealing import Unsealable, unseal
from trainhub.iam.models import RegistryCredential
from trainhub.iam.selectors import image_registry
from trainhub.iam.services import registry_credential_set, user_ensure
from trainhub.inventory.assignments import node_assignments
from trainhub.jobs.models import CustomJob
from trainhub.scheduling.services import scheduler_pass

pytestmark = pytest.mark.django_db
PATH = "/v1/projects/alpha/registryCredentials"


@pytest.fixture
def staff(cast):
    from rest_framework.test import APIClient

    client = APIClient()
    client.force_authenticate(user_ensure(username="ops", password="ops-password-1", is_staff=True))
    return client


def test_an_admin_sets_lists_and_deletes_a_credential_and_the_password_is_sealed(staff):
    answer = staff.put(f"{PATH}/registry.example.com:5000", {"username": "robot", "password": "s3cret-pass"},
                       format="json")
    assert answer.status_code == 200, answer.content
    listed = staff.get(PATH).json()["registryCredentials"]
    assert [(c["registry"], c["username"]) for c in listed] == [("registry.example.com:5000", "robot")]
    assert "s3cret-pass" not in json.dumps(listed)
    with connection.cursor() as cursor:
        cursor.execute("SELECT sealed_password FROM iam_registrycredential")
        (sealed,) = cursor.fetchone()
    assert "s3cret-pass" not in sealed and unseal(sealed) == "s3cret-pass"
    assert staff.delete(f"{PATH}/registry.example.com:5000").status_code == 200
    assert staff.delete(f"{PATH}/registry.example.com:5000").status_code == 404


def test_a_project_admin_who_is_not_a_platform_admin_cannot_set_one(api):
    answer = api("alice").put(f"{PATH}/registry.example.com", {"username": "u", "password": "p"}, format="json")
    assert answer.status_code == 403 and "platform administrators" in answer.json()["error"]["message"]


def test_bad_bodies_name_the_field(staff):
    answer = staff.put(f"{PATH}/registry.example.com", {"username": "", "password": "x" * 300}, format="json")
    assert answer.status_code == 400
    fields = {v["field"] for v in answer.json()["error"]["details"][0]["fieldViolations"]}
    assert fields == {"username", "password"}


def test_a_sealed_password_cannot_be_opened_under_another_secret_key(cast):
    credential = registry_credential_set(project=cast["alpha"], registry="r.example", username="u", password="p",
                                         actor="ops", now=timezone.now())
    with override_settings(SECRET_KEY="another-key-entirely-another-key-entirely"), pytest.raises(Unsealable):
        unseal(RegistryCredential.objects.get(pk=credential.pk).sealed_password)


@pytest.mark.parametrize("image, registry", [("ghcr.io/a/b:1", "ghcr.io"), ("127.0.0.1:5000/x:1", "127.0.0.1:5000"),
                                             ("python:3.11", "docker.io"), ("library/python", "docker.io"),
                                             ("localhost/bb:1", "localhost")])
def test_an_images_registry_is_read_as_docker_reads_it(image, registry):
    assert image_registry(image) == registry


@pytest.mark.django_db(transaction=True)
def test_only_the_node_running_the_projects_replica_gets_its_login(api, cast, nodes, now):
    registry_credential_set(project=cast["alpha"], registry="registry.example.com", username="robot",
                            password="pull-only", actor="ops", now=now)
    body = job_body(container_pool(command=["true"]))
    body["jobSpec"]["workerPoolSpecs"][0]["containerSpec"]["imageUri"] = "registry.example.com/team/train:1"
    assert api("uma").post("/v1/projects/alpha/locations/us-central1/customJobs", body, format="json").status_code == 200
    scheduler_pass(now=now)
    replica = CustomJob.objects.get().replicas.select_related("node").get()
    mine = node_assignments(node=replica.node)["replicas"][0]
    assert mine["registryLogin"] == {"registry": "registry.example.com", "username": "robot", "password": "pull-only"}
    others = [node for pool in nodes.values() for node in pool.nodes.all() if node.pk != replica.node_id]
    assert all(node_assignments(node=node)["replicas"] == [] for node in others)
