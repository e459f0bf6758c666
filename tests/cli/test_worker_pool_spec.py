"""--worker-pool-spec parsing, --config loading and CustomJob assembly (pure, no server)."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from tests.cli import SEED_CONFIG
from trainhub.cli.worker_pool_spec import (
    ConfigFileError,
    SpecError,
    build_custom_job,
    load_job_spec_config,
    parse_key_values,
    parse_worker_pool_spec,
    split_list,
)

CONTAINER_POOL = "machine-type=n1-standard-4,container-image-uri=gcr.io/p/trainer:1"
PYTHON_POOL = "machine-type=n1-standard-4,executor-image-uri=gcr.io/p/executor:1,python-module=trainer.task"


@pytest.fixture
def seed_config(tmp_path: Path) -> Path:
    path = tmp_path / "job.yaml"
    path.write_text(SEED_CONFIG)
    return path


def test_it_builds_a_container_pool_from_a_worker_pool_spec() -> None:
    pool = parse_worker_pool_spec(
        "machine-type=a2-highgpu-1g,replica-count=2,accelerator-type=NVIDIA_TESLA_A100,"
        "accelerator-count=1,container-image-uri=gcr.io/p/trainer:1"
    )
    assert pool == {
        "machineSpec": {"machineType": "a2-highgpu-1g", "acceleratorType": "NVIDIA_TESLA_A100", "acceleratorCount": 1},
        "replicaCount": 2,
        "containerSpec": {"imageUri": "gcr.io/p/trainer:1"},
    }


def test_it_builds_a_python_package_pool_from_an_executor_image() -> None:
    assert parse_worker_pool_spec(PYTHON_POOL)["pythonPackageSpec"] == {
        "executorImageUri": "gcr.io/p/executor:1",
        "pythonModule": "trainer.task",
    }


def test_it_defaults_the_replica_count_to_one() -> None:
    assert parse_worker_pool_spec(CONTAINER_POOL)["replicaCount"] == 1


def test_it_defaults_the_accelerator_count_to_one_when_a_type_is_given() -> None:
    pool = parse_worker_pool_spec(CONTAINER_POOL + ",accelerator-type=NVIDIA_L4")
    assert pool["machineSpec"] == {
        "machineType": "n1-standard-4", "acceleratorType": "NVIDIA_L4", "acceleratorCount": 1,
    }


def test_it_omits_the_accelerator_when_no_type_is_given() -> None:
    assert parse_worker_pool_spec(CONTAINER_POOL)["machineSpec"] == {"machineType": "n1-standard-4"}


def test_it_reads_an_empty_spec_as_a_skipped_pool() -> None:
    assert parse_worker_pool_spec("") == {}


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("container-image-uri=i", "machine-type is required"),
        ("machine-type=n1-standard-4,container-image-uri=i,zone=x", "unknown key [zone]"),
        ("machine-type=n1-standard-4", "exactly one of container-image-uri or executor-image-uri"),
        (CONTAINER_POOL + ",executor-image-uri=e,python-module=m", "exactly one of container-image-uri or"),
        ("machine-type=n1-standard-4,executor-image-uri=e", "python-module is required with executor-image-uri"),
        (CONTAINER_POOL + ",python-module=m", "python-module is only allowed with executor-image-uri"),
        (CONTAINER_POOL + ",replica-count=0", "replica-count must be a positive integer, got [0]"),
        (CONTAINER_POOL + ",replica-count=two", "replica-count must be a positive integer, got [two]"),
        (CONTAINER_POOL + ",accelerator-type=T,accelerator-count=-1", "accelerator-count must be a positive integer"),
        ("machine-type=,container-image-uri=i", "machine-type must not be empty"),
        (CONTAINER_POOL + ",machine-type=n2", "key [machine-type] is given more than once"),
        (CONTAINER_POOL + ",replica-count", "expected KEY=VALUE, got [replica-count]"),
    ],
)
def test_it_rejects_a_malformed_worker_pool_spec(spec: str, message: str) -> None:
    with pytest.raises(SpecError) as raised:
        parse_worker_pool_spec(spec)
    assert message in str(raised.value)


def test_it_rejects_accelerator_count_without_type() -> None:
    with pytest.raises(SpecError, match="accelerator-count requires accelerator-type"):
        parse_worker_pool_spec("machine-type=n1-standard-4,accelerator-count=1,container-image-uri=i")


def test_it_lists_the_allowed_keys_when_a_key_is_unknown() -> None:
    with pytest.raises(SpecError, match="allowed keys: machine-type, replica-count"):
        parse_worker_pool_spec("machine-type=n1,local-package-path=.")


def test_it_splits_list_flags_on_commas() -> None:
    assert split_list("a,b,,c") == ["a", "b", "", "c"]


def test_it_splits_list_flags_on_an_alternative_delimiter() -> None:
    assert split_list("^:^--lr=0.1,0.2:--epochs=3") == ["--lr=0.1,0.2", "--epochs=3"]


def test_it_reads_an_empty_list_flag_as_an_empty_list() -> None:
    assert split_list("") == []


def test_it_parses_labels_with_empty_values() -> None:
    assert parse_key_values("team=ml,tier=") == {"team": "ml", "tier": ""}


def test_it_loads_the_seed_config_file_verbatim(seed_config: Path) -> None:
    config = load_job_spec_config(seed_config)
    assert config["workerPoolSpecs"]["machineSpec"]["acceleratorType"] == "NVIDIA_TESLA_A100"
    assert config["scheduling"] == {"strategy": "FLEX_START", "maxWaitDuration": "7200s"}


def test_it_reads_an_empty_config_file_as_an_empty_spec(tmp_path: Path) -> None:
    path = tmp_path / "empty.yaml"
    path.write_text("")
    assert load_job_spec_config(path) == {}


def test_it_reports_a_missing_config_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigFileError, match=r"cannot read config file \[.*missing.yaml\]: No such file"):
        load_job_spec_config(tmp_path / "missing.yaml")


def test_it_reports_the_line_of_invalid_yaml(tmp_path: Path) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text("workerPoolSpecs:\n  machineSpec: [unclosed\n")
    with pytest.raises(ConfigFileError, match=r"is not valid YAML: .*\(line 3"):
        load_job_spec_config(path)


def test_it_rejects_a_config_file_that_is_not_a_mapping(tmp_path: Path) -> None:
    path = tmp_path / "list.yaml"
    path.write_text("- a\n- b\n")
    with pytest.raises(ConfigFileError, match="must hold a CustomJobSpec mapping"):
        load_job_spec_config(path)


def test_it_passes_a_single_mapping_of_worker_pool_specs_through(seed_config: Path) -> None:
    config = load_job_spec_config(seed_config)
    body = build_custom_job(display_name="seed", config=config)
    assert body == {"displayName": "seed", "jobSpec": config}


def test_it_applies_command_and_args_to_a_config_pool(seed_config: Path) -> None:
    body = build_custom_job(display_name="seed", config=load_job_spec_config(seed_config),
                            command=["python", "train.py"], args=["--epochs=3"])
    container = body["jobSpec"]["workerPoolSpecs"]["containerSpec"]
    assert container == {"imageUri": "gcr.io/ucaip-test/ucaip-training-test", "args": ["--epochs=3"],
                         "command": ["python", "train.py"]}


def test_it_does_not_modify_the_config_it_is_given(seed_config: Path) -> None:
    config = load_job_spec_config(seed_config)
    original = copy.deepcopy(config)
    build_custom_job(display_name="seed", config=config, command=["x"],
                     worker_pool_specs=[parse_worker_pool_spec(CONTAINER_POOL)])
    assert config == original


def test_it_replaces_config_pools_with_worker_pool_spec_flags(seed_config: Path) -> None:
    body = build_custom_job(display_name="seed", config=load_job_spec_config(seed_config),
                            worker_pool_specs=[parse_worker_pool_spec(CONTAINER_POOL)])
    assert body["jobSpec"]["workerPoolSpecs"] == [parse_worker_pool_spec(CONTAINER_POOL)]
    assert body["jobSpec"]["scheduling"]["strategy"] == "FLEX_START"


def test_it_replaces_a_snake_case_config_key_instead_of_sending_both() -> None:
    config = {"worker_pool_specs": [{"container_spec": {"image_uri": "old", "args": ["a"]}}]}
    body = build_custom_job(display_name="j", config=config, args=["b"],
                            worker_pool_specs=None, persistent_resource_id="pr-1")
    assert body["jobSpec"] == {"worker_pool_specs": [{"container_spec": {"image_uri": "old", "args": ["b"]}}],
                               "persistentResourceId": "pr-1"}


def test_it_applies_command_and_args_to_every_container_pool_and_keeps_skipped_pools_empty() -> None:
    pools = [parse_worker_pool_spec(CONTAINER_POOL), parse_worker_pool_spec(""), parse_worker_pool_spec(CONTAINER_POOL)]
    body = build_custom_job(display_name="j", worker_pool_specs=pools, command=["start"], args=["port=8500"])
    first, skipped, third = body["jobSpec"]["workerPoolSpecs"]
    assert first["containerSpec"] == {"imageUri": "gcr.io/p/trainer:1", "command": ["start"], "args": ["port=8500"]}
    assert third == first
    assert skipped == {}


def test_it_rejects_an_empty_first_worker_pool_spec() -> None:
    with pytest.raises(SpecError, match="the first --worker-pool-spec must not be empty"):
        build_custom_job(display_name="j", worker_pool_specs=[{}, parse_worker_pool_spec(CONTAINER_POOL)])


def test_it_requires_some_worker_pool() -> None:
    with pytest.raises(SpecError, match="either --worker-pool-spec or a --config file with workerPoolSpecs"):
        build_custom_job(display_name="j", config={"scheduling": {"strategy": "SPOT"}})


def test_it_puts_package_uris_and_args_into_python_package_pools() -> None:
    body = build_custom_job(display_name="j", worker_pool_specs=[parse_worker_pool_spec(PYTHON_POOL)],
                            python_package_uris=["gs://b/trainer-0.1.tar.gz"], args=["--lr=0.1"], command=["ignored"])
    assert body["jobSpec"]["workerPoolSpecs"][0]["pythonPackageSpec"] == {
        "executorImageUri": "gcr.io/p/executor:1",
        "pythonModule": "trainer.task",
        "packageUris": ["gs://b/trainer-0.1.tar.gz"],
        "args": ["--lr=0.1"],
    }


def test_it_requires_package_uris_for_an_executor_image_pool() -> None:
    with pytest.raises(SpecError, match="--python-package-uris is required"):
        build_custom_job(display_name="j", worker_pool_specs=[parse_worker_pool_spec(PYTHON_POOL)])


def test_it_adds_labels_and_the_persistent_resource_to_the_body() -> None:
    body = build_custom_job(display_name="j", worker_pool_specs=[parse_worker_pool_spec(CONTAINER_POOL)],
                            labels={"team": "ml"}, persistent_resource_id="pool-a")
    assert body["labels"] == {"team": "ml"}
    assert body["jobSpec"]["persistentResourceId"] == "pool-a"


def test_it_leaves_labels_out_when_none_are_given() -> None:
    body = build_custom_job(display_name="j", worker_pool_specs=[parse_worker_pool_spec(CONTAINER_POOL)])
    assert set(body) == {"displayName", "jobSpec"}


@pytest.mark.parametrize("line, fragment", [
    ("  timeout: 2024-01-01", "[scheduling.timeout] is a YAML date"),
    ("  maxWaitDuration: .nan", "[scheduling.maxWaitDuration] is nan"),
    ("  7: x", "key [7] under [scheduling] must be a string"),
])
def test_a_config_value_json_cannot_carry_is_a_config_file_error(tmp_path: Path, line, fragment) -> None:
    path = tmp_path / "job.yaml"
    path.write_text(SEED_CONFIG + line + "\n")
    with pytest.raises(ConfigFileError) as caught:
        load_job_spec_config(path)
    assert fragment in str(caught.value)
