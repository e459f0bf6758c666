"""The CLI against a live trainhub server: the seed's config.yaml, --worker-pool-spec, list,
describe, cancel, stream-logs and a clear error for a broken spec."""

import datetime as dt
import json

import pytest
from django.utils import timezone

from tests.agent.test_end_to_end import make_agent, run_until
from tests.cli import SEED_CONFIG
from tests.conftest import remember_token
from trainhub.cli.main import main
from trainhub.jobs import states
from trainhub.jobs.models import CustomJob
from trainhub.scheduling.services import scheduler_pass

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def cli(live_server, cast, tmp_path, capsys):
    environ = {"TRAINHUB_CONFIG": str(tmp_path / "config.json"), "TRAINHUB_PROJECT": "alpha"}

    def run(*argv):
        code = main(list(argv), environ=environ)
        captured = capsys.readouterr()
        return code, captured.out, captured.err

    code, _, err = run("auth", "login", "--url", live_server.url, "--username", "uma", "--password", "uma-password")
    assert code == 0, err
    # Signing in issued uma a new token: api("uma") sends the same one instead of replacing it.
    remember_token(json.loads((tmp_path / "config.json").read_text())["token"])
    return run


def job_id_from(output):
    name = output.split("[", 1)[1].split("]", 1)[0]
    return name.rsplit("/", 1)[1]


def test_the_seed_config_yaml_is_accepted(cli, tmp_path, nodes):
    config = tmp_path / "config.yaml"
    config.write_text(SEED_CONFIG)
    code, out, err = cli("ai", "custom-jobs", "create", "--region", "us-central1", "--display-name", "seed",
                         "--config", str(config))
    assert code == 0, err
    job = CustomJob.objects.get(job_id=job_id_from(out))
    assert job.strategy == "FLEX_START"
    assert job.max_wait_seconds == 7200
    assert job.spec["jobSpec"]["workerPoolSpecs"][0]["containerSpec"]["command"] == ["start"]


def test_a_worker_pool_spec_job_runs_and_its_logs_stream(cli, nodes, now, tmp_path):
    code, out, err = cli("ai", "custom-jobs", "create", "--region", "us-central1", "--display-name", "hello",
                         "--worker-pool-spec", "machine-type=n1-standard-4,replica-count=1,"
                         "accelerator-type=NVIDIA_TESLA_T4,accelerator-count=1,container-image-uri=python:3.11",
                         "--command", "python3", "--args=-c,print('hello from trainhub')")
    assert code == 0, err
    job_id = job_id_from(out)
    job = CustomJob.objects.get(job_id=job_id)
    scheduler_pass(now=now)
    run_until(make_agent(tmp_path), job, now)
    code, out, err = cli("ai", "custom-jobs", "stream-logs", job_id, "--region", "us-central1")
    assert code == 0, err
    assert "workerpool0-0\thello from trainhub" in out
    code, out, _ = cli("ai", "custom-jobs", "describe", job_id, "--region", "us-central1", "--format", "json")
    assert json.loads(out)["state"] == "JOB_STATE_SUCCEEDED"
    code, out, _ = cli("ai", "custom-jobs", "list", "--region", "us-central1")
    assert job_id in out and "JOB_STATE_SUCCEEDED" in out


def test_cancel_through_the_cli(cli, cast):
    code, out, err = cli("ai", "custom-jobs", "create", "--region", "us-central1", "--display-name", "c",
                         "--worker-pool-spec", "machine-type=n1-standard-4,container-image-uri=img", "--command", "true")
    assert code == 0, err
    job_id = job_id_from(out)
    code, out, err = cli("ai", "custom-jobs", "cancel", job_id, "--region", "us-central1")
    assert code == 0, err
    assert f"Request to cancel custom job [{job_id}] has been sent" in out
    assert CustomJob.objects.get(job_id=job_id).state == states.CANCELLED


def test_a_broken_spec_is_a_clear_400(cli):
    code, out, err = cli("ai", "custom-jobs", "create", "--region", "us-central1", "--display-name", "bad",
                         "--worker-pool-spec", "machine-type=a2-highgpu-1g,accelerator-type=NVIDIA_TESLA_T4,"
                         "container-image-uri=img")
    assert code == 1
    assert "INVALID_ARGUMENT" in err
    assert "jobSpec.workerPoolSpecs[0].machineSpec.acceleratorType" in err
    assert "Traceback" not in err


def test_a_viewer_is_refused(live_server, cast, tmp_path, capsys):
    environ = {"TRAINHUB_CONFIG": str(tmp_path / "c.json"), "TRAINHUB_PROJECT": "alpha"}
    assert main(["auth", "login", "--url", live_server.url, "--username", "vic", "--password", "vic-password"],
                environ=environ) == 0
    code = main(["ai", "custom-jobs", "create", "--region", "us-central1", "--display-name", "x",
                 "--worker-pool-spec", "machine-type=n1-standard-4,container-image-uri=img"], environ=environ)
    assert code == 1
    assert "PERMISSION_DENIED" in capsys.readouterr().err


# Five minutes ago: the passes the live server runs at the real time then see the gang past the threshold too.
@pytest.mark.parametrize("now", [timezone.now().replace(microsecond=0) - dt.timedelta(minutes=5)])
def test_describe_prints_the_reservation_a_job_waits_behind(cli, cast, now, held_a100):
    from tests.conftest import container_pool, job_body, later
    from trainhub.jobs import services

    small = services.job_submit(project=cast["alpha"], location="us-central1", user=cast["uma"],
                                now=later(now, 102),  # SPOT: no stockout however long the real-time passes see it wait
                                body=job_body(container_pool("a2-highgpu-1g"), scheduling={"strategy": "SPOT"}))
    scheduler_pass(now=later(now, 103))
    code, out, err = cli("ai", "custom-jobs", "describe", small.job_id, "--region", "us-central1", "--format", "json")
    assert code == 0, err
    reasons = json.loads(out)["trainhubStatus"]["waitReasons"]
    assert any(f"reserved for FLEX_START job big-gang ({held_a100.job_id}) until" in reason for reason in reasons)
