"""Production settings: no start on a public key, and `check --deploy` clean with the compose
deployment's environment (HSTS, SSL redirect, secure cookies on by default there)."""

from __future__ import annotations

import os
import re
import secrets
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from trainhub.devrun import local_secret_key

REPO_ROOT = Path(__file__).resolve().parent.parent


def manage(*args: str, **env: str) -> subprocess.CompletedProcess:
    clean = {name: value for name, value in os.environ.items()
             if name not in ("SECRET_KEY", "DEBUG", "DATABASE_URL")
             and not name.startswith(("SECURE_", "SESSION_", "CSRF_", "DJANGO_"))}
    return subprocess.run([sys.executable, "manage.py", *args], cwd=REPO_ROOT, capture_output=True, text=True,  # noqa: S603
                          timeout=120, env={**clean, "DJANGO_SETTINGS_MODULE": "trainhub.settings", **env})


def compose_environment() -> dict[str, str]:
    """The web service's environment as docker compose resolves it with nothing set."""
    document = yaml.safe_load((REPO_ROOT / "docker-compose.yml").read_text())
    resolved = {}
    for name, value in document["x-app"]["environment"].items():
        match = re.fullmatch(r"\$\{(\w+):([-?])(.*)\}", str(value))
        resolved[name] = match.group(3) if match and match.group(2) == "-" else str(value)
    return resolved


def test_without_debug_and_without_a_secret_key_it_refuses_to_start():
    run = manage("check", DEBUG="false")
    assert run.returncode != 0
    assert "ImproperlyConfigured: SECRET_KEY is not set" in run.stderr


def test_with_debug_it_starts_on_the_development_key():
    assert manage("check", DEBUG="true").returncode == 0


def test_check_deploy_is_clean_with_the_compose_environment():
    env = {**compose_environment(), "SECRET_KEY": secrets.token_urlsafe(50), "DATABASE_URL": ""}
    assert env["DEBUG"] == "false" and env["SECURE_SSL_REDIRECT"] == "true"
    run = manage("check", "--deploy", "--fail-level", "WARNING", **env)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "System check identified no issues" in run.stdout


def test_check_deploy_names_what_is_missing_without_them():
    run = manage("check", "--deploy", DEBUG="false", SECRET_KEY=secrets.token_urlsafe(50))
    for warning in ("security.W004", "security.W008", "security.W012", "security.W016"):
        assert warning in run.stdout + run.stderr


def test_make_run_keeps_one_generated_key_under_var(tmp_path):
    key = local_secret_key(tmp_path)
    assert len(key) >= 50 and local_secret_key(tmp_path) == key
    assert (tmp_path / "secret_key").stat().st_mode & 0o777 == 0o600


def test_compose_migrates_once_and_runs_one_process_web_replicas_behind_nginx():
    """Two web replicas migrating at once would race: migrate runs first, alone, and everything that
    uses the schema waits for it. Each replica is one gunicorn process, so that the proxy chooses the
    process per request (deploy/nginx/trainhub.conf.template, mounted where the nginx image renders
    templates with the variables the proxy service sets)."""
    services = yaml.safe_load((REPO_ROOT / "docker-compose.yml").read_text())["services"]
    for name in ("web", "agent-watch", "worker", "beat"):
        assert services[name]["depends_on"]["migrate"] == {"condition": "service_completed_successfully"}, name
    assert services["migrate"]["command"] == ["python", "manage.py", "migrate", "--noinput"]
    assert "migrate" not in " ".join(services["web"]["command"])
    assert services["web"]["environment"]["WEB_CONCURRENCY"] == 1 and "ports" not in services["web"]
    proxy = services["proxy"]
    assert proxy["ports"] == ["8000:8000"]
    template = "deploy/nginx/trainhub.conf.template"
    assert proxy["volumes"] == [f"./{template}:/etc/nginx/templates/trainhub.conf.template:ro"]
    variables = set(re.findall(r"\$\{(\w+)\}", (REPO_ROOT / template).read_text()))
    assert variables == set(proxy["environment"]) == {"TRAINHUB_WEB_SERVERS", "TRAINHUB_PROXY_LISTEN"}


def test_the_proxy_template_is_a_valid_nginx_configuration(tmp_path):
    from bench.environment import nginx_path, write_nginx_config

    nginx = nginx_path()
    if nginx is None:  # .ci/run installs it while the first suite runs
        pytest.skip("nginx is not installed (apt-get install nginx-light; .ci/run does)")
    config = write_nginx_config(tmp_path, servers=["127.0.0.1:8001", "127.0.0.1:8002"], listen="127.0.0.1:8000")
    tested = subprocess.run([nginx, "-t", "-p", str(tmp_path), "-c", str(config)], capture_output=True, text=True,  # noqa: S603
                            timeout=60, check=False)
    assert tested.returncode == 0, tested.stderr
    assert "least_conn;" in (tmp_path / "trainhub.conf").read_text()
