"""The sacctmgr console and the accounting admin pages run sacctmgr commands; CSRF and admin rules."""

from django.test import Client

from trainhub.iam.services import posix_identity_set
from trainhub.slurm.models import Account, Association, Qos

BASE = "/slurm/projects/alpha/locations/us-central1/clusters/c1"


def test_the_console_shows_then_commits_a_change(browser, cluster):
    page = browser("alice").post(f"{BASE}/sacctmgr", {"command": "add account ml"})
    assert page.context["result"].needs_confirmation
    assert not Account.objects.filter(name="ml").exists()
    browser("alice").post(f"{BASE}/sacctmgr", {"command": "add account ml", "confirm": "True"})
    assert Account.objects.filter(name="ml").exists()


def test_users_may_only_show_in_the_console(browser, cluster):
    page = browser("uma").post(f"{BASE}/sacctmgr", {"command": "-i add account ml"})
    assert "privilege" in page.context["result"].output
    page = browser("uma").post(f"{BASE}/sacctmgr", {"command": "show qos format=name"})
    assert "normal" in page.context["result"].output


def test_the_accounts_page_adds_and_edits_through_sacctmgr(browser, cluster):
    assert browser("uma").get(f"{BASE}/accounts").status_code == 403
    browser("alice").post(f"{BASE}/accounts", {"add": "account", "account-name": "ml", "account-parent": "root",
                                               "account-fairshare": "40"})
    browser("alice").post(f"{BASE}/accounts", {"add": "user", "user-name": "uma", "user-accounts": "ml",
                                               "user-partition": "a4"})
    assoc = Association.objects.get(user="uma")
    assert assoc.partition == "a4" and Association.objects.get(account__name="ml", user="").shares == 40
    page = browser("alice").get(f"{BASE}/accounts/associations/{assoc.pk}")
    data = {field.name: field.value() or "" for field in page.context["form"]}
    data.update(GrpTRES="gres/gpu=8", MaxWall="1:00:00")
    response = browser("alice").post(f"{BASE}/accounts/associations/{assoc.pk}", data)
    assert response.status_code == 302
    assoc.refresh_from_db()
    assert (assoc.settings["grp_tres"], assoc.settings["max_wall_minutes"]) == ({"gres/gpu": 8}, 60)
    browser("alice").post(f"{BASE}/accounts", {"add": "qos", "qos-name": "high", "qos-priority": "100",
                                               "qos-preempt": "normal"})
    qos_page = browser("alice").get(f"{BASE}/accounts/qos/high")
    data = {field.name: field.value() or "" for field in qos_page.context["form"]}
    data.update(Flags="DenyOnLimit")
    browser("alice").post(f"{BASE}/accounts/qos/high", data)
    assert Qos.objects.get(name="high").settings["flags"] == ["DenyOnLimit"]
    tree = browser("alice").get(f"{BASE}/accounts").content.decode()
    assert "gres/gpu=8" in tree and "DenyOnLimit" in tree


def test_the_accounts_page_shows_each_users_uid_and_group(browser, accounts, cast):
    """uma's ids as an administrator set them; bob, who has no trainhub login, has none."""
    posix_identity_set(user=cast["uma"], uid=1001, gid=500, group="ml")
    rows = {row["user"]: row["posix"] for row in browser("alice").get(f"{BASE}/accounts").context["tree"]}
    assert (rows["uma"].uid, rows["bob"]) == (1001, None)
    page = browser("alice").get(f"{BASE}/accounts").content.decode()
    assert '<td class="num">1001</td><td class="num">500 (ml)</td>' in page


def test_a_bad_value_is_sacctmgrs_error_message(browser, accounts):
    assoc = Association.objects.get(user="uma")
    page = browser("alice").get(f"{BASE}/accounts/associations/{assoc.pk}")
    data = {field.name: field.value() or "" for field in page.context["form"]}
    data.update(MaxWall="soon")
    response = browser("alice").post(f"{BASE}/accounts/associations/{assoc.pk}", data, follow=True)
    assert "Bad MaxWall time format" in response.content.decode()


def test_console_forms_need_csrf(cast, cluster):
    client = Client(enforce_csrf_checks=True)
    client.force_login(cast["alice"])
    assert client.post(f"{BASE}/sacctmgr", {"command": "-i add account ml"}).status_code == 403
