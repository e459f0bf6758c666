"""Property-based: whatever a user types in --worker-pool-spec or writes in a --config file, the CLI
builds a JSON request body or says what is wrong (SpecError / ConfigFileError) - never a traceback."""

from __future__ import annotations

import datetime as dt
import json

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.cli import SEED_CONFIG
from tests.json_documents import NUMBER_EDGES, STRING_EDGES
from trainhub.cli.worker_pool_spec import (
    WORKER_POOL_SPEC_KEYS,
    ConfigFileError,
    SpecError,
    build_custom_job,
    load_job_spec_config,
    parse_worker_pool_spec,
)

FUZZ = settings(max_examples=200, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])

flag_pieces = st.one_of(
    st.sampled_from([f"{key}=" for key in WORKER_POOL_SPEC_KEYS] + ["=", ",", "^", "^;^", "^,^", ";", " ", "1", "-1",
                                                                  "0", "n1-standard-4", "NVIDIA_TESLA_T4", "img"]),
    st.text(max_size=6),
)
flag_values = st.lists(flag_pieces, max_size=12).map("".join)

#: Everything yaml.safe_load can build, including the values JSON cannot carry.
yaml_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=10), st.binary(max_size=4),
    st.dates(), st.datetimes(timezones=st.just(dt.timezone.utc)),
    st.sampled_from(["1800s", "FLEX_START", "a2-highgpu-1g", "NVIDIA_TESLA_A100", "7200s"]),
    st.sampled_from(STRING_EDGES + NUMBER_EDGES),
)
yaml_documents = st.recursive(
    yaml_scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=3),
        st.dictionaries(st.one_of(st.text(max_size=8), st.integers(), st.sampled_from(
            ["workerPoolSpecs", "worker_pool_specs", "containerSpec", "machineSpec", "scheduling", "command"])),
            children, max_size=4),
    ),
    max_leaves=10,
)
seed_lines = SEED_CONFIG.splitlines()


@FUZZ
@given(flag_values)
def test_any_worker_pool_spec_flag_is_a_pool_or_a_spec_error(text):
    try:
        pool = parse_worker_pool_spec(text)
    except SpecError as error:
        assert str(error)
        return
    json.dumps(pool, allow_nan=False)


def _load(tmp_path, content: bytes) -> dict | None:
    path = tmp_path / "job.yaml"
    path.write_bytes(content)
    try:
        return load_job_spec_config(path)
    except ConfigFileError as error:
        assert str(error)
        return None


def _build(config: dict) -> None:
    try:
        body = build_custom_job(display_name="fuzz", config=config, command=["python3"], args=["-c", "1"])
    except SpecError as error:
        assert str(error)
        return
    json.dumps(body, allow_nan=False)  # what the client will send


@FUZZ
@given(document=yaml_documents)
def test_any_yaml_config_is_a_request_body_or_a_clear_error(tmp_path, document):
    config = _load(tmp_path, yaml.safe_dump(document, allow_unicode=True).encode())
    if config is not None:
        _build(config)


@FUZZ
@given(data=st.data())
def test_the_seed_config_with_lines_dropped_mangled_or_retyped_is_a_request_body_or_a_clear_error(tmp_path, data):
    lines = list(seed_lines)
    for _ in range(data.draw(st.integers(min_value=1, max_value=3))):
        position = data.draw(st.integers(min_value=0, max_value=len(lines) - 1))
        lines[position] = data.draw(st.one_of(
            st.just(""), st.text(max_size=12),
            st.sampled_from([": :", "- [", "  ? [a, b]\n  : c", "\t", "!!binary aGk=", "x: !!set {a}",
                             "    timeout: 2024-01-01", "    maxWaitDuration: .nan", "&a [*a]"]),
            st.just(lines[position].replace(":", "", 1))))
    for encoding_error in data.draw(st.lists(st.sampled_from([b"\xff", b"\x00", b"\xc3"]), max_size=1)):
        lines.append(encoding_error.decode("latin-1"))
    config = _load(tmp_path, "\n".join(lines).encode("utf-8", "surrogateescape"))
    if config is not None:
        _build(config)
