"""The API token page: shows the token, creates it and rotates it only on a POST with CSRF."""

import re

import pytest
from django.test import Client
from django.urls import reverse

from trainhub.iam.models import ApiToken
from trainhub.iam.services import api_token_get_or_create
from trainhub.iam.tokens import token_digest

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("name, method", [("iam:token", "get"), ("iam:token_create", "post"),
                                          ("iam:token_rotate", "post")])
def test_the_token_pages_send_anonymous_visitors_to_the_login_page(client, name, method):
    response = getattr(client, method)(reverse(name))
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login") + "?next=")
    assert not ApiToken.objects.exists()


def test_a_first_visit_offers_a_create_button_and_creates_nothing(client, cast):
    client.force_login(cast["uma"])
    response = client.get(reverse("iam:token"))
    assert response.status_code == 200
    assert b"Create token" in response.content and b"Rotate token" not in response.content
    assert not ApiToken.objects.filter(user=cast["uma"]).exists()


def test_create_makes_a_token_that_the_page_then_shows_with_examples(client, cast):
    client.force_login(cast["uma"])
    response = client.post(reverse("iam:token_create"))
    assert response.status_code == 302 and response["Location"] == reverse("iam:token")
    page = client.get(reverse("iam:token"))
    content = page.content.decode()
    key = re.search(r'value="(th_[^"]+)"', content).group(1)
    assert ApiToken.objects.get(user=cast["uma"]).digest == token_digest(key)
    assert "Rotate token" in content and "shown only this once" in content
    assert f"trainhub auth login --url http://testserver --token {key}" in content
    assert (f'curl -H "Authorization: Bearer {key}" '
            "http://testserver/v1/projects/alpha/locations/us-central1/customJobs") in content
    assert "no-store" in page["Cache-Control"]
    # Shown once: the next visit has only the digest, and says so.
    again = client.get(reverse("iam:token")).content.decode()
    assert key not in again and "cannot show it again" in again and "Bearer TOKEN" in again


def test_rotate_replaces_the_token(client, cast):
    old = api_token_get_or_create(user=cast["uma"]).digest
    client.force_login(cast["uma"])
    assert client.post(reverse("iam:token_rotate")).status_code == 302
    new = ApiToken.objects.get(user=cast["uma"]).digest
    assert new != old
    shown = re.search(r'value="(th_[^"]+)"', client.get(reverse("iam:token")).content.decode()).group(1)
    assert token_digest(shown) == new


@pytest.mark.parametrize("name", ["iam:token_create", "iam:token_rotate"])
def test_create_and_rotate_refuse_get(client, cast, name):
    client.force_login(cast["uma"])
    assert client.get(reverse(name)).status_code == 405
    assert not ApiToken.objects.exists()


def test_rotate_needs_the_csrf_token_of_the_page(cast):
    old = api_token_get_or_create(user=cast["uma"]).digest
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(cast["uma"])
    assert browser.post(reverse("iam:token_rotate")).status_code == 403
    assert ApiToken.objects.get(user=cast["uma"]).digest == old

    page = browser.get(reverse("iam:token"))
    csrf = page.context["csrf_token"]
    assert browser.post(reverse("iam:token_rotate"), {"csrfmiddlewaretoken": str(csrf)}).status_code == 302
    assert ApiToken.objects.get(user=cast["uma"]).digest != old
