"""Bad input, drawn by hypothesis: every operation's seed body (test_api_edge_values.SEED_BODIES)
with one place replaced by a hostile value (tests.json_documents.hostile_values: lone surrogates in
strings and keys, strings up to 200,000 characters, numbers up to 10**40, floats to 1e308, nested
arrays and objects), or the whole body buried up to 1,500 levels deep (hostile_texts). Every
answer is below 500, every 4xx in Google's error format, on whichever database the suite runs
(CI runs it on PostgreSQL too, where an overlong string or a big number reaches the columns)."""

from __future__ import annotations

import json
import logging
from urllib.parse import quote

from django.test import Client
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import raw_token
from tests.json_documents import hostile_texts, hostile_values, json_paths, replaced
from tests.security.test_api_edge_values import (  # noqa: F401 - real_values is a fixture
    OPERATIONS,
    SEED_BODIES,
    SEED_QUERIES,
    Probe,
    bug_report,
    problem,
    real_values,
    send,
)

WITH_BODY = [operation for operation in OPERATIONS if operation.takes_body]


@st.composite
def hostile_requests(draw) -> tuple:
    """An operation, and its seed body with one place hostile (or the whole text a hostile one)."""
    operation = draw(st.sampled_from(WITH_BODY))
    seed = SEED_BODIES[operation.operation_id]
    if draw(st.integers(0, 9)) == 0:
        return operation, "body (text)", draw(hostile_texts)
    place = draw(st.sampled_from(json_paths(seed)))
    value = draw(hostile_values)
    return operation, f"body {'.'.join(map(str, place)) or '(whole)'}", json.dumps(replaced(seed, place, value))


@given(request=hostile_requests())
@settings(max_examples=150, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
def test_a_hostile_value_in_any_body_answers_below_500_and_in_the_error_format(request, real_values, cast, caplog):
    operation, place, text = request
    client = Client(raise_request_exception=False, HTTP_AUTHORIZATION=f"Bearer {raw_token(cast['alice'])}")
    caplog.set_level(logging.ERROR)
    caplog.clear()
    path_values = {name: quote(real_values[name], safe="") for name in operation.path_parameters}
    probe = Probe(place, text[:200], path_values, SEED_QUERIES.get(operation.operation_id, {}),
                  text.encode("utf-8", "surrogatepass"))
    response = send(client, operation, probe)
    complaint = problem(response)
    assert not complaint, bug_report(operation, probe, response, complaint, caplog)
