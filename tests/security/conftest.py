"""What the security tests share: one of every kind of alpha's resources, the values that fill
every route parameter of the URL conf with them (tests/security/urlconf.py), the API's OpenAPI
schema and the shape of its errors."""

import pytest
import schemathesis
from django.core.wsgi import get_wsgi_application

from tests.conftest import container_pool, job_body
from tests.slurm.conftest import accounts, admin, cluster, make_job, slurm_pools  # noqa: F401 - fixtures
from trainhub.jobs import services
from trainhub.resources import services as resource_services
from trainhub.slurm.models import Association
from trainhub.tuning import services as tuning_services
from trainhub.tuning.models import Model, ModelVersion
from trainhub.tuning.spec import CUSTOM_TASK

SECRET = "alpha-secret-experiment"

# Loading the schema reads no database: it is generated from the URL conf and the views.
API_SCHEMA = schemathesis.openapi.from_wsgi("/api/schema/", get_wsgi_application())


def assert_in_google_error_format(status_code: int, document: object) -> None:
    """A 4xx body is {"error": {"code", "message", "status"}} with the HTTP status as its code."""
    error = document.get("error") if isinstance(document, dict) else None
    assert isinstance(error, dict), f"4xx without an error object: {str(document)[:300]}"
    assert error.get("code") == status_code, error
    assert isinstance(error.get("message"), str) and error["message"], error
    assert isinstance(error.get("status"), str) and error["status"].isupper(), error


@pytest.fixture
def alpha_job(cast):
    return services.job_submit(project=cast["alpha"], location="us-central1", user=cast["uma"],
                               body=job_body(container_pool(), name=SECRET))


@pytest.fixture
def alpha_values(alpha_job, cast, nodes, accounts, now):
    """Route parameters pointing at alpha's resources: one of every kind (alice, alpha's admin, is
    also a platform admin; the Slurm job is uma's)."""
    alpha = cast["alpha"]
    slurm_job = make_job(accounts, name=SECRET, now=now)
    association = Association.objects.filter(cluster=accounts, user="uma").first()
    operation = resource_services.persistent_resource_create(
        project=alpha, location="us-central1", resource_id="secret-resource", user=cast["alice"], now=now,
        body={"displayName": SECRET, "resourcePools": [
            {"machineSpec": {"machineType": "n1-standard-4", "acceleratorType": "NVIDIA_TESLA_T4",
                             "acceleratorCount": 1}, "replicaCount": 1}]})
    trial_job = {"workerPoolSpecs": [container_pool()]}
    study = {"metrics": [{"metricId": "score", "goal": "MAXIMIZE"}],
             "parameters": [{"parameterId": "x", "discreteValueSpec": {"values": [1, 2]}}],
             "algorithm": "GRID_SEARCH"}
    tuning_job = tuning_services.tuning_job_create(
        project=alpha, location="us-central1", user=cast["uma"],
        body={"displayName": SECRET, "studySpec": study, "maxTrialCount": 2, "parallelTrialCount": 1,
              "trialJobSpec": trial_job})
    pipeline = tuning_services.pipeline_create(
        project=alpha, location="us-central1", user=cast["uma"],
        body={"displayName": SECRET, "trainingTaskDefinition": CUSTOM_TASK,
              "trainingTaskInputs": trial_job})
    model = Model.objects.create(project=alpha, location="us-central1", model_id="secret-model",
                                 display_name=SECRET, create_time=now, update_time=now)
    # A pipeline registers a model with its first version, in one transaction: no model is without one.
    ModelVersion.objects.create(model=model, version=1, artifact_uri="gs://alpha/model/", create_time=now)
    return {"project": "alpha", "location": "us-central1", "job_id": alpha_job.job_id,
            "resource_id": "secret-resource", "operation_id": operation.operation_id,
            "tuning_job_id": tuning_job.job_id, "pipeline_id": pipeline.pipeline_id, "model_id": model.model_id,
            "cluster": accounts.cluster_id, "slurm_job_id": str(slurm_job.job_id), "kind": "prolog",
            "partition": "a4", "node": "a4-0", "pk": str(association.pk), "name": "normal",
            "key": "queue-depth", "pool": "a100", "replica_id": "1", "job_node_id": "1", "event": "prolog",
            "registry": "registry.example.com", "step_id": "0", "step_node_id": "1", "task": "0"}
