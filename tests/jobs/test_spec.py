"""Every validation rule of the CustomJob parser, plus the wire-format leniency Google clients need."""

import copy

import pytest

from tests.conftest import SEED_REST_BODY, container_pool, job_body
from trainhub.jobs.spec import SpecError, parse_custom_job


def violations(body):
    with pytest.raises(SpecError) as caught:
        parse_custom_job(body)
    return {v.field: v.description for v in caught.value.violations}


def test_it_accepts_the_seed_rest_body_verbatim():
    parsed = parse_custom_job(copy.deepcopy(SEED_REST_BODY))
    assert parsed.strategy == "FLEX_START"
    assert parsed.max_wait_seconds == 1800
    pool = parsed.document["jobSpec"]["workerPoolSpecs"][0]
    assert pool["machineSpec"] == {"machineType": "a2-highgpu-1g", "acceleratorType": "NVIDIA_TESLA_A100",
                                   "acceleratorCount": 1}
    assert pool["containerSpec"]["command"] == ["sleep"]
    assert parsed.document["jobSpec"]["scheduling"]["maxWaitDuration"] == "1800s"


def test_it_accepts_snake_case_int_enums_and_string_int64():
    body = {"display_name": "x", "job_spec": {"worker_pool_specs": [{
        "machine_spec": {"machine_type": "a2-highgpu-1g", "accelerator_type": 8, "accelerator_count": "1"},
        "replica_count": "1", "container_spec": {"image_uri": "img", "command": ["true"]}}],
        "scheduling": {"strategy": 6, "max_wait_duration": "0s"}}}
    parsed = parse_custom_job(body)
    assert parsed.strategy == "FLEX_START"
    assert parsed.max_wait_seconds is None  # "0s" waits forever
    assert parsed.pools[0].shape.accelerator_type == "NVIDIA_TESLA_A100"


def test_unset_max_wait_means_one_day_for_flex_start():
    body = copy.deepcopy(SEED_REST_BODY)
    del body["jobSpec"]["scheduling"]["maxWaitDuration"]
    parsed = parse_custom_job(body)
    assert parsed.max_wait_seconds == 86400
    assert "maxWaitDuration" not in parsed.document["jobSpec"]["scheduling"]


def test_it_accepts_a_single_pool_written_as_a_mapping():
    body = job_body()
    body["jobSpec"]["workerPoolSpecs"] = container_pool()
    assert len(parse_custom_job(body).pools) == 1


def test_it_fills_fixed_gpus_and_default_timeout():
    parsed = parse_custom_job(job_body(container_pool("a3-highgpu-8g")))
    assert parsed.pools[0].shape.accelerator_count == 8
    assert parsed.timeout_seconds == 7 * 86400
    assert parsed.strategy == "STANDARD"


def test_it_skips_empty_middle_pools_but_keeps_their_index():
    parsed = parse_custom_job(job_body(container_pool(), {}, container_pool(replicas=2)))
    assert [p.index for p in parsed.pools] == [0, 2]
    assert parsed.document["jobSpec"]["workerPoolSpecs"][1] == {}


@pytest.mark.parametrize(
    "pool_changes, field, fragment",
    [
        ({"machineSpec": {"machineType": "z9-giant"}}, "jobSpec.workerPoolSpecs[0].machineSpec.machineType",
         "not supported"),
        ({"machineSpec": {"machineType": "a2-highgpu-1g", "acceleratorType": "NVIDIA_TESLA_T4"}},
         "jobSpec.workerPoolSpecs[0].machineSpec.acceleratorType", "cannot be attached"),
        ({"machineSpec": {"machineType": "n1-standard-4", "acceleratorType": "NVIDIA_TESLA_T4",
                          "acceleratorCount": 3}},
         "jobSpec.workerPoolSpecs[0].machineSpec.acceleratorCount", "allowed counts: 1, 2, 4"),
        ({"machineSpec": {"machineType": "n1-standard-4", "acceleratorCount": 2}},
         "jobSpec.workerPoolSpecs[0].machineSpec.acceleratorCount", "acceleratorType is not"),
        ({"machineSpec": {"machineType": "n1-standard-4", "acceleratorType": "NVIDIA_NOPE"}},
         "jobSpec.workerPoolSpecs[0].machineSpec.acceleratorType", "unknown value"),
        ({"replicaCount": 2}, "jobSpec.workerPoolSpecs[0].replicaCount", "replicaCount 1"),
        ({"replicaCount": "two"}, "jobSpec.workerPoolSpecs[0].replicaCount", "must be an integer"),
        ({"replicaCount": True}, "jobSpec.workerPoolSpecs[0].replicaCount", "not a boolean"),
        ({"containerSpec": None}, "jobSpec.workerPoolSpecs[0]", "exactly one of containerSpec or pythonPackageSpec"),
        ({"pythonPackageSpec": {"executorImageUri": "i", "packageUris": ["p"], "pythonModule": "m"}},
         "jobSpec.workerPoolSpecs[0]", "(both are)"),
        ({"containerSpec": {"command": ["x"]}}, "jobSpec.workerPoolSpecs[0].containerSpec.imageUri", "required"),
        ({"containerSpec": {"imageUri": "i", "args": "not-a-list"}},
         "jobSpec.workerPoolSpecs[0].containerSpec.args", "list of strings"),
        ({"containerSpec": {"imageUri": "i", "env": [{"name": "1BAD", "value": "x"}]}},
         "jobSpec.workerPoolSpecs[0].containerSpec.env[0].name", "not a valid"),
        ({"containerSpec": {"imageUri": "i" * 2000}}, "jobSpec.workerPoolSpecs[0].containerSpec.imageUri",
         "at most 1024"),
        ({"diskSpec": {"bootDiskType": "floppy"}}, "jobSpec.workerPoolSpecs[0].diskSpec.bootDiskType", "one of"),
        ({"diskSpec": {"bootDiskSizeGb": 10}}, "jobSpec.workerPoolSpecs[0].diskSpec.bootDiskSizeGb", "at least 100"),
        ({"surprise": 1}, "jobSpec.workerPoolSpecs[0].surprise", "Unknown name"),
    ],
)
def test_it_rejects_a_bad_worker_pool(pool_changes, field, fragment):
    pool = container_pool()
    pool.update(pool_changes)
    pool = {key: value for key, value in pool.items() if value is not None}
    found = violations(job_body(pool))
    assert field in found, found
    assert fragment in found[field]


@pytest.mark.parametrize(
    "scheduling, field, fragment",
    [
        ({"timeout": "ten minutes"}, "jobSpec.scheduling.timeout", "duration"),
        ({"timeout": "0s"}, "jobSpec.scheduling.timeout", "greater than 0s"),
        ({"maxWaitDuration": "-5s"}, "jobSpec.scheduling.maxWaitDuration", "must not be negative"),
        ({"strategy": "FASTEST"}, "jobSpec.scheduling.strategy", "unknown value"),
        ({"strategy": 5}, "jobSpec.scheduling.strategy", "unknown enum number 5"),
        ({"restartJobOnWorkerRestart": "yes"}, "jobSpec.scheduling.restartJobOnWorkerRestart", "boolean"),
    ],
)
def test_it_rejects_bad_scheduling(scheduling, field, fragment):
    found = violations(job_body(container_pool(), scheduling=scheduling))
    assert fragment in found[field]


def test_flex_start_rejects_ineligible_gpus_long_timeouts_and_mixed_machines():
    t4 = container_pool(accelerator="NVIDIA_TESLA_T4")
    found = violations(job_body(t4, scheduling={"strategy": "FLEX_START"}))
    assert "L4, A100, H100, H200 or B200" in found["jobSpec.workerPoolSpecs[0].machineSpec.acceleratorType"]
    a100 = container_pool("a2-highgpu-1g")
    found = violations(job_body(a100, scheduling={"strategy": "FLEX_START", "timeout": "700000s"}))
    assert "7 days" in found["jobSpec.scheduling.timeout"]
    found = violations(job_body(a100, container_pool("a2-highgpu-2g"), scheduling={"strategy": "FLEX_START"}))
    assert "same machineSpec" in found["jobSpec.workerPoolSpecs"]


def test_it_reports_every_violation_at_once_and_requires_display_name():
    found = violations({"jobSpec": {"workerPoolSpecs": [{"machineSpec": {"machineType": "nope"}}]}})
    assert "displayName" in found
    assert "jobSpec.workerPoolSpecs[0].machineSpec.machineType" in found
    assert "jobSpec.workerPoolSpecs[0]" in found


@pytest.mark.parametrize(
    "body, field",
    [
        ([], ""),
        ({"displayName": "x"}, "jobSpec"),
        ({"displayName": "x" * 129, "jobSpec": {"workerPoolSpecs": [container_pool()]}}, "displayName"),
        ({"displayName": "x", "jobSpec": {"workerPoolSpecs": []}}, "jobSpec.workerPoolSpecs"),
        ({"displayName": "x", "jobSpec": {"workerPoolSpecs": [container_pool()] * 5}}, "jobSpec.workerPoolSpecs"),
        ({"displayName": "x", "jobSpec": {"workerPoolSpecs": [{}]}}, "jobSpec.workerPoolSpecs[0]"),
        ({"displayName": "x", "labels": {"Bad Key": "v"}, "jobSpec": {"workerPoolSpecs": [container_pool()]}},
         "labels.Bad Key"),
        # labels are capped as Google Cloud caps them: 64 at most, keys and values of 63 characters
        ({"displayName": "x", "labels": {f"k{i}": "v" for i in range(65)},
          "jobSpec": {"workerPoolSpecs": [container_pool()]}}, "labels"),
        ({"displayName": "x", "labels": {"team": "v" * 64}, "jobSpec": {"workerPoolSpecs": [container_pool()]}},
         "labels.team"),
        ({"displayName": "x", "labels": {"k" * 64: "v"}, "jobSpec": {"workerPoolSpecs": [container_pool()]}},
         "labels." + "k" * 64),
        ({"displayName": "x", "jobSpec": {"workerPoolSpecs": [container_pool()],
                                          "baseOutputDirectory": "gs://b/o"}}, "jobSpec.baseOutputDirectory"),
        ({"displayName": 5, "jobSpec": {"workerPoolSpecs": [container_pool()]}}, "displayName"),
    ],
)
def test_it_rejects_malformed_documents(body, field):
    with pytest.raises(SpecError) as caught:
        parse_custom_job(body)
    assert field in {v.field for v in caught.value.violations} or field == ""


def test_it_rejects_oversized_argument_lists():
    pool = container_pool(args=["x" * 60_000, "y" * 60_000])
    assert "combined length" in violations(job_body(pool))["jobSpec.workerPoolSpecs"]


def test_base_output_directory_gets_a_trailing_slash():
    parsed = parse_custom_job(job_body(container_pool(), baseOutputDirectory={"outputUriPrefix": "/tmp/out"}))
    assert parsed.document["jobSpec"]["baseOutputDirectory"] == {"outputUriPrefix": "/tmp/out/"}


@pytest.mark.parametrize("pools, expected", [
    ([container_pool()], "ACCELERATOR_TYPE_UNSPECIFIED"),
    ([container_pool(machine_type="a3-highgpu-8g")], "NVIDIA_H100_80GB"),
    # a CPU chief with 2 x 4 T4 workers: the job is a T4 job
    ([container_pool(), container_pool(replicas=2, accelerator="NVIDIA_TESLA_T4", count=4)], "NVIDIA_TESLA_T4"),
    # 1 x 8 H100 against 3 x 1 A100: the type it asks most GPUs of
    ([container_pool(machine_type="a3-highgpu-8g"), container_pool(machine_type="a2-highgpu-1g", replicas=3)],
     "NVIDIA_H100_80GB"),
    # a tie goes to the first pool's type
    ([container_pool(machine_type="a2-highgpu-1g"), container_pool(machine_type="g2-standard-4")],
     "NVIDIA_TESLA_A100"),
])
def test_a_jobs_gpu_type_is_the_one_it_asks_most_gpus_of(pools, expected):
    assert parse_custom_job(job_body(*pools)).accelerator_type == expected


@pytest.mark.parametrize("uri", ["file:///../../etc/passwd/", "gs://bucket/a/../../b", "/tmp/./x", "s3://bucket/x",
                                 "gs:///nobucket", "relative/path"])
def test_an_output_uri_that_could_escape_or_is_not_storage_is_refused_naming_the_field(uri):
    with pytest.raises(SpecError) as refused:
        parse_custom_job(job_body(container_pool(), baseOutputDirectory={"outputUriPrefix": uri}))
    assert [v.field for v in refused.value.violations] == ["jobSpec.baseOutputDirectory.outputUriPrefix"]
