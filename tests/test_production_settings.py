"""Production settings: no start on a public key, and `check --deploy` clean with the compose
deployment's environment (HSTS, SSL redirect, secure cookies on by default there)."""

from __future__ import annotations

import os
import re
import secrets
import subprocess
import sys
from pathlib import Path

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
