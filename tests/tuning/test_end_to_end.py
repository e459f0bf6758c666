"""The issue's acceptance run: a tuning job of 8 trials, 2 in parallel, over the real example
script (examples/hptune_quadratic.py), created with the CLI from a gcloud-style YAML file and run
by the real agent (subprocesses) and real scheduler passes. The best trial must be the right one
in REST, the CLI and the page."""

import json
import time
from pathlib import Path

import pytest
import yaml

from tests.agent.test_end_to_end import make_agent
from tests.cli.test_cli_live import cli  # noqa: F401 - the live CLI fixture (uma logged in)
from tests.conftest import later
from tests.tuning.helpers import BASE
from trainhub.jobs.models import CustomJob
from trainhub.scheduling.services import scheduler_pass
from trainhub.tuning.models import HyperparameterTuningJob

pytestmark = pytest.mark.django_db(transaction=True)

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "hptune_quadratic.py"
CONFIG = {
    "studySpec": {
        "metrics": [{"metricId": "score", "goal": "MAXIMIZE"}],
        "parameters": [{"parameterId": "x", "integerValueSpec": {"minValue": 0, "maxValue": 3}},
                       {"parameterId": "y", "discreteValueSpec": {"values": [-1, 0]}}],
        "algorithm": "GRID_SEARCH",
    },
    "trialJobSpec": {
        "workerPoolSpecs": [{"machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": 1,
                             "containerSpec": {"imageUri": "python:3.11", "command": ["python3", str(EXAMPLE)],
                                               "args": ["--steps=3"]}}],
        "baseOutputDirectory": {"outputUriPrefix": "gs://tuning-bucket/quadratic"},
    },
}


def run_study(job, agent, moment, limit=3000):
    """Step agent and scheduler until the study ends; return the most trial jobs ever live at once."""
    most_live = 0
    for _ in range(limit):
        moment = later(moment, 0.05)
        agent.tick(now=moment)
        scheduler_pass(now=moment)
        live = CustomJob.objects.filter(owner=job.owner_key, end_time__isnull=True).count()
        most_live = max(most_live, live)
        job.refresh_from_db()
        if job.is_terminal:
            return most_live
        time.sleep(0.01)  # let the trial subprocesses run
    raise AssertionError(f"tuning job stuck in {job.state}")


def test_eight_trials_two_at_a_time_find_the_best_point(cli, api, client, cast, nodes, now, tmp_path):  # noqa: F811
    config = tmp_path / "hptuning.yaml"
    config.write_text(yaml.safe_dump(CONFIG))
    code, out, err = cli("ai", "hp-tuning-jobs", "create", "--region", "us-central1", "--display-name", "quadratic",
                         "--config", str(config), "--max-trial-count", "8", "--parallel-trial-count", "2")
    assert code == 0, err
    name = out.split("[", 1)[1].split("]", 1)[0]
    job = HyperparameterTuningJob.objects.get(job_id=name.rsplit("/", 1)[1])

    most_live = run_study(job, make_agent(tmp_path / "work"), now)
    assert job.state == "JOB_STATE_SUCCEEDED", job.error
    assert most_live == 2

    # REST: every grid point once, in grid order, each measured from the script's hypertune file.
    body = api("uma").get(f"{BASE}/{job.job_id}").json()
    trials = body["trials"]
    assert [[p["value"] for p in t["parameters"]] for t in trials] == [
        [0, -1], [0, 0], [1, -1], [1, 0], [2, -1], [2, 0], [3, -1], [3, 0]]
    assert {t["state"] for t in trials} == {"SUCCEEDED"}
    assert [m["stepCount"] for m in trials[0]["measurements"]] == ["100", "200", "300"]
    best = trials[4]
    assert body["trainhubStatus"]["bestTrialId"] == best["id"] == "5"
    assert best["finalMeasurement"] == {"stepCount": "300", "elapsedDuration": best["finalMeasurement"]["elapsedDuration"],
                                        "metrics": [{"metricId": "score", "value": -0.125}]}
    # The trial wrote its model under <base>/<trial id>/model/, mapped below the node's storage root.
    best_job = CustomJob.objects.get(job_id=best["customJob"].rsplit("/", 1)[1])
    assert best_job.model_artifacts["files"] == [{"path": "model.json", "sizeBytes": best_job.model_artifacts["files"][0]["sizeBytes"]}]
    saved = Path(best_job.model_artifacts["path"]) / "model.json"
    assert saved.parent.as_posix().endswith("gcs/tuning-bucket/quadratic/5/model")
    assert json.loads(saved.read_text()) == {"x": 2.0, "y": -1.0, "score": -0.125}

    # CLI: describe and list name the same best trial.
    code, out, err = cli("ai", "hp-tuning-jobs", "describe", job.job_id, "--region", "us-central1", "--format", "json")
    assert code == 0, err
    assert json.loads(out)["trainhubStatus"]["bestTrialId"] == "5"
    code, out, _ = cli("ai", "hp-tuning-jobs", "list", "--region", "us-central1")
    row = next(line for line in out.splitlines() if job.job_id in line)
    assert row.split()[2:5] == ["JOB_STATE_SUCCEEDED", "8/8", "5"]

    # The page: the best trial highlighted first when sorted by the metric, and both charts.
    client.force_login(cast["uma"])
    page = client.get(f"/projects/alpha/locations/us-central1/hyperparameterTuningJobs/{job.job_id}/?sort=metric")
    html = page.content.decode()
    assert page.status_code == 200
    first_row = html.split("<tbody>", 1)[1].split("</tr>", 1)[0]
    assert 'class="row--best"' in first_row and ">5 <span" in first_row
    assert 'id="tuning-parcoords"' in html and 'id="tuning-metric"' in html
