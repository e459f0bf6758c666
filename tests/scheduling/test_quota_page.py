import pytest

from trainhub.scheduling.models import Quota

METRIC = "custom_model_training_nvidia_a100_gpus"


def test_users_see_usage_against_limits_of_their_projects_only(client, cast):
    Quota.objects.create(project=cast["alpha"], location="us-central1", metric=METRIC, limit=8)
    Quota.objects.create(project=cast["beta"], location="us-central1", metric="custom_model_training_nvidia_l4_gpus",
                         limit=3)
    client.force_login(cast["vic"])
    response = client.get("/quotas/")
    assert response.status_code == 200
    assert METRIC.encode() in response.content
    assert b"nvidia_l4" not in response.content
    assert b"Set a limit" not in response.content


def test_it_refuses_limit_changes_from_non_admins(client, cast):
    client.force_login(cast["alice"])  # a project admin is not a platform admin
    response = client.post("/quotas/", {"project": "alpha", "location": "us-central1", "metric": METRIC, "limit": 99})
    assert response.status_code == 403
    assert not Quota.objects.exists()


def test_a_platform_admin_sets_and_removes_a_limit(client, cast):
    cast["alice"].is_staff = True
    cast["alice"].save()
    client.force_login(cast["alice"])
    response = client.post("/quotas/", {"project": "alpha", "location": "us-central1", "metric": METRIC, "limit": 4})
    assert response.status_code == 302
    assert Quota.objects.get().limit == 4
    assert Quota.objects.get().updated_by == "alice"
    client.post("/quotas/", {"project": "alpha", "location": "us-central1", "metric": METRIC, "limit": ""})
    assert not Quota.objects.exists()


def test_a_bad_limit_is_shown_not_a_500(client, cast):
    cast["alice"].is_staff = True
    cast["alice"].save()
    client.force_login(cast["alice"])
    response = client.post("/quotas/", {"project": "alpha", "location": "us-central1", "metric": "bogus", "limit": -1})
    assert response.status_code == 200
    assert not Quota.objects.exists()


@pytest.mark.parametrize("limit", [2**31, 10**30])
def test_a_limit_beyond_the_column_is_shown_not_a_500(client, cast, limit):
    cast["alice"].is_staff = True
    cast["alice"].save()
    client.force_login(cast["alice"])
    response = client.post("/quotas/", {"project": "alpha", "location": "us-central1", "metric": METRIC, "limit": limit})
    assert response.status_code == 200
    assert "Ensure this value is less than or equal to 2147483647." in response.content.decode()
    assert not Quota.objects.exists()


def test_it_requires_login(client, db):
    assert client.get("/quotas/").status_code == 302
