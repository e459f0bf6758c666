"""`trainhub ai hp-tuning-jobs`: the body built from --config and the flags, and cancel against a
live server (create, list and describe run in test_end_to_end)."""

import pytest
import yaml

from tests.tuning.helpers import double, study, tuning_body
from tests.cli.test_cli_live import cli  # noqa: F401 - the live CLI fixture (uma logged in)
from trainhub.cli.hp_tuning_jobs import build_tuning_job
from trainhub.cli.main import main
from trainhub.tuning.models import HyperparameterTuningJob


def test_trial_counts_default_to_one_when_neither_file_nor_flag_gives_them():
    body = build_tuning_job({"studySpec": {}}, display_name="d", max_trial_count=None, parallel_trial_count=None,
                            algorithm=None, labels=None)
    assert body == {"studySpec": {}, "displayName": "d", "maxTrialCount": 1, "parallelTrialCount": 1}


def test_flags_override_the_config_file():
    config = {"displayName": "from-file", "maxTrialCount": 20, "parallelTrialCount": 4,
              "studySpec": {"algorithm": "GRID_SEARCH", "metrics": []}}
    body = build_tuning_job(config, display_name="flag", max_trial_count=8, parallel_trial_count=None,
                            algorithm="random-search", labels={"team": "a"})
    assert body["displayName"] == "flag" and body["maxTrialCount"] == 8 and body["parallelTrialCount"] == 4
    assert body["studySpec"] == {"algorithm": "RANDOM_SEARCH", "metrics": []} and body["labels"] == {"team": "a"}


def test_config_is_required(capsys):
    assert main(["ai", "hp-tuning-jobs", "create", "--region", "r", "--display-name", "d"]) == 2
    assert "--config" in capsys.readouterr().err


@pytest.mark.django_db(transaction=True)
def test_a_bad_study_is_reported_with_its_field_and_cancel_works(cli, tmp_path):  # noqa: F811
    config = tmp_path / "hp.yaml"
    bad = tuning_body(study(double("x", 0, 1), algorithm="GRID_SEARCH"))
    config.write_text(yaml.safe_dump(bad))
    code, _, err = cli("ai", "hp-tuning-jobs", "create", "--region", "us-central1", "--display-name", "bad",
                       "--config", str(config))
    assert code == 1
    assert "INVALID_ARGUMENT" in err and "  - studySpec.parameters[0]: GRID_SEARCH needs every parameter" in err
    config.write_text(yaml.safe_dump(tuning_body(study(double("x", 0, 1)))))
    code, out, err = cli("ai", "hp-tuning-jobs", "create", "--region", "us-central1", "--display-name", "ok",
                         "--config", str(config))
    assert code == 0, err
    job_id = out.split("[", 1)[1].split("]", 1)[0].rsplit("/", 1)[1]
    code, out, err = cli("ai", "hp-tuning-jobs", "cancel", job_id, "--region", "us-central1")
    assert code == 0, err
    assert f"Request to cancel hyperparameter tuning job [{job_id}] has been sent" in out
    assert HyperparameterTuningJob.objects.get(job_id=job_id).state == "JOB_STATE_CANCELLED"
