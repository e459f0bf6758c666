"""`trainhub` commands run in-process against a fake HTTP session (no server, no database)."""

from __future__ import annotations

import json
import socket
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import requests

from tests.cli import SEED_CONFIG
from trainhub.cli import auth as cli_auth
from trainhub.cli import base as cli
from trainhub.cli.client import CliError, TrainhubClient, error_from_response
from trainhub.cli.main import config_path, main, render_error

JOB_NAME = "projects/demo/locations/us-central1/customJobs/123"
JOBS_URL = "http://trainhub.test/v1/projects/demo/locations/us-central1/customJobs"
POOL = "machine-type=n1-standard-4,container-image-uri=gcr.io/p/trainer:1"


def answer(status: int = 200, body: Any = None, *, text: str | None = None) -> requests.Response:
    """A real requests.Response carrying a JSON body (or raw text)."""
    response = requests.Response()
    response.status_code = status
    response.reason = "Reason"
    response._content = (text if text is not None else json.dumps(body if body is not None else {})).encode()
    response.headers["Content-Type"] = "text/html" if text is not None else "application/json"
    return response


def google_error(code: int, status: str, message: str, violations: list[tuple[str, str]] = ()) -> requests.Response:
    details = [{"@type": "type.googleapis.com/google.rpc.BadRequest",
                "fieldViolations": [{"field": f, "description": d} for f, d in violations]}] if violations else []
    return answer(code, {"error": {"code": code, "status": status, "message": message, "details": details}})


@dataclass
class Call:
    method: str
    url: str
    params: dict[str, Any]
    json: Any
    headers: dict[str, str]


@dataclass
class FakeSession:
    """Stands in for requests.Session: records each request and replays queued answers."""

    answers: list[requests.Response | Exception] = field(default_factory=list)
    calls: list[Call] = field(default_factory=list)

    def request(self, method: str, url: str, *, params: Any = None, json: Any = None, headers: Any = None,
                timeout: Any = None) -> requests.Response:
        self.calls.append(Call(method, url, dict(params or {}), json, dict(headers or {})))
        reply = self.answers.pop(0)
        if isinstance(reply, Exception):
            raise reply
        return reply


@pytest.fixture
def environ(tmp_path: Path) -> dict[str, str]:
    return {"TRAINHUB_CONFIG": str(tmp_path / "config.json"), "TRAINHUB_URL": "http://trainhub.test"}


@pytest.fixture(autouse=True)
def no_sleeping(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    sleeps: list[float] = []
    monkeypatch.setattr(cli, "_sleep", sleeps.append)
    return sleeps


def run(argv: list[str], environ: dict[str, str], *answers: requests.Response | Exception) -> tuple[int, FakeSession]:
    session = FakeSession(list(answers))
    return main(argv, environ=environ, session=session), session


# Configuration ----------------------------------------------------------------------------------


def test_it_finds_the_config_file_under_xdg_config_home() -> None:
    assert config_path({"XDG_CONFIG_HOME": "/x", "HOME": "/h"}) == "/x/trainhub/config.json"


def test_it_falls_back_to_dot_config_in_the_home_directory() -> None:
    assert config_path({"HOME": "/h"}) == "/h/.config/trainhub/config.json"


def test_it_lets_trainhub_config_override_the_config_path() -> None:
    assert config_path({"TRAINHUB_CONFIG": "/c.json", "XDG_CONFIG_HOME": "/x"}) == "/c.json"


@pytest.mark.parametrize(
    ("flag", "env", "stored", "expected"),
    [
        ("flag-token", "env-token", "file-token", "flag-token"),
        (None, "env-token", "file-token", "env-token"),
        (None, None, "file-token", "file-token"),
    ],
)
def test_it_prefers_the_flag_then_the_environment_then_the_config_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flag: str | None, env: str | None, stored: str, expected: str
) -> None:
    environ = {"TRAINHUB_CONFIG": str(tmp_path / "c.json")}
    (tmp_path / "c.json").write_text(json.dumps({"token": stored}))
    if env:
        environ["TRAINHUB_TOKEN"] = env
    argv = ["--token", flag] if flag else []
    assert main([*argv, "auth", "print-token"], environ=environ) == 0
    assert capsys.readouterr().out == f"{expected}\n"


def test_it_defaults_to_the_local_server_and_the_demo_project(tmp_path: Path) -> None:
    code, session = run(["ai", "custom-jobs", "describe", "7", "--region", "europe-west4"],
                        {"TRAINHUB_CONFIG": str(tmp_path / "none.json")}, answer(200, {"name": "n"}))
    assert code == 0
    assert session.calls[0].url == "http://127.0.0.1:8000/v1/projects/demo/locations/europe-west4/customJobs/7"


def test_it_takes_url_and_project_from_the_config_file(tmp_path: Path) -> None:
    (tmp_path / "c.json").write_text(json.dumps({"url": "http://stored:9000/", "project": "vision", "token": "t"}))
    code, session = run(["ai", "custom-jobs", "describe", "7", "--region", "r"],
                        {"TRAINHUB_CONFIG": str(tmp_path / "c.json")}, answer(200, {}))
    assert code == 0
    assert session.calls[0].url == "http://stored:9000/v1/projects/vision/locations/r/customJobs/7"
    assert session.calls[0].headers["Authorization"] == "Bearer t"


def test_it_accepts_global_flags_after_the_subcommand(environ: dict[str, str]) -> None:
    code, session = run(["ai", "custom-jobs", "describe", "7", "--region", "r", "--project", "p", "--token", "tk"],
                        environ, answer(200, {}))
    assert code == 0
    assert session.calls[0].url == "http://trainhub.test/v1/projects/p/locations/r/customJobs/7"
    assert session.calls[0].headers["Authorization"] == "Bearer tk"


def test_it_keeps_a_global_flag_given_before_the_subcommand(environ: dict[str, str]) -> None:
    code, session = run(["--project", "early", "ai", "custom-jobs", "describe", "7", "--region", "r"],
                        environ, answer(200, {}))
    assert code == 0
    assert "/projects/early/" in session.calls[0].url


def test_it_reports_a_corrupt_config_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "c.json").write_text("{not json")
    assert main(["auth", "print-token"], environ={"TRAINHUB_CONFIG": str(tmp_path / "c.json")}) == 1
    assert "ERROR: config file [" in capsys.readouterr().err


# auth -------------------------------------------------------------------------------------------


def test_it_logs_in_with_a_password_and_stores_the_token_privately(environ: dict[str, str], tmp_path: Path) -> None:
    code, session = run(["auth", "login", "--url", "http://login.test", "--username", "ada", "--password", "pw",
                         "--project", "vision"], environ, answer(200, {"token": "tok-1"}))
    assert code == 0
    call = session.calls[0]
    assert (call.method, call.url, call.json) == ("POST", "http://login.test/auth/token",
                                                  {"username": "ada", "password": "pw"})
    stored = tmp_path / "config.json"
    assert json.loads(stored.read_text()) == {"url": "http://login.test", "token": "tok-1", "project": "vision"}
    assert stat.S_IMODE(stored.stat().st_mode) == 0o600


def test_it_prompts_for_the_password_when_none_is_given(
    environ: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    prompts: list[str] = []
    monkeypatch.setattr(cli_auth, "_getpass", lambda prompt: prompts.append(prompt) or "secret")
    code, session = run(["auth", "login", "--username", "ada"], environ, answer(200, {"token": "t"}))
    assert code == 0
    assert prompts == ["Password: "]
    assert session.calls[0].json == {"username": "ada", "password": "secret"}


def test_it_stores_a_given_token_without_asking_the_server(environ: dict[str, str], tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps({"project": "kept", "token": "old"}))
    (tmp_path / "config.json").chmod(0o644)
    code, session = run(["auth", "login", "--url", "http://x.test", "--token", "direct"], environ)
    assert code == 0
    assert session.calls == []
    assert json.loads((tmp_path / "config.json").read_text()) == {"url": "http://x.test", "token": "direct",
                                                                 "project": "kept"}
    assert stat.S_IMODE((tmp_path / "config.json").stat().st_mode) == 0o600


def test_it_creates_the_config_directory_when_logging_in(tmp_path: Path) -> None:
    environ = {"XDG_CONFIG_HOME": str(tmp_path / "xdg")}
    code, _ = run(["auth", "login", "--token", "t"], environ)
    assert code == 0
    assert json.loads((tmp_path / "xdg" / "trainhub" / "config.json").read_text())["token"] == "t"


def test_it_logs_in_with_a_config_file_named_without_a_directory(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    code, _ = run(["auth", "login", "--token", "t"], {"TRAINHUB_CONFIG": "trainhub.json"})
    assert code == 0
    assert json.loads((tmp_path / "trainhub.json").read_text())["token"] == "t"


@pytest.mark.parametrize("argv", [["auth", "login"], ["auth", "login", "--username", "u", "--token", "t"]])
def test_it_requires_exactly_one_way_to_log_in(environ: dict[str, str], capsys: pytest.CaptureFixture[str],
                                               argv: list[str]) -> None:
    code, session = run(argv, environ)
    assert code == 2
    assert "trainhub auth login: error:" in capsys.readouterr().err
    assert session.calls == []


def test_it_reports_rejected_credentials_without_the_login_hint(environ: dict[str, str],
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    code, _ = run(["auth", "login", "--username", "u", "--password", "bad"], environ,
                  google_error(401, "UNAUTHENTICATED", "Invalid username or password."))
    assert code == 1
    assert capsys.readouterr().err == "ERROR: (trainhub.auth.login) UNAUTHENTICATED: Invalid username or password.\n"


def test_it_explains_how_to_get_a_token_when_none_is_configured(environ: dict[str, str],
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["auth", "print-token"], environ=environ) == 1
    assert "run `trainhub auth login`" in capsys.readouterr().err


# create -----------------------------------------------------------------------------------------


def test_it_creates_a_job_from_the_seed_config_and_prints_what_gcloud_prints(
    environ: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "job.yaml").write_text(SEED_CONFIG)
    code, session = run(["ai", "custom-jobs", "create", "--region", "us-central1", "--display-name", "seed",
                         "--config", str(tmp_path / "job.yaml")], environ, answer(200, {"name": JOB_NAME}))
    assert code == 0
    call = session.calls[0]
    assert (call.method, call.url) == ("POST", JOBS_URL)
    assert call.json["displayName"] == "seed"
    assert call.json["jobSpec"]["workerPoolSpecs"]["machineSpec"]["machineType"] == "a2-highgpu-1g"
    assert call.json["jobSpec"]["scheduling"] == {"strategy": "FLEX_START", "maxWaitDuration": "7200s"}
    assert capsys.readouterr().out == (
        f"CustomJob [{JOB_NAME}] is submitted successfully.\n"
        "\n"
        "Your job is still active. You may view the status of your job with the command\n"
        "\n"
        f"  $ trainhub ai custom-jobs describe {JOB_NAME}\n"
        "\n"
        "or continue streaming the logs with the command\n"
        "\n"
        f"  $ trainhub ai custom-jobs stream-logs {JOB_NAME}\n"
    )


def test_it_creates_a_job_from_worker_pool_specs_with_labels(environ: dict[str, str]) -> None:
    code, session = run(["ai", "custom-jobs", "create", "--region", "us-central1", "--display-name", "two-pools",
                         "--worker-pool-spec", POOL, "--worker-pool-spec", "", "--command", "python,train.py",
                         "--args=--epochs=3", "--labels", "team=ml,tier=gold",
                         "--persistent-resource-id", "pool-a"], environ, answer(200, {"name": JOB_NAME}))
    assert code == 0
    assert session.calls[0].json == {
        "displayName": "two-pools",
        "jobSpec": {
            "workerPoolSpecs": [
                {"machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": 1,
                 "containerSpec": {"imageUri": "gcr.io/p/trainer:1", "command": ["python", "train.py"],
                                   "args": ["--epochs=3"]}},
                {},
            ],
            "persistentResourceId": "pool-a",
        },
        "labels": {"team": "ml", "tier": "gold"},
    }


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--worker-pool-spec", "machine-type=n1,accelerator-count=2,container-image-uri=i"],
         "argument --worker-pool-spec: accelerator-count requires accelerator-type"),
        (["--worker-pool-spec", "", "--worker-pool-spec", POOL], "the first --worker-pool-spec must not be empty"),
        ([], "either --worker-pool-spec or a --config file with workerPoolSpecs is required"),
        (["--worker-pool-spec", POOL, "--labels", "oops"], "argument --labels: expected KEY=VALUE, got [oops]"),
    ],
)
def test_it_rejects_bad_create_flags_as_usage_errors_without_calling_the_server(
    environ: dict[str, str], capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    code, session = run(["ai", "custom-jobs", "create", "--region", "r", "--display-name", "j", *extra], environ)
    assert code == 2
    err = capsys.readouterr().err
    assert f"trainhub ai custom-jobs create: error: {message}" in err
    assert session.calls == []


def test_it_requires_a_region_to_create_a_job(environ: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    code, _ = run(["ai", "custom-jobs", "create", "--display-name", "j", "--worker-pool-spec", POOL], environ)
    assert code == 2
    assert "the following arguments are required: --region" in capsys.readouterr().err


def test_it_reports_a_missing_config_file_without_a_traceback(environ: dict[str, str], tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    code, session = run(["ai", "custom-jobs", "create", "--region", "r", "--display-name", "j",
                         "--config", str(tmp_path / "absent.yaml")], environ)
    assert code == 1
    err = capsys.readouterr().err
    assert err.startswith("ERROR: cannot read config file [") and "No such file or directory" in err
    assert "Traceback" not in err
    assert session.calls == []


def test_it_reports_an_unparseable_config_file(environ: dict[str, str], tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "bad.yaml").write_text("workerPoolSpecs: [\n")
    code, _ = run(["ai", "custom-jobs", "create", "--region", "r", "--display-name", "j",
                   "--config", str(tmp_path / "bad.yaml")], environ)
    assert code == 1
    assert "is not valid YAML" in capsys.readouterr().err


# Errors -----------------------------------------------------------------------------------------


def test_it_prints_the_servers_message_and_each_field_violation(environ: dict[str, str],
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    rejection = google_error(400, "INVALID_ARGUMENT", "Request contains an invalid argument.", [
        ("jobSpec.workerPoolSpecs[0].machineSpec.machineType", "unknown machine type [n9-huge]"),
        ("displayName", "must not be empty"),
    ])
    code, _ = run(["ai", "custom-jobs", "create", "--region", "us-central1", "--display-name", "j",
                   "--worker-pool-spec", POOL], environ, rejection)
    assert code == 1
    assert capsys.readouterr().err == (
        "ERROR: (trainhub.ai.custom-jobs.create) INVALID_ARGUMENT: Request contains an invalid argument.\n"
        "  - jobSpec.workerPoolSpecs[0].machineSpec.machineType: unknown machine type [n9-huge]\n"
        "  - displayName: must not be empty\n"
    )


def test_it_tells_the_user_to_log_in_when_the_server_answers_401(environ: dict[str, str],
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    code, _ = run(["ai", "custom-jobs", "list", "--region", "r"], environ,
                  google_error(401, "UNAUTHENTICATED", "Request is missing required authentication credential."))
    assert code == 1
    err = capsys.readouterr().err
    assert err.startswith("ERROR: (trainhub.ai.custom-jobs.list) UNAUTHENTICATED: Request is missing")
    assert "trainhub auth login" in err


def test_it_reports_an_unreachable_server(environ: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    code, _ = run(["ai", "custom-jobs", "list", "--region", "r"], environ,
                  requests.ConnectionError("Connection refused"))
    assert code == 1
    assert capsys.readouterr().err == "ERROR: cannot reach trainhub at http://trainhub.test: Connection refused\n"


def test_it_reports_a_refused_connection_from_a_real_socket(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    code = main(["--url", f"http://127.0.0.1:{port}", "ai", "custom-jobs", "list", "--region", "r"],
                environ={"TRAINHUB_CONFIG": str(tmp_path / "c.json")})
    assert code == 1
    err = capsys.readouterr().err
    assert err.startswith(f"ERROR: cannot reach trainhub at http://127.0.0.1:{port}: ")
    assert "Traceback" not in err


def test_it_reports_a_timeout(environ: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    code, _ = run(["ai", "custom-jobs", "describe", "1", "--region", "r"], environ, requests.ReadTimeout("slow"))
    assert code == 1
    assert "did not answer within 30s" in capsys.readouterr().err


def test_it_summarises_an_error_page_that_is_not_json() -> None:
    error = error_from_response(answer(502, text="<html>\n<h1>Bad   Gateway</h1></html>"))
    assert (error.status, error.message, error.violations) == ("UNAVAILABLE", "<html> <h1>Bad Gateway</h1></html>", [])


def test_it_ignores_error_details_that_are_not_field_violations() -> None:
    response = answer(404, {"error": {"code": 404, "status": "NOT_FOUND", "message": "CustomJob 9 not found.",
                                      "details": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo"}]}})
    assert render_error("trainhub.ai.custom-jobs.describe", error_from_response(response)) == (
        "ERROR: (trainhub.ai.custom-jobs.describe) NOT_FOUND: CustomJob 9 not found.")


def test_it_renders_local_errors_without_a_status() -> None:
    assert render_error("trainhub.ai.custom-jobs.list", CliError("disk on fire")) == "ERROR: disk on fire"


def test_it_rejects_a_successful_answer_that_is_not_json() -> None:
    client = TrainhubClient("http://t.test", session=FakeSession([answer(200, text="<html/>")]))
    with pytest.raises(CliError, match="not JSON"):
        client.get("/v1/x")


def test_it_quotes_path_segments_when_building_urls() -> None:
    session = FakeSession([answer(200, {})])
    TrainhubClient("http://t.test/", session=session).get("/v1/x")
    assert session.calls[0].url == "http://t.test/v1/x"


def test_it_sends_no_authorization_header_without_a_token() -> None:
    session = FakeSession([answer(200, {})])
    TrainhubClient("http://t.test", session=session).get("/v1/x")
    assert "Authorization" not in session.calls[0].headers


def test_it_exits_2_with_usage_when_no_command_is_given(environ: dict[str, str],
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    assert main([], environ=environ) == 2
    assert "usage: trainhub" in capsys.readouterr().err


def test_it_exits_0_after_printing_help(environ: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ai", "custom-jobs", "create", "--help"], environ=environ) == 0
    assert "--worker-pool-spec" in capsys.readouterr().out


# list / describe / cancel -----------------------------------------------------------------------


def _job(job_id: str, name: str, state: str = "JOB_STATE_RUNNING") -> dict[str, str]:
    return {"name": f"projects/demo/locations/us-central1/customJobs/{job_id}", "displayName": name,
            "state": state, "createTime": "2026-12-02T18:00:00Z"}


def test_it_lists_jobs_as_a_table_across_pages(environ: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    code, session = run(["ai", "custom-jobs", "list", "--region", "us-central1", "--filter", "state=JOB_STATE_RUNNING"],
                        environ,
                        answer(200, {"customJobs": [_job("1", "resnet")], "nextPageToken": "p2"}),
                        answer(200, {"customJobs": [_job("22", "bert-large", "JOB_STATE_QUEUED")]}))
    assert code == 0
    assert [c.params for c in session.calls] == [
        {"filter": "state=JOB_STATE_RUNNING"},
        {"filter": "state=JOB_STATE_RUNNING", "pageToken": "p2"},
    ]
    assert capsys.readouterr().out.splitlines() == [
        "JOB_ID  DISPLAY_NAME  STATE              CREATE_TIME",
        "1       resnet        JOB_STATE_RUNNING  2026-12-02T18:00:00Z",
        "22      bert-large    JOB_STATE_QUEUED   2026-12-02T18:00:00Z",
    ]


def test_it_stops_listing_at_the_limit(environ: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    code, session = run(["ai", "custom-jobs", "list", "--region", "us-central1", "--limit", "2", "--format", "json"],
                        environ,
                        answer(200, {"customJobs": [_job("1", "a")], "nextPageToken": "p2"}),
                        answer(200, {"customJobs": [_job("2", "b"), _job("3", "c")], "nextPageToken": "p3"}))
    assert code == 0
    assert len(session.calls) == 2
    assert session.calls[0].params["pageSize"] == 2
    assert [job["displayName"] for job in json.loads(capsys.readouterr().out)] == ["a", "b"]


def test_it_sends_the_page_size_it_is_given(environ: dict[str, str]) -> None:
    code, session = run(["ai", "custom-jobs", "list", "--region", "r", "--page-size", "5", "--limit", "50"],
                        environ, answer(200, {"customJobs": []}))
    assert code == 0
    assert session.calls[0].params["pageSize"] == 5


def test_it_says_when_no_jobs_are_listed(environ: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    code, _ = run(["ai", "custom-jobs", "list", "--region", "r"], environ, answer(200, {}))
    assert code == 0
    captured = capsys.readouterr()
    assert (captured.out, captured.err) == ("", "Listed 0 items.\n")


def test_it_lists_jobs_as_yaml_documents(environ: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    code, _ = run(["ai", "custom-jobs", "list", "--region", "r", "--format", "yaml"], environ,
                  answer(200, {"customJobs": [_job("1", "a"), _job("2", "b")]}))
    assert code == 0
    assert capsys.readouterr().out.count("displayName:") == 2


@pytest.mark.parametrize("value", ["0", "-3", "many"])
def test_it_rejects_a_limit_that_is_not_positive(environ: dict[str, str], value: str) -> None:
    code, _ = run(["ai", "custom-jobs", "list", "--region", "r", "--limit", value], environ)
    assert code == 2


@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf", "soon"])
def test_it_rejects_a_polling_interval_that_is_not_a_positive_number(
    environ: dict[str, str], capsys: pytest.CaptureFixture[str], value: str
) -> None:
    code, _ = run(["ai", "custom-jobs", "stream-logs", JOB_NAME, "--polling-interval", value], environ)
    assert code == 2
    assert "argument --polling-interval: must be a positive float" in capsys.readouterr().err


def test_it_describes_a_job_as_yaml(environ: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    code, session = run(["ai", "custom-jobs", "describe", "123", "--region", "us-central1"], environ,
                        answer(200, _job("123", "resnet")))
    assert code == 0
    assert session.calls[0].url == f"{JOBS_URL}/123"
    assert capsys.readouterr().out.splitlines()[:2] == [f"name: {JOB_NAME}", "displayName: resnet"]


def test_it_describes_a_job_as_json(environ: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    code, _ = run(["ai", "custom-jobs", "describe", "123", "--region", "r", "--format", "json"], environ,
                  answer(200, _job("123", "resnet")))
    assert code == 0
    assert json.loads(capsys.readouterr().out)["displayName"] == "resnet"


def test_it_takes_project_and_region_from_a_full_job_name(environ: dict[str, str]) -> None:
    code, session = run(["ai", "custom-jobs", "describe", "projects/vision/locations/asia-east1/customJobs/9",
                         "--region", "ignored"], environ, answer(200, {}))
    assert code == 0
    assert session.calls[0].url == "http://trainhub.test/v1/projects/vision/locations/asia-east1/customJobs/9"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["describe", "123"], "--region is required unless a full resource name is given"),
        (["describe", "projects/p/locations/l/models/9"], "is not a customJobs resource name"),
        (["cancel", "a/b", "--region", "r"], "expected an ID or projects/PROJECT/locations/REGION/customJobs/ID"),
    ],
)
def test_it_rejects_a_job_reference_it_cannot_resolve(environ: dict[str, str], capsys: pytest.CaptureFixture[str],
                                                      argv: list[str], message: str) -> None:
    code, session = run(["ai", "custom-jobs", *argv], environ)
    assert code == 2
    assert message in capsys.readouterr().err
    assert session.calls == []


def test_it_cancels_a_job_and_prints_what_gcloud_prints(environ: dict[str, str],
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    code, session = run(["ai", "custom-jobs", "cancel", JOB_NAME], environ, answer(200, {}))
    assert code == 0
    call = session.calls[0]
    assert (call.method, call.url, call.json) == ("POST", f"{JOBS_URL}/123:cancel", {})
    assert capsys.readouterr().out == (
        "Request to cancel custom job [123] has been sent\n"
        "\n"
        "You may view the status of your job with the command\n"
        "\n"
        "  $ trainhub ai custom-jobs describe projects/demo/locations/us-central1/customJobs/123\n"
    )


# stream-logs ------------------------------------------------------------------------------------


def _logs(entries: list[dict[str, Any]], next_after: int, state: str) -> requests.Response:
    return answer(200, {"entries": entries, "nextAfter": next_after, "jobState": state})


def _entry(entry_id: int, text: str, stream: str = "stdout") -> dict[str, Any]:
    return {"id": entry_id, "taskName": "workerpool0-0", "stream": stream,
            "time": "2026-12-02T18:00:00.000000Z", "text": text}


def test_it_streams_logs_until_the_job_ends_and_nothing_is_left(
    environ: dict[str, str], capsys: pytest.CaptureFixture[str], no_sleeping: list[float]
) -> None:
    code, session = run(
        ["ai", "custom-jobs", "stream-logs", "123", "--region", "us-central1", "--polling-interval", "5"], environ,
        _logs([_entry(1, "hello\n")], 1, "JOB_STATE_RUNNING"),
        _logs([], 1, "JOB_STATE_RUNNING"),
        _logs([_entry(2, "oops", "stderr")], 2, "JOB_STATE_SUCCEEDED"),
        _logs([], 2, "JOB_STATE_SUCCEEDED"),
    )
    assert code == 0
    assert [c.url for c in session.calls] == [f"{JOBS_URL}/123/logs"] * 4
    assert [c.params["after"] for c in session.calls] == [0, 1, 1, 2]
    assert no_sleeping == [5.0]
    assert capsys.readouterr().out == (
        "INFO\t2026-12-02T18:00:00.000000Z\tworkerpool0-0\thello\n"
        "ERROR\t2026-12-02T18:00:00.000000Z\tworkerpool0-0\toops\n"
    )


def test_it_streams_only_the_requested_task(environ: dict[str, str]) -> None:
    code, session = run(["ai", "custom-jobs", "stream-logs", JOB_NAME, "--task-name", "workerpool1-0"], environ,
                        _logs([], 0, "JOB_STATE_FAILED"))
    assert code == 0
    assert session.calls[0].params == {"after": 0, "taskName": "workerpool1-0"}


def test_it_continues_after_the_last_entry_when_the_server_omits_next_after(environ: dict[str, str]) -> None:
    code, session = run(["ai", "custom-jobs", "stream-logs", JOB_NAME], environ,
                        answer(200, {"entries": [_entry(7, "a"), _entry(9, "b")], "jobState": "JOB_STATE_CANCELLED"}),
                        _logs([], 9, "JOB_STATE_CANCELLED"))
    assert code == 0
    assert session.calls[1].params["after"] == 9


def test_it_uses_the_default_polling_interval(environ: dict[str, str], no_sleeping: list[float]) -> None:
    code, _ = run(["ai", "custom-jobs", "stream-logs", JOB_NAME], environ,
                  _logs([], 0, "JOB_STATE_PENDING"), _logs([], 0, "JOB_STATE_SUCCEEDED"))
    assert code == 0
    assert no_sleeping == [2.0]


def test_it_stops_streaming_quietly_on_ctrl_c(environ: dict[str, str], monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    def interrupt(seconds: float) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "_sleep", interrupt)
    code, _ = run(["ai", "custom-jobs", "stream-logs", JOB_NAME], environ, _logs([], 0, "JOB_STATE_RUNNING"))
    assert code == 130
    assert "Traceback" not in capsys.readouterr().err


def test_it_can_be_driven_through_a_requests_session_passed_in(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    fake = FakeSession([answer(200, _job("5", "patched"))])
    monkeypatch.setattr(requests.Session, "request", lambda self, method, url, **kw: fake.request(method, url, **kw))
    assert main(["ai", "custom-jobs", "describe", "5", "--region", "r", "--format", "json"],
                environ={"TRAINHUB_CONFIG": str(tmp_path / "c.json")}, session=requests.Session()) == 0
    assert json.loads(capsys.readouterr().out)["displayName"] == "patched"


@pytest.mark.parametrize("flag", [["--args=^:^-c:print('a, b'):--lr=0.1,0.2"],
                                  ["--args", "^:^-c:print('a, b'):--lr=0.1,0.2"]])
def test_args_take_gclouds_alternate_delimiter_so_commas_stay_in_an_argument(environ: dict[str, str],
                                                                             flag: list[str]) -> None:
    code, session = run(["ai", "custom-jobs", "create", "--region", "us-central1", "--display-name", "commas",
                         "--worker-pool-spec", POOL, "--command", "python3", *flag], environ,
                        answer(200, {"name": JOB_NAME}))
    assert code == 0
    container = session.calls[0].json["jobSpec"]["workerPoolSpecs"][0]["containerSpec"]
    assert container["args"] == ["-c", "print('a, b')", "--lr=0.1,0.2"]


def test_a_slurm_report_asks_for_its_text_alone_and_prints_it(environ: dict[str, str],
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    plain = answer(text="JOBID PARTITION\n    1 a4\n")
    plain.headers["Content-Type"] = "text/plain; charset=utf-8"
    code, session = run(["slurm", "sprio", "--cluster", "c1", "-l"], environ, plain)
    assert code == 0 and capsys.readouterr().out == "JOBID PARTITION\n    1 a4\n"
    assert session.calls[0].headers["Accept"] == "text/plain"
    assert session.calls[0].params == {"long": "true"}


def test_a_slurm_report_from_a_server_that_answers_json_prints_its_text(environ: dict[str, str],
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    code, _ = run(["slurm", "squeue", "--cluster", "c1"], environ, answer(body={"text": "JOBID\n", "rows": []}))
    assert code == 0 and capsys.readouterr().out == "JOBID\n"
