"""Bad input: schemathesis drives every operation of /api/schema/ against the in-process WSGI app.

Valid and invalid bodies, parameters and paths (a bounded number per operation): never a 5xx,
every 4xx in Google's error format, every answer as the schema documents it. Path parameters
are steered to real resources most of the time (alpha's resources of every kind, the values the
access tests fill routes with), so requests get past the 404 of an unknown resource and reach
the parsers and services behind it. Admin-only operations are called by alice, admin of alpha and
platform admin, so their bodies get past the 403; the others by uma (USER) and alice in turn.
"""

from __future__ import annotations

import zlib

import pytest
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.core import NotSet
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from tests.conftest import container_pool, job_body, raw_token
from tests.security.conftest import API_SCHEMA, assert_in_google_error_format
from trainhub.jobs import services, states
from trainhub.jobs.models import CustomJob

FINISHED_JOB = "222222222222222222"
#: Values tried besides alpha's: a project the caller has no role in, a location alpha has nothing
#: in, and a finished job (which can be deleted).
OTHER_VALUES = {"project": ["beta"], "location": ["europe-west4"], "job_id": [FINISHED_JOB]}
#: Operations only a project (and, for Slurm clusters, platform) admin may call; the others are a
#: project member's, called by uma (USER) and alice (admin) in turn.
ADMIN_ONLY = {"persistentResources.create", "persistentResources.patch", "persistentResources.delete",
              "persistentResources.reboot", "slurmClusters.create", "slurmClusters.delete",
              "slurmClusters.updateConfig", "slurmClusters.updateScripts"}


def turn(case) -> int:
    """A number drawn from the case's own content, so that hypothesis, replaying a failing example,
    steers and authenticates it the same way again."""
    body = None if isinstance(case.body, NotSet) else case.body
    return zlib.crc32(repr((case.path_parameters, case.query, body)).encode())


def steer(case, values: dict[str, str]) -> dict:
    """Three cases in four name alpha's real resources in every path parameter; the fourth changes
    one parameter to another real value (another project, location, job) or leaves it as generated
    (which must 404 cleanly).

    Done in the test rather than in a schemathesis hook so that every generation phase (the
    schema's examples, fuzzing) is steered alike."""
    generated = case.path_parameters or {}
    steered = {name: values[name] for name in generated}
    number = turn(case)
    if generated and number % 4 == 0:
        name = sorted(generated)[number // 4 % len(generated)]
        choices = OTHER_VALUES.get(name, []) + [generated[name]]
        steered[name] = choices[number // 16 % len(choices)]
    return steered


def caller(case, cast):
    """alice for admin-only operations; uma (USER) or alice in turn for the others."""
    if case.operation.definition.raw.get("operationId") in ADMIN_ONLY or turn(case) // 64 % 2:
        return cast["alice"]
    return cast["uma"]


def google_error_format(ctx, response, case):
    """Every 4xx is in Google's error format."""
    if 400 <= response.status_code < 500:
        assert_in_google_error_format(response.status_code, response.json())


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
def fuzz_values(alpha_values, cast, test_transaction_kept):
    """alpha's resources, and a finished job of alpha's."""
    done = services.job_submit(project=cast["alpha"], location="us-central1", user=cast["uma"],
                               body=job_body(container_pool(), name="finished"))
    CustomJob.objects.filter(pk=done.pk).update(job_id=FINISHED_JOB, state=states.SUCCEEDED,
                                                 end_time=done.create_time)
    return alpha_values


# The explicit examples and MAX_EXAMPLES generated cases per operation (valid and invalid). The
# coverage phase stays off: it sends every case the schema defines whatever max_examples says -
# over a thousand for a training pipeline's body - which would make this file's time grow with
# each schema detail.
API_SCHEMA.config.phases.coverage.enabled = False
MAX_EXAMPLES = 25


@API_SCHEMA.parametrize()
@settings(max_examples=MAX_EXAMPLES, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
def test_every_operation_answers_bad_input_without_a_5xx_and_in_the_error_format(case, cast, fuzz_values):
    token = raw_token(caller(case, cast))
    case.path_parameters = steer(case, fuzz_values)
    case.call_and_validate(
        headers={"Authorization": f"Bearer {token}"},
        checks=[not_a_server_error, google_error_format, status_code_conformance, content_type_conformance,
                response_schema_conformance],
    )
