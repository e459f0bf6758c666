"""API tokens are stored as SHA-256 digests: the raw token is shown once; a lookup compares
digests; the management command, /auth/token and the migration of existing tokens all follow."""

import importlib
import io

import pytest
from django.apps import apps
from django.core.management import call_command
from django.test import Client

from trainhub.iam.models import ApiToken
from trainhub.iam.selectors import api_token_get
from trainhub.iam.services import api_token_get_or_create, api_token_rotate
from trainhub.iam.tokens import token_digest, token_new

JOBS = "/v1/projects/alpha/locations/us-central1/customJobs"


def authenticates(raw: str) -> bool:
    return Client(HTTP_AUTHORIZATION=f"Bearer {raw}").get(JOBS).status_code == 200


def test_a_new_token_is_random_and_its_digest_is_sha256_hex():
    raw, digest = token_new()
    assert raw.startswith("th_") and len(raw) >= 40 and raw != token_new()[0]
    assert digest == token_digest(raw) and len(digest) == 64 and int(digest, 16) >= 0


def test_only_the_digest_is_stored_and_the_raw_token_is_on_the_creating_instance_only(cast):
    token = api_token_get_or_create(user=cast["uma"])
    raw = token.key
    stored = ApiToken.objects.get(user=cast["uma"])
    assert stored.digest == token_digest(raw) and raw not in str(ApiToken.objects.values().get())
    assert stored.key is None and api_token_get_or_create(user=cast["uma"]).key is None
    assert authenticates(raw)
    assert api_token_get(key=stored.digest) is None  # the digest itself is no token


def test_rotating_revokes_the_old_token(cast):
    old = api_token_get_or_create(user=cast["uma"]).key
    new = api_token_rotate(user=cast["uma"]).key
    assert not authenticates(old) and authenticates(new)


def test_the_command_prints_a_usable_token_and_says_when_it_had_to_replace_one(cast):
    out, err = io.StringIO(), io.StringIO()
    call_command("apitoken", "uma", stdout=out, stderr=err)
    first = out.getvalue().strip()
    assert authenticates(first) and err.getvalue() == ""
    out, err = io.StringIO(), io.StringIO()
    call_command("apitoken", "uma", stdout=out, stderr=err)
    second = out.getvalue().strip()
    assert authenticates(second) and not authenticates(first)
    assert "cannot be shown" in err.getvalue() and "no longer works" in err.getvalue()


def test_signing_in_for_a_token_issues_a_usable_one(cast):
    answer = Client().post("/auth/token", {"username": "uma", "password": "uma-password"},
                           content_type="application/json")
    assert answer.status_code == 200 and authenticates(answer.json()["token"])


@pytest.mark.django_db
def test_the_migration_replaces_stored_tokens_by_their_digests(cast):
    legacy = "th_" + "a" * 43
    ApiToken.objects.create(user=cast["uma"], digest=legacy)  # as 0001 stored it: the raw token
    migration = importlib.import_module("trainhub.iam.migrations.0002_apitoken_digest")
    migration.hash_tokens(apps, None)
    assert ApiToken.objects.get(user=cast["uma"]).digest == token_digest(legacy)
    assert authenticates(legacy)
