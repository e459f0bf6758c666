"""Failed sign-ins are throttled per account and per client address, in Redis (shared by every
process), on the web /login/, the admin's /admin/login/ and the API's /auth/token alike; X-Forwarded-For counts only behind
the configured number of proxies; passwords need Django's default validators (8+)."""

import pytest
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.test import Client, RequestFactory

from trainhub.common.redis import get_redis
from trainhub.iam.throttle import PREFIX, client_address, login_attempt_start, login_succeeded


@pytest.fixture
def limits(settings):
    settings.TRAINHUB_LOGIN_FAILURES_PER_ACCOUNT = 5
    settings.TRAINHUB_LOGIN_FAILURES_PER_ADDRESS = 8


def api_login(client, username, password, **headers):
    return client.post("/auth/token", {"username": username, "password": password},
                       content_type="application/json", **headers)


def web_login(client, username, password, **headers):
    return client.post("/login/", {"username": username, "password": password}, **headers)


def test_after_the_limit_an_account_is_refused_even_with_the_right_password_on_both_logins(cast, limits):
    client = Client()
    for attempt in range(5):
        # Rotating X-Forwarded-For changes nothing: with no trusted proxy it is not read.
        assert api_login(client, "uma", "wrong", HTTP_X_FORWARDED_FOR=f"10.0.0.{attempt}").status_code == 401
    refused = api_login(client, "uma", "uma-password", HTTP_X_FORWARDED_FOR="10.9.9.9")
    assert refused.status_code == 429
    assert refused.json()["error"]["status"] == "RESOURCE_EXHAUSTED"
    response = web_login(client, "uma", "uma-password")
    assert response.status_code == 200 and "Too many failed sign-in attempts" in response.content.decode()
    assert "_auth_user_id" not in client.session
    # Another account from another address is not affected.
    assert api_login(Client(REMOTE_ADDR="10.1.1.1"), "alice", "alice-password").status_code == 200


def test_the_web_login_counts_failures_too(cast, limits):
    client = Client()
    for _ in range(5):
        assert "Please enter a correct username" in web_login(client, "alice", "wrong").content.decode()
    assert "Too many failed" in web_login(client, "alice", "alice-password").content.decode()
    assert api_login(client, "alice", "alice-password").status_code == 429


def test_the_admin_login_counts_failures_and_is_refused_after_the_limit_too(cast, limits):
    cast["alice"].is_staff = True
    cast["alice"].save(update_fields=["is_staff"])
    client = Client()
    for _ in range(5):
        response = client.post("/admin/login/", {"username": "alice", "password": "wrong"})
        assert "Please enter the correct username and password" in response.content.decode()
    response = client.post("/admin/login/", {"username": "alice", "password": "alice-password"})
    assert "Too many failed sign-in attempts" in response.content.decode()
    assert "_auth_user_id" not in client.session
    assert api_login(client, "alice", "alice-password").status_code == 429


def test_a_staff_member_still_signs_in_to_the_admin(cast, limits):
    cast["alice"].is_staff = True
    cast["alice"].save(update_fields=["is_staff"])
    client = Client()
    response = client.post("/admin/login/", {"username": "alice", "password": "alice-password"})
    assert response.status_code == 302 and client.session["_auth_user_id"] == str(cast["alice"].pk)


def test_one_address_trying_many_accounts_is_refused(cast, limits):
    client = Client()
    for attempt in range(8):
        assert api_login(client, f"nobody{attempt}", "wrong").status_code == 401
    assert api_login(client, "vic", "vic-password").status_code == 429
    assert api_login(Client(REMOTE_ADDR="10.2.2.2"), "vic", "vic-password").status_code == 200


def test_a_success_clears_the_accounts_count_not_the_addresss(cast, limits):
    client = Client()
    for _ in range(4):
        api_login(client, "uma", "wrong")
    assert api_login(client, "uma", "uma-password").status_code == 200
    for _ in range(4):
        api_login(client, "uma", "wrong")
    # The account may try again; the address has used its 8 failures.
    assert api_login(client, "uma", "uma-password").status_code == 429
    assert api_login(Client(REMOTE_ADDR="10.3.3.3"), "uma", "uma-password").status_code == 200


def test_an_attempt_counts_from_its_start_so_concurrent_ones_cannot_all_pass(cast, limits):
    # Checked first and counted after the password hash, 30 concurrent attempts were all checked
    # against a limit of 10: each one now takes its place before its password is checked.
    who = {"username": "uma", "address": "10.4.4.4"}
    assert [login_attempt_start(**who) for _ in range(5)] == [0] * 5
    assert login_attempt_start(**who) > 0  # none of the five has finished yet
    assert api_login(Client(REMOTE_ADDR="10.5.5.5"), "uma", "uma-password").status_code == 429


def test_a_success_gives_the_address_its_attempt_back(cast, limits):
    for _ in range(7):
        login_attempt_start(username="alice", address="10.6.6.6")
        login_succeeded(username="alice", address="10.6.6.6")
    assert int(get_redis().get(PREFIX + "address:10.6.6.6")) == 0
    assert api_login(Client(REMOTE_ADDR="10.6.6.6"), "alice", "alice-password").status_code == 200


def test_the_counts_live_in_redis_with_the_window_as_expiry(cast, limits, settings):
    api_login(Client(), "uma", "wrong")
    keys = {key.decode(): get_redis().ttl(key) for key in get_redis().scan_iter(PREFIX + "*")}
    assert len(keys) == 2 and all(0 < ttl <= settings.TRAINHUB_LOGIN_WINDOW_SECONDS for ttl in keys.values())


@pytest.mark.parametrize("proxies, forwarded, address", [
    (0, "1.1.1.1", "10.0.0.1"),
    (1, "6.6.6.6, 1.1.1.1", "1.1.1.1"),
    (2, "6.6.6.6, 1.1.1.1, 172.16.0.2", "1.1.1.1"),
    (2, "1.1.1.1", "10.0.0.1"),  # fewer entries than proxies: not through them
])
def test_x_forwarded_for_is_read_only_behind_trusted_proxies(settings, proxies, forwarded, address):
    settings.TRAINHUB_TRUSTED_PROXY_COUNT = proxies
    request = RequestFactory().get("/", REMOTE_ADDR="10.0.0.1", HTTP_X_FORWARDED_FOR=forwarded)
    assert client_address(request) == address


def test_behind_a_proxy_each_client_address_is_counted_apart(cast, limits, settings):
    settings.TRAINHUB_TRUSTED_PROXY_COUNT = 1
    for attempt in range(8):
        api_login(Client(), f"nobody{attempt}", "wrong", HTTP_X_FORWARDED_FOR="1.1.1.1")
    assert api_login(Client(), "vic", "vic-password", HTTP_X_FORWARDED_FOR="1.1.1.1").status_code == 429
    assert api_login(Client(), "vic", "vic-password", HTTP_X_FORWARDED_FOR="2.2.2.2").status_code == 200


@pytest.mark.parametrize("password", ["demo", "short1", "password", "12345678901"])
def test_weak_passwords_are_refused_by_the_validators(cast, password):
    with pytest.raises(ValidationError):
        validate_password(password, user=cast["uma"])


def test_a_long_unusual_password_passes(cast):
    validate_password("correct-horse-battery", user=cast["uma"])
