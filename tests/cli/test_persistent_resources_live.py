"""The seed's persistent-resource flow through the CLI against a live server: create the
n1-standard-4 pool (replica-count 1), run a custom job on it with --persistent-resource-id,
list, describe, resize, reboot and delete it."""

import json

import pytest

from tests.cli.test_cli_live import job_id_from
from trainhub.cli import base as cli_base
from trainhub.cli.main import main
from trainhub.jobs import states
from trainhub.jobs.models import CustomJob
from trainhub.resources.models import PersistentResource
from trainhub.scheduling.services import scheduler_pass

pytestmark = pytest.mark.django_db(transaction=True)

SEED_POOL = "machine-type=n1-standard-4,replica-count=1,accelerator-type=NVIDIA_TESLA_T4,accelerator-count=1"


@pytest.fixture
def cli(live_server, cast, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(cli_base, "_sleep", lambda seconds: None)  # --wait polls; the server is already done

    def login(user):
        environ = {"TRAINHUB_CONFIG": str(tmp_path / f"{user}.json"), "TRAINHUB_PROJECT": "alpha"}
        assert main(["auth", "login", "--url", live_server.url, "--username", user, "--password",
                     f"{user}-password"], environ=environ) == 0

        def run(*argv):
            code = main(list(argv), environ=environ)
            captured = capsys.readouterr()
            return code, captured.out, captured.err

        return run

    return login


def test_the_seeds_resource_runs_a_job_and_is_managed_from_the_cli(cli, nodes, now):
    admin, user = cli("alice"), cli("uma")
    code, out, err = admin("ai", "persistent-resources", "create", "--persistent-resource-id", "seed-pool",
                           "--region", "us-central1", "--display-name", "seed", f"--resource-pool-spec={SEED_POOL}")
    assert code == 0, err
    assert "is submitted successfully" in out
    code, out, _ = user("ai", "persistent-resources", "describe", "seed-pool", "--region", "us-central1",
                        "--format", "json")
    assert json.loads(out)["state"] == "RUNNING"  # the operation ran when the request committed

    code, out, err = user("ai", "custom-jobs", "create", "--region", "us-central1", "--display-name", "on-pool",
                          f"--worker-pool-spec={SEED_POOL},container-image-uri=python:3.11", "--command", "true",
                          "--persistent-resource-id", "seed-pool")
    assert code == 0, err
    job = CustomJob.objects.get(job_id=job_id_from(out))
    scheduler_pass(now=now)
    job.refresh_from_db()
    resource = PersistentResource.objects.get()
    assert job.state == states.PENDING
    assert job.replicas.get().node.dedicated_to == resource.owner

    code, out, _ = user("ai", "persistent-resources", "list", "--region", "us-central1")
    assert "seed-pool" in out and "RUNNING" in out and "1/1 used" in out

    code, out, err = user("ai", "persistent-resources", "reboot", "seed-pool", "--region", "us-central1")
    assert code == 1 and "PERMISSION_DENIED" in err

    code, out, err = admin("ai", "persistent-resources", "update", "seed-pool", "--region", "us-central1",
                           "--resource-pool-spec=id=n1-standard-4-nvidia-tesla-t4,replica-count=2", "--wait")
    assert code == 0, err
    assert "is done" in out
    code, out, _ = admin("ai", "persistent-resources", "describe", "seed-pool", "--region", "us-central1",
                         "--format", "json")
    assert json.loads(out)["resourcePools"][0]["replicaCount"] == "2"

    code, out, err = admin("ai", "persistent-resources", "delete", "seed-pool", "--region", "us-central1")
    assert code == 0, err
    operation_id = out.rsplit("operations describe ", 1)[1].split()[0]
    job.refresh_from_db()
    assert job.state == states.CANCELLING
    code, out, _ = admin("ai", "operations", "describe", operation_id, "--region", "us-central1", "--format", "json")
    assert json.loads(out)["done"] is False  # its replica has not stopped yet: no agent runs here


def test_a_job_that_does_not_match_the_pool_is_refused_naming_the_field(cli, nodes):
    admin = cli("alice")
    code, _, err = admin("ai", "persistent-resources", "create", "--persistent-resource-id", "seed-pool",
                         "--region", "us-central1", f"--resource-pool-spec={SEED_POOL}")
    assert code == 0, err
    code, _, err = admin("ai", "custom-jobs", "create", "--region", "us-central1", "--display-name", "x",
                         "--worker-pool-spec=machine-type=n1-standard-4,replica-count=1,accelerator-type="
                         "NVIDIA_TESLA_T4,accelerator-count=2,container-image-uri=img", "--persistent-resource-id",
                         "seed-pool")
    assert code == 1
    assert "jobSpec.workerPoolSpecs[0].machineSpec.acceleratorCount" in err
