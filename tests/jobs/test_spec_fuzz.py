"""Property-based: whatever document arrives, the CustomJob parser answers a canonical job or a
SpecError naming the offending fields - never another exception (which the API would turn into a 500)."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import SEED_REST_BODY, container_pool, job_body
from tests.json_documents import NUMBER_EDGES, STRING_EDGES, json_paths, replaced
from trainhub.common.wire import WireError, parse_duration, parse_enum, parse_int, parse_timestamp
from trainhub.jobs.spec import STRATEGIES, ParsedCustomJob, SpecError, parse_custom_job

FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

#: Any value JSON (or YAML read as JSON-compatible) can carry, including the awkward ones.
json_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(), st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=12),
    st.sampled_from([float("nan"), float("inf"), float("-inf"), -0.0, 1e300, 1e-30, 2**63, -(2**63) - 1]),
    st.sampled_from(["", " ", "0", "-1", "1.5", "1800s", "-5s", "0s", "NaN", "FLEX_START", "6", "99",
                     "NVIDIA_TESLA_A100", "a2-highgpu-1g", "n1-standard-4", "x" * 5000]),
    st.sampled_from(STRING_EDGES + NUMBER_EDGES),
)
json_values = st.recursive(
    json_scalars,
    lambda children: st.one_of(st.lists(children, max_size=4),
                               st.dictionaries(st.text(max_size=8), children, max_size=4)),
    max_leaves=12,
)

VALID_BODIES = [
    SEED_REST_BODY,
    job_body(container_pool(), container_pool(replicas=2, accelerator="NVIDIA_TESLA_T4", count=4),
             scheduling={"strategy": "SPOT", "timeout": "60s", "restartJobOnWorkerRestart": True}),
    {"display_name": "py", "labels": {"team": "a"}, "job_spec": {"worker_pool_specs": [{
        "machine_spec": {"machine_type": "n1-standard-4"}, "replica_count": "1",
        "python_package_spec": {"executor_image_uri": "img", "package_uris": ["gs://b/p.tar.gz"],
                                "python_module": "trainer.task", "env": [{"name": "A", "value": "1"}]}}],
        "base_output_directory": {"output_uri_prefix": "gs://b/out"}}},
]


@st.composite
def mutated_bodies(draw) -> Any:
    """A valid body with one to three of its values (or whole sub-documents) replaced by anything."""
    body = draw(st.sampled_from(VALID_BODIES))
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        path = draw(st.sampled_from(json_paths(body)))
        body = replaced(body, path, draw(json_values))
    return body


def assert_parses_or_explains(body: Any) -> None:
    try:
        parsed = parse_custom_job(body)
    except SpecError as error:
        assert error.violations, "a SpecError must name at least one field"
        for violation in error.violations:
            assert isinstance(violation.field, str) and violation.description
        return
    assert isinstance(parsed, ParsedCustomJob)
    json.dumps(parsed.document, allow_nan=False)  # the canonical document is stored as JSON


@FUZZ
@given(json_values)
def test_any_json_value_is_parsed_or_rejected_with_field_violations(body):
    assert_parses_or_explains(body)


@FUZZ
@given(mutated_bodies())
def test_a_valid_body_with_any_field_replaced_is_parsed_or_rejected_with_field_violations(body):
    assert_parses_or_explains(body)


@FUZZ
@given(json_scalars)
def test_every_wire_parser_answers_a_value_or_a_wire_error(value):
    for parse in (parse_int, parse_duration, lambda v: parse_enum(v, STRATEGIES),
                  lambda v: parse_timestamp(v) if isinstance(v, str) else None):
        try:
            parse(value)
        except WireError:
            pass
