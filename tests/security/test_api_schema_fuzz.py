"""Bad input: schemathesis drives every operation of /api/schema/ against the in-process WSGI app.

Valid and invalid bodies, parameters and paths (a bounded number per operation): never a 5xx,
every 4xx in Google's error format, every answer as the schema documents it. Path parameters
are steered to real resources most of the time (the fixture's project and jobs), so requests get
past the 404 of an unknown project and reach the parsers and services behind it.
"""

from __future__ import annotations

import itertools

import pytest
import schemathesis
from django.core.signals import request_finished, request_started
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from tests.conftest import container_pool, job_body
from trainhub.iam.services import api_token_get_or_create
from trainhub.jobs import services, states
from trainhub.jobs.models import CustomJob

QUEUED_JOB = "111111111111111111"
FINISHED_JOB = "222222222222222222"
PATH_VALUES = {
    "project": ["alpha", "alpha", "alpha", "beta"],
    "location": ["us-central1", "us-central1", "us-central1", "europe-west4"],
    "job_id": [QUEUED_JOB, FINISHED_JOB, QUEUED_JOB],
}


_turns = itertools.count()


def steer(path_parameters: dict | None) -> dict | None:
    """Most path values become real ones, in turn; the rest stay as generated (and must 404 cleanly).

    Done in the test rather than in a schemathesis hook so that every generation phase (examples,
    coverage, fuzzing) is steered alike."""
    if not path_parameters:
        return path_parameters
    steered = dict(path_parameters)
    for name, value in path_parameters.items():
        choices = PATH_VALUES.get(name)
        if choices:
            pick = next(_turns) % (len(choices) + 1)
            steered[name] = choices[pick] if pick < len(choices) else value
    return steered


def google_error_format(ctx, response, case):
    """Every 4xx is {"error": {"code", "message", "status"}} with the HTTP status as its code."""
    if 400 <= response.status_code < 500:
        error = response.json().get("error")
        assert isinstance(error, dict), f"4xx without an error object: {response.text[:300]}"
        assert error.get("code") == response.status_code, error
        assert isinstance(error.get("message"), str) and error["message"], error
        assert isinstance(error.get("status"), str) and error["status"].isupper(), error


@pytest.fixture
def test_transaction_kept():
    """Calls go straight to the WSGI handler, whose request signals would close the test's database
    connection (it is inside a transaction); Django's own test client disconnects them the same way."""
    signals = (request_started, request_finished)
    for signal in signals:
        signal.disconnect(close_old_connections)
    yield
    for signal in signals:
        signal.connect(close_old_connections)


@pytest.fixture
def alpha_jobs(cast, test_transaction_kept):
    job = services.job_submit(project=cast["alpha"], location="us-central1", user=cast["uma"],
                              body=job_body(container_pool(), name="queued"))
    CustomJob.objects.filter(pk=job.pk).update(job_id=QUEUED_JOB)
    done = services.job_submit(project=cast["alpha"], location="us-central1", user=cast["uma"],
                               body=job_body(container_pool(), name="finished"))
    CustomJob.objects.filter(pk=done.pk).update(job_id=FINISHED_JOB, state=states.SUCCEEDED,
                                                 end_time=done.create_time)


# Loading the schema reads no database: it is generated from the URL conf and the views.
schema = schemathesis.openapi.from_wsgi("/api/schema/", get_wsgi_application())


@schema.parametrize()
@settings(max_examples=25, deadline=None, derandomize=True,
          suppress_health_check=list(HealthCheck))
def test_every_operation_answers_bad_input_without_a_5xx_and_in_the_error_format(case, cast, alpha_jobs):
    token = api_token_get_or_create(user=cast["uma"]).key
    case.path_parameters = steer(case.path_parameters)
    case.call_and_validate(
        headers={"Authorization": f"Bearer {token}"},
        checks=[not_a_server_error, google_error_format, status_code_conformance, content_type_conformance,
                response_schema_conformance],
    )
