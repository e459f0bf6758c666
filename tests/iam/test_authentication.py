"""Bearer tokens: the token and its user are read in one query; revocation and deactivation act at once."""

import datetime as dt

import pytest

from trainhub.common.errors import ApiError
from trainhub.iam.models import ApiToken
from trainhub.iam.selectors import api_token_get, project_get_for_user
from trainhub.iam.services import api_token_get_or_create, api_token_rotate, api_token_used
from trainhub.iam.tokens import token_digest

JOBS = "/v1/projects/alpha/locations/us-central1/customJobs"


def test_the_token_comes_with_its_whole_user_in_one_query(cast, django_assert_num_queries):
    cast["alice"].is_staff = True
    cast["alice"].save()
    key = api_token_get_or_create(user=cast["alice"]).key
    with django_assert_num_queries(1):
        token = api_token_get(key=key)
        assert (token.user.username, token.user.is_staff, token.user.is_active) == ("alice", True, True)
    assert token.user == cast["alice"] and token.digest == token_digest(key) and token.created is not None


def test_an_unknown_key_has_no_token(cast):
    assert api_token_get(key="th_nobody") is None
    assert api_token_get(key="th_nobody", project_id="alpha") is None


def test_the_membership_of_the_named_project_comes_with_the_token(cast, django_assert_num_queries):
    key = api_token_get_or_create(user=cast["uma"]).key
    with django_assert_num_queries(1):
        token = api_token_get(key=key, project_id="alpha")
        project = project_get_for_user(user=token.user, project_id="alpha", permission="aiplatform.customJobs.create")
    assert (token.digest, token.user, project) == (token_digest(key), cast["uma"], cast["alpha"])
    assert project.display_name == "Alpha"
    # uma's role in alpha grants no administration: the role read with the token decides.
    with django_assert_num_queries(0), pytest.raises(ApiError) as refused:
        project_get_for_user(user=token.user, project_id="alpha", permission="aiplatform.projects.manageMembers")
    assert refused.value.http_status == 403


def test_a_stranger_to_the_named_project_is_told_apart_from_a_bad_key(cast, django_assert_num_queries):
    key = api_token_get_or_create(user=cast["mallory"]).key
    with django_assert_num_queries(2):
        token = api_token_get(key=key, project_id="alpha")
        with pytest.raises(ApiError) as refused:
            project_get_for_user(user=token.user, project_id="alpha", permission="aiplatform.customJobs.get")
    assert token.user == cast["mallory"] and refused.value.http_status == 404
    # Another project than the one the path named is read as before.
    with django_assert_num_queries(1):
        assert project_get_for_user(user=token.user, project_id="beta", permission="aiplatform.customJobs.get") \
            == cast["beta"]


def test_api_answers_with_the_token_read_with_the_membership(api, cast):
    assert api("uma").get(JOBS).status_code == 200
    assert api("mallory").get(JOBS).status_code == 404
    stranger = api("uma")
    stranger.credentials(HTTP_AUTHORIZATION="Bearer th_nobody")
    assert stranger.get(JOBS).status_code == 401


def test_a_rotated_key_is_refused_at_once(api, cast):
    client = api("uma")
    assert client.get(JOBS).status_code == 200
    api_token_rotate(user=cast["uma"])
    assert client.get(JOBS).status_code == 401


def test_a_deactivated_users_token_is_refused(api, cast):
    client = api("uma")
    cast["uma"].is_active = False
    cast["uma"].save()
    response = client.get(JOBS)
    assert response.status_code == 401
    assert response.json()["error"]["status"] == "UNAUTHENTICATED"


def test_last_used_is_written_at_most_once_a_minute(cast, now):
    token = api_token_get_or_create(user=cast["uma"])
    api_token_used(token=token, now=now)
    api_token_used(token=token, now=now + dt.timedelta(seconds=59))
    assert ApiToken.objects.get(pk=token.pk).last_used == now
    api_token_used(token=token, now=now + dt.timedelta(seconds=61))
    assert ApiToken.objects.get(pk=token.pk).last_used == now + dt.timedelta(seconds=61)
