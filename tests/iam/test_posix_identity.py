"""A user's uid, gid and group on the Slurm clusters: a default from their number, or an
administrator's (iam.PosixIdentity), set through the service or Django's user admin pages."""

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError

from trainhub.iam.models import PosixIdentity
from trainhub.iam.selectors import PosixAccount, posix_account, posix_accounts_by_username
from trainhub.iam.services import posix_identity_set, user_ensure

pytestmark = pytest.mark.django_db


def test_a_user_without_an_identity_is_the_base_plus_their_number_in_a_group_of_their_own(cast):
    uid = settings.TRAINHUB_USER_UID_BASE + cast["uma"].pk
    assert posix_account(user=cast["uma"]) == PosixAccount(uid=uid, gid=uid, group="uma")


def test_an_administrators_identity_replaces_the_default_and_its_group_defaults_to_the_user(cast):
    posix_identity_set(user=cast["uma"], uid=1001)
    posix_identity_set(user=cast["vic"], uid=1002, gid=500, group="physics")
    shown = posix_accounts_by_username(usernames=["uma", "vic", "alice", "nobody"])
    assert shown == {"uma": PosixAccount(uid=1001, gid=1001, group="uma"),
                     "vic": PosixAccount(uid=1002, gid=500, group="physics"),
                     "alice": posix_account(user=cast["alice"])}


@pytest.mark.parametrize("uid, message", [(0, "greater than or equal to 1"), (100000, "Set a uid below 100000")])
def test_root_and_the_defaults_uids_are_refused(cast, uid, message):
    with pytest.raises(ValidationError, match=message):
        posix_identity_set(user=cast["uma"], uid=uid)
    assert not PosixIdentity.objects.exists()


def test_two_users_never_share_a_uid(cast):
    posix_identity_set(user=cast["uma"], uid=1001)
    with pytest.raises(ValidationError, match="Another user has this uid."):
        posix_identity_set(user=cast["vic"], uid=1001)


def test_the_user_admin_lists_and_sets_each_users_ids(client, cast):
    admin = user_ensure(username="root", password="root-password", is_staff=True)
    get_user_model().objects.filter(pk=admin.pk).update(is_superuser=True)
    client.force_login(admin)
    posix_identity_set(user=cast["vic"], uid=1002, gid=500, group="physics")
    listing = client.get("/admin/auth/user/").content.decode()
    uma_uid = settings.TRAINHUB_USER_UID_BASE + cast["uma"].pk
    assert f"{uma_uid} ({uma_uid})" in listing and "1002 (500)" in listing and "physics" in listing
    page = client.get(f"/admin/auth/user/{cast['uma'].pk}/change/")
    form = page.context["adminform"].form
    data = {name: value for name, value in form.initial.items() if value is not None and name != "password"}
    data.update({"date_joined_0": "2026-12-05", "date_joined_1": "00:00:00", "last_login_0": "", "last_login_1": "",
                 "groups": [], "user_permissions": [],
                 "posix_identity-TOTAL_FORMS": "1", "posix_identity-INITIAL_FORMS": "0",
                 "posix_identity-MIN_NUM_FORMS": "0", "posix_identity-MAX_NUM_FORMS": "1",
                 "posix_identity-0-uid": "1003", "posix_identity-0-gid": "1003", "posix_identity-0-group": ""})
    refused = {**data, "posix_identity-0-uid": "1002"}
    assert client.post(f"/admin/auth/user/{cast['uma'].pk}/change/", refused).status_code == 200
    assert not PosixIdentity.objects.filter(user=cast["uma"]).exists()
    assert client.post(f"/admin/auth/user/{cast['uma'].pk}/change/", data).status_code == 302
    assert posix_account(user=cast["uma"]) == PosixAccount(uid=1003, gid=1003, group="uma")
