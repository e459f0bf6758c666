"""`trainhub ai persistent-resources ...` and `trainhub ai operations describe` against a fake
HTTP session: the requests they send and what they print."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.test_cli_offline import answer, environ, google_error, no_sleeping, run  # noqa: F401 (fixtures)
from trainhub.cli.resource_pool_spec import build_update, parse_resize_spec, parse_resource_pool_spec
from trainhub.cli.worker_pool_spec import SpecError

BASE = "http://trainhub.test/v1/projects/demo/locations/us-central1/persistentResources"
NAME = "projects/demo/locations/us-central1/persistentResources/pr"
OPERATION = {"name": f"{NAME}/operations/42", "done": False, "metadata": {}}
SEED_POOL = "machine-type=n1-standard-4,replica-count=1,accelerator-type=NVIDIA_TESLA_T4,accelerator-count=1"


def test_it_creates_the_seeds_resource_and_prints_how_to_follow_it(environ, capsys):
    code, session = run(["ai", "persistent-resources", "create", "--persistent-resource-id", "pr", "--region",
                         "us-central1", "--display-name", "seed", f"--resource-pool-spec={SEED_POOL}"],
                        environ, answer(200, OPERATION))
    assert code == 0
    (call,) = session.calls
    assert (call.method, call.url, call.params) == ("POST", BASE, {"persistentResourceId": "pr"})
    assert call.json == {"displayName": "seed", "resourcePools": [
        {"machineSpec": {"machineType": "n1-standard-4", "acceleratorType": "NVIDIA_TESLA_T4", "acceleratorCount": 1},
         "replicaCount": 1}]}
    out = capsys.readouterr().out
    assert out.startswith(f"PersistentResource [{NAME}] is submitted successfully.")
    assert "$ trainhub ai persistent-resources describe pr --region us-central1" in out
    assert "$ trainhub ai operations describe 42 --region us-central1" in out


def test_every_pool_key_reaches_the_body():
    pool = parse_resource_pool_spec("machine-type=n1-standard-4,replica-count=2,min-replica-count=1,"
                                    "max-replica-count=3,accelerator-type=NVIDIA_TESLA_T4,accelerator-count=2,"
                                    "disk-type=pd-ssd,disk-size=200")
    assert pool == {"machineSpec": {"machineType": "n1-standard-4", "acceleratorType": "NVIDIA_TESLA_T4",
                                    "acceleratorCount": 2},
                    "replicaCount": 2, "autoscalingSpec": {"minReplicaCount": 1, "maxReplicaCount": 3},
                    "diskSpec": {"bootDiskType": "pd-ssd", "bootDiskSizeGb": 200}}


@pytest.mark.parametrize("spec, message", [
    ("replica-count=1", "machine-type is required"),
    ("machine-type=n1-standard-4", "replica-count is required"),
    ("machine-type=n1-standard-4,min-replica-count=1", "[min-replica-count] and [max-replica-count]"),
    ("machine-type=n1-standard-4,replica-count=1,accelerator-type=NVIDIA_TESLA_T4", "[accelerator-type] and"),
    ("machine-type=n1-standard-4,replica-count=0", "replica-count must be a positive integer"),
    ("machine-type=n1-standard-4,replica-count=1,local-ssd-count=1", "unknown key [local-ssd-count]"),
])
def test_bad_pool_specs_are_usage_errors(spec, message):
    with pytest.raises(SpecError) as error:
        parse_resource_pool_spec(spec)
    assert message in str(error.value)


def test_a_bad_pool_spec_never_reaches_the_server(environ, capsys):
    code, session = run(["ai", "persistent-resources", "create", "--persistent-resource-id", "pr", "--region", "r",
                         "--resource-pool-spec=machine-type=n1-standard-4"], environ)
    assert code == 2 and not session.calls
    assert "replica-count is required" in capsys.readouterr().err


@pytest.mark.parametrize("key", ["resourcePools", "resourcePoolSpecs"])
def test_a_config_file_gives_pools_under_either_key_and_flags_add_to_it(environ, tmp_path: Path, key):
    config = tmp_path / "pr.yaml"
    config.write_text(f"displayName: from-file\nlabels:\n  team: nlp\n{key}:\n  machineSpec:\n"
                      "    machineType: n1-standard-4\n  replicaCount: 1\n")
    code, session = run(["ai", "persistent-resources", "create", "--persistent-resource-id", "pr", "--region",
                         "us-central1", "--config", str(config), "--display-name", "from-flag",
                         "--resource-pool-spec=machine-type=a2-highgpu-1g,replica-count=2"], environ,
                        answer(200, OPERATION))
    assert code == 0
    body = session.calls[0].json
    assert body["displayName"] == "from-flag" and body["labels"] == {"team": "nlp"}
    assert [pool["machineSpec"]["machineType"] for pool in body["resourcePools"]] == ["n1-standard-4",
                                                                                       "a2-highgpu-1g"]
    assert key == "resourcePools" or key not in body


def test_a_json_config_file_works_too(environ, tmp_path: Path):
    config = tmp_path / "pr.json"
    config.write_text(json.dumps({"resourcePools": [{"machineSpec": {"machineType": "n1-standard-4"},
                                                     "replicaCount": 1}]}))
    code, session = run(["ai", "persistent-resources", "create", "--persistent-resource-id", "pr", "--region", "r",
                         "--config", str(config)], environ, answer(200, OPERATION))
    assert code == 0 and len(session.calls[0].json["resourcePools"]) == 1


def test_a_create_without_pools_is_a_usage_error(environ, capsys):
    code, session = run(["ai", "persistent-resources", "create", "--persistent-resource-id", "pr", "--region", "r"],
                        environ)
    assert code == 2 and not session.calls
    assert "--resource-pool-spec or a --config" in capsys.readouterr().err


def test_wait_polls_the_operation_until_it_is_done(environ, capsys, no_sleeping):
    done = {**OPERATION, "done": True, "response": {"name": NAME}}
    code, session = run(["ai", "persistent-resources", "create", "--persistent-resource-id", "pr", "--region",
                         "us-central1", f"--resource-pool-spec={SEED_POOL}", "--wait"], environ,
                        answer(200, OPERATION), answer(200, OPERATION), answer(200, done))
    assert code == 0
    assert [call.url for call in session.calls[1:]] == [f"http://trainhub.test/v1/{NAME}/operations/42"] * 2
    assert no_sleeping == [2.0, 2.0]
    assert f"Operation [{NAME}/operations/42] is done." in capsys.readouterr().out


def test_wait_reports_a_failed_operation(environ, capsys):
    failed = {**OPERATION, "done": True, "error": {"code": 8, "message": "Resources are insufficient"}}
    code, _ = run(["ai", "persistent-resources", "delete", "pr", "--region", "us-central1", "--wait"], environ,
                  answer(200, failed))
    assert code == 1
    assert "OPERATION_FAILED: Resources are insufficient" in capsys.readouterr().err


def test_it_lists_resources_with_their_pools(environ, capsys):
    resource = {"name": NAME, "displayName": "seed", "state": "RUNNING", "createTime": "t",
                "resourcePools": [{"id": "t4", "replicaCount": "2", "usedReplicaCount": "1"}],
                "trainhubStatus": {"resourcePools": [{"id": "t4", "provisionedReplicaCount": "2"}]}}
    code, session = run(["ai", "persistent-resources", "list", "--region", "us-central1"], environ,
                        answer(200, {"persistentResources": [resource]}))
    assert code == 0 and session.calls[0].url == BASE
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["PERSISTENT_RESOURCE_ID", "DISPLAY_NAME", "STATE", "POOLS", "CREATE_TIME"]
    assert lines[1].split() == ["pr", "seed", "RUNNING", "t4:", "1/2", "used", "t"]


def test_it_describes_a_resource_by_id_or_full_name(environ, capsys):
    code, session = run(["ai", "persistent-resources", "describe", "projects/p/locations/europe-west4/"
                         "persistentResources/x", "--format", "json"], environ, answer(200, {"name": "x"}))
    assert code == 0
    assert session.calls[0].url == "http://trainhub.test/v1/projects/p/locations/europe-west4/persistentResources/x"
    assert json.loads(capsys.readouterr().out) == {"name": "x"}


def test_update_sends_a_mask_naming_only_what_the_flags_change(environ):
    code, session = run(["ai", "persistent-resources", "update", "pr", "--region", "us-central1",
                         "--resource-pool-spec=id=t4,replica-count=3"], environ, answer(200, OPERATION))
    assert code == 0
    (call,) = session.calls
    assert (call.method, call.url, call.params) == ("PATCH", f"{BASE}/pr",
                                                    {"updateMask": "resourcePools.replicaCount"})
    assert call.json == {"resourcePools": [{"id": "t4", "replicaCount": 3}]}


def test_update_masks_cover_names_labels_and_ranges():
    mask, body = build_update(display_name="n", labels={"a": "b"}, resizes=[
        parse_resize_spec("id=t4,min-replica-count=1,max-replica-count=4")])
    assert mask == "displayName,labels,resourcePools.autoscalingSpec"
    assert body["resourcePools"] == [{"id": "t4", "autoscalingSpec": {"minReplicaCount": 1, "maxReplicaCount": 4}}]
    with pytest.raises(SpecError, match="nothing to update"):
        build_update(display_name=None, labels=None, resizes=None)
    with pytest.raises(SpecError, match="id"):
        parse_resize_spec("replica-count=2")


@pytest.mark.parametrize("command, method, suffix, first_line", [
    ("reboot", "POST", ":reboot", f"Request to reboot the PersistentResource [{NAME}] has been sent."),
    ("delete", "DELETE", "", f"Request to delete the PersistentResource [{NAME}] has been sent."),
])
def test_reboot_and_delete_print_what_gcloud_prints(environ, capsys, command, method, suffix, first_line):
    code, session = run(["ai", "persistent-resources", command, "pr", "--region", "us-central1"], environ,
                        answer(200, OPERATION))
    assert code == 0
    assert (session.calls[0].method, session.calls[0].url) == (method, f"{BASE}/pr{suffix}")
    assert capsys.readouterr().out.splitlines()[0] == first_line


def test_operations_describe_takes_an_id_or_a_full_name(environ, capsys):
    code, session = run(["ai", "operations", "describe", "42", "--region", "us-central1"], environ,
                        answer(200, OPERATION))
    assert code == 0
    assert session.calls[0].url == "http://trainhub.test/v1/projects/demo/locations/us-central1/operations/42"
    code, session = run(["ai", "operations", "describe", f"{NAME}/operations/42"], environ, answer(200, OPERATION))
    assert session.calls[0].url == f"http://trainhub.test/v1/{NAME}/operations/42"
    code, session = run(["ai", "operations", "describe", "42"], environ)
    assert code == 2 and not session.calls


def test_a_server_refusal_is_printed_with_its_field_violations(environ, capsys):
    refusal = google_error(400, "INVALID_ARGUMENT", "bad pool", [("resourcePools[0].replicaCount", "too many")])
    code, _ = run(["ai", "persistent-resources", "create", "--persistent-resource-id", "pr", "--region", "r",
                   f"--resource-pool-spec={SEED_POOL}"], environ, refusal)
    assert code == 1
    err = capsys.readouterr().err
    assert "INVALID_ARGUMENT: bad pool" in err and "resourcePools[0].replicaCount: too many" in err
