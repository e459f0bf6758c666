"""Bad input, systematically: every operation of /api/schema/ is called with a valid request (a
seed body from SEED_BODIES, alpha's real resources in the path), then again and again with ONE
place of it changed to an edge value - a field of the body, a query parameter or a path parameter.

Random generation (test_api_schema_fuzz.py) rarely hits these values, and they are the ones that
found the 5xx bugs so far: NUL characters, huge strings and arrays, numbers beyond int64 and
float, wrong JSON types. Every answer must be below 500, every 4xx in Google's error format; a
failure lists each offending request (operation, place, value, answer, traceback) - a ready bug
report.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlencode

import pytest
from django.conf import settings
from django.test import Client

from tests.conftest import container_pool, job_body, raw_token
from tests.json_documents import (
    DEEP_TEXT,
    HUGE_ARRAY_LENGTH,
    NUMBER_EDGES,
    STRING_EDGES,
    SURROGATE_EDGES,
    json_paths,
    replaced,
    value_at,
)
from tests.security.conftest import API_SCHEMA, assert_in_google_error_format
from tests.slurm.conftest import seed_spec, slurm_spec
from tests.tuning.helpers import categorical, discrete, double, integer, study, tuning_body
from trainhub.resources.services import persistent_resources_advance
from trainhub.tuning.spec import CUSTOM_TASK

BOOLEAN_EDGES = ("true", 2, None)
OBJECT_EDGES = ({}, [], "x", None)
#: Query values are strings on the wire: every string and number edge, as a client would send it.
QUERY_EDGES = tuple(str(value) for value in STRING_EDGES + NUMBER_EDGES)
#: Path segments as sent (already percent-encoded): NUL, bytes that are not UTF-8, a traversal,
#: a very long id, an emoji, a blank.
PATH_EDGES = ("%00", "%ff%fe", "..%2F..%2Fetc%2Fpasswd", "x" * 10_000, "%F0%9F%9A%80", "%20")
#: Bodies that are not a JSON document at all, one larger than Django accepts, one nested 1,000 deep.
RAW_BODIES = (b"{", b"\xff\xfe", json.dumps({"x": "x" * settings.DATA_UPLOAD_MAX_MEMORY_SIZE}).encode(),
              DEEP_TEXT.encode())

#: A valid body for every operation that takes one (models.create only answers 405).
SEED_BODIES: dict[str, Any] = {
    "auth.token": {"username": "alice", "password": "alice-password"},
    "customJobs.create": {
        **job_body(container_pool(accelerator="NVIDIA_TESLA_T4", count=1, command=["python3"], args=["-c", "1"],
                                  env=[{"name": "A", "value": "1"}]),
                   name="probe", scheduling={"strategy": "SPOT", "timeout": "60s", "restartJobOnWorkerRestart": True},
                   baseOutputDirectory={"outputUriPrefix": "gs://b/out"}),
        "labels": {"team": "ml"}},
    "hyperparameterTuningJobs.create": {
        **tuning_body(study(double("lr", 0.001, 0.1, scale="UNIT_LOG_SCALE"), integer("layers", 1, 4),
                            categorical("opt", "adam", "sgd"), discrete("batch", 16, 32), algorithm="RANDOM_SEARCH"),
                      max_failed=1),
        "labels": {"team": "ml"}},
    "trainingPipelines.create": {
        "displayName": "probe", "trainingTaskDefinition": CUSTOM_TASK,
        "trainingTaskInputs": {"workerPoolSpecs": [container_pool()]},
        "modelToUpload": {"displayName": "model", "artifactUri": "gs://b/model/"}, "labels": {"team": "ml"}},
    "models.create": {},
    "persistentResources.create": {
        "displayName": "probe", "labels": {"team": "ml"}, "resourcePools": [{
            "machineSpec": {"machineType": "n1-standard-4", "acceleratorType": "NVIDIA_TESLA_T4", "acceleratorCount": 1},
            "replicaCount": 1, "diskSpec": {"bootDiskType": "pd-ssd", "bootDiskSizeGb": 100}}]},
    "persistentResources.patch": {"displayName": "renamed", "labels": {"team": "ml"},
                                  "resourcePools": [{"id": "n1-standard-4-nvidia-tesla-t4", "replicaCount": 1}]},
    # The seed's cluster on the pools the first one (c1) left free.
    "slurmClusters.create": {"displayName": "probe", "orchestratorSpec": {"slurmSpec": {
        **slurm_spec(seed_spec()), "partitions": [{"id": "h100", "node_pool_ids": ["h100"]}],
        "login_node_pool_id": "a100"}}},
    "slurmJobs.create": {"sbatchArgs": ["--job-name=probe", "--nodes=1", "--gres=gpu:1", "--time=10:00", "--account=ml"],
                         "script": "#!/bin/bash\necho hi\n", "scriptArgs": ["a"]},
    "slurmJobs.update": {"nice": 50},
    "slurmJobs.allocate": {"sallocArgs": ["--job-name=probe", "--nodes=1", "--gres=gpu:1", "--time=10:00",
                                          "--account=ml"]},
    "slurmClusters.partitions.patch": {"config": {"PriorityTier": "3", "MaxTime": "01:00:00", "PreemptMode": "CANCEL"},
                                       "nodePoolIds": ["a4"]},
    "slurmClusters.nodes.patch": {"availableFeatures": "a100,ib", "activeFeatures": "a100"},
    "slurmClusters.sacctmgr": {"command": "sacctmgr modify user uma set maxjobs=4"},
    "slurmClusters.updateConfig": {"config": {"PriorityWeightAge": "2000", "PreemptMode": "REQUEUE"}},
    "slurmClusters.updateScripts": {"prologBashScripts": ["#!/bin/bash\necho one"], "epilogBashScripts": ["echo two"]},
    **{f"{collection}.{verb}": {} for collection, verb in (
        ("customJobs", "cancel"), ("hyperparameterTuningJobs", "cancel"), ("trainingPipelines", "cancel"),
        ("persistentResources", "reboot"), ("slurmJobs", "cancel"), ("slurmJobs", "hold"), ("slurmJobs", "release"),
        ("slurmJobs", "requeue"), ("slurmJobs", "keepAlive"), ("slurmJobs", "stepCredential"),
        ("slurmJobs", "relinquish"))},
}
#: Query parameters a valid request needs.
SEED_QUERIES = {
    "persistentResources.create": {"persistentResourceId": "probe"},
    "persistentResources.patch": {"updateMask": "displayName,labels,resourcePools.replicaCount"},
    "slurmClusters.create": {"slurmClusterId": "probe"},
}


@dataclass(frozen=True)
class Operation:
    operation_id: str
    method: str
    path: str
    path_parameters: tuple[str, ...]
    query_parameters: tuple[str, ...]
    takes_body: bool


def schema_operations() -> list[Operation]:
    found = []
    for path, methods in API_SCHEMA.raw_schema["paths"].items():
        for method, definition in methods.items():
            if method not in {"get", "post", "put", "patch", "delete"}:
                continue
            parameters = definition.get("parameters", [])
            found.append(Operation(
                definition["operationId"], method, path,
                tuple(p["name"] for p in parameters if p["in"] == "path"),
                tuple(p["name"] for p in parameters if p["in"] == "query"), "requestBody" in definition))
    return found


OPERATIONS = schema_operations()


@dataclass(frozen=True)
class Probe:
    """One request: the seed request with ``value`` at ``place`` (None for the seed itself)."""

    place: str | None
    value: Any
    path_values: dict[str, str]
    query: dict[str, str]
    body: bytes | None


#: Numbers as an option's text (``--ntasks=...``, ``maxjobs=...``): past a 32-bit column, past int64,
#: and past the 4,300 digits Python's int() converts (a bare ValueError).
OPTION_NUMBER_EDGES = (str(2**31), str(10**30), "1" * 5_000)


def edge_values(value: Any) -> tuple:
    """The edge values for a place holding ``value``, by its JSON type (numbers written as strings,
    as int64 fields are, get the number edges too), and null. A ``name=value`` string (an sbatch
    option, a sacctmgr setting) also gets its value replaced by the number and string edges."""
    if isinstance(value, bool):
        return BOOLEAN_EDGES
    if isinstance(value, int | float):
        return NUMBER_EDGES + (None,)
    if isinstance(value, str):
        name, equals, _ = value.rpartition("=")
        options = tuple(f"{name}={edge}" for edge in OPTION_NUMBER_EDGES + STRING_EDGES[:3]) if equals else ()
        return (STRING_EDGES + SURROGATE_EDGES[:1] + (NUMBER_EDGES if value.isdigit() else ()) + options
                + (None,))
    if isinstance(value, list):
        return [], [value[0] if value else "x"] * HUGE_ARRAY_LENGTH, {}, None
    return OBJECT_EDGES


def probes(operation: Operation, real_values: dict[str, str]) -> list[Probe]:
    path_values = {name: quote(real_values[name], safe="") for name in operation.path_parameters}
    query = SEED_QUERIES.get(operation.operation_id, {})
    seed = SEED_BODIES[operation.operation_id] if operation.takes_body else None
    body = None if seed is None else json.dumps(seed).encode()
    found = [Probe(None, None, path_values, query, body)]
    for name in operation.path_parameters:
        found += [Probe(f"path {name}", value, {**path_values, name: value}, query, body) for value in PATH_EDGES]
    for name in operation.query_parameters:
        found += [Probe(f"query {name}", value, path_values, {**query, name: value}, body) for value in QUERY_EDGES]
    if seed is not None:
        for place in json_paths(seed):
            found += [Probe(f"body {'.'.join(map(str, place)) or '(whole)'}", value, path_values, query,
                            json.dumps(replaced(seed, place, value)).encode())
                      for value in edge_values(value_at(seed, place))]
        found += [Probe("body (raw)", raw, path_values, query, raw) for raw in RAW_BODIES]
    return found


def send(client: Client, operation: Operation, probe: Probe):
    url = operation.path.format(**probe.path_values)
    if probe.query:
        url += "?" + urlencode(probe.query)
    if probe.body is None:
        return client.generic(operation.method.upper(), url)
    return client.generic(operation.method.upper(), url, probe.body, content_type="application/json")


def problem(response) -> str | None:
    """What is wrong with an answer to bad input, if anything."""
    if response.status_code >= 500:
        return f"answered {response.status_code}"
    if response.status_code >= 400:
        try:
            assert_in_google_error_format(response.status_code, json.loads(response.content))
        except (AssertionError, ValueError) as error:
            return f"a {response.status_code} not in Google's error format: {error}"
    return None


def bug_report(operation: Operation, probe: Probe, response, complaint: str, caplog) -> str:
    traceback = next((record.exc_text for record in reversed(caplog.records) if record.exc_text), "")
    # Where it went wrong: the innermost frame and the exception.
    where = [line.strip() for line in traceback.splitlines() if line.strip() and set(line.strip()) != {"^"}][-3:]
    return (f"{operation.operation_id} ({operation.method.upper()} {operation.path}) {complaint}\n"
            f"  {probe.place or 'the seed request'} = {str(probe.value)[:120]!r}\n"
            f"  answer: {response.content[:400]!r}\n" + "".join(f"  {line}\n" for line in where))


@pytest.fixture
def real_values(alpha_values, now):
    """alpha's resources, its persistent resource RUNNING (only then can it be patched)."""
    persistent_resources_advance(now=now)
    return alpha_values


def test_every_operation_with_a_body_has_a_seed_body():
    assert {op.operation_id for op in OPERATIONS if op.takes_body} == set(SEED_BODIES)


@pytest.mark.parametrize("operation", OPERATIONS, ids=lambda operation: operation.operation_id)
def test_an_edge_value_in_any_one_place_answers_below_500_and_in_the_error_format(operation, real_values, cast,
                                                                                   caplog):
    client = Client(raise_request_exception=False,
                    HTTP_AUTHORIZATION=f"Bearer {raw_token(cast['alice'])}")
    caplog.set_level(logging.ERROR)
    reports = []
    for probe in probes(operation, real_values):
        caplog.clear()
        response = send(client, operation, probe)
        complaint = problem(response)
        if probe.place is None and SEED_BODIES.get(operation.operation_id) and response.status_code >= 400:
            complaint = "refuses its seed body, so the edge values test only the refusal"
        if complaint:
            reports.append(bug_report(operation, probe, response, complaint, caplog))
    assert not reports, "\n\n".join(reports)
