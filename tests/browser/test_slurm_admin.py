"""Every button of the Slurm admin pages pressed once, in a real browser: slurm.conf, a partition,
the prolog and epilog scripts, the accounting forms (add account, user, QOS; edit and delete an
association and a QOS), the sacctmgr console (run, commit) and each report's flag form. Each press
is checked on the page (the message or the output) and in the database."""

import re

import pytest
from django.utils import timezone

from tests.browser.conftest import answering_confirm
from tests.slurm.conftest import accounts, admin, cluster, make_job, run_pass, slurm_pools  # noqa: F401 - fixtures
from trainhub.inventory.models import Node, NodeState
from trainhub.slurm.models import Account, Association, Partition, Qos, SlurmCluster

pytestmark = pytest.mark.django_db(transaction=True)
SLURM = "/slurm/projects/alpha/locations/us-central1/clusters/c1"


def card(page, heading: str):
    return page.locator("section.card", has=page.get_by_role("heading", name=heading))


def test_the_cluster_pages_edit_forms_save_slurm_conf_a_partition_and_the_scripts(page, live_server, login,
                                                                                  accounts):  # noqa: F811
    login("alice")
    page.goto(f"{live_server.url}{SLURM}/")
    with page.expect_download() as download:
        page.get_by_role("link", name="Download slurm.conf").click()
    assert "PriorityWeightFairshare=10000" in open(download.value.path()).read()

    card(page, "slurm.conf keys").get_by_role("link", name="Edit").click()
    text = page.locator("[name=text]")
    text.fill(text.input_value().replace("PriorityWeightAge=1000", "PriorityWeightAge=2000"))
    page.get_by_role("button", name="Save").click()
    page.get_by_text("slurm.conf updated (1 key(s))").wait_for()
    assert re.search(r"PriorityWeightAge\S*: 1000 → 2000", card(page, "Changes").inner_text())
    assert SlurmCluster.objects.get().config["PriorityWeightAge"] == "2000"

    partition = card(page, "Partitions").locator("tbody tr").first
    partition.get_by_role("link", name="Edit").click()
    page.locator("[name=text]").fill("PriorityTier=3")
    page.get_by_role("button", name="Save").click()
    page.get_by_text("Partition a4 updated.").wait_for()
    assert "PriorityTier=3" in partition.inner_text()
    assert Partition.objects.get(name="a4").config == {"PriorityTier": "3"}

    for kind, heading in (("prolog", "Prolog scripts"), ("epilog", "Epilog scripts")):
        card(page, heading).get_by_role("link", name="Edit").click()
        page.locator("[name=script_0]").fill(f"#!/bin/bash\necho {kind} from the browser")
        page.get_by_role("button", name="Save").click()
        page.get_by_text(f"{kind.capitalize()} scripts saved").wait_for()
        assert f"echo {kind} from the browser" in card(page, heading).inner_text()
        scripts = getattr(SlurmCluster.objects.get(), f"{kind}_scripts")
        assert scripts[0] == f"#!/bin/bash\necho {kind} from the browser"


def test_the_accounts_page_adds_edits_and_deletes_accounts_users_and_qos(page, live_server, login,
                                                                         accounts):  # noqa: F811
    login("alice")
    page.goto(f"{live_server.url}{SLURM}/accounts")
    add = page.locator("form[aria-label='Add account']")
    add.locator("[name=account-name]").fill("vision")
    add.locator("[name=account-fairshare]").fill("30")
    add.get_by_role("button", name="sacctmgr -i add account").click()
    page.get_by_text("Adding Account(s)").wait_for()
    assert Association.objects.get(account__name="vision", user="").shares == 30

    add = page.locator("form[aria-label='Add user']")
    add.locator("[name=user-name]").fill("vic")
    add.locator("[name=user-accounts]").fill("vision")
    add.get_by_role("button", name="sacctmgr -i add user").click()
    page.locator("tbody tr", has_text="vic").first.wait_for()
    assert Association.objects.filter(account__name="vision", user="vic").exists()

    add = page.locator("form[aria-label='Add qos']")
    add.locator("[name=qos-name]").fill("urgent")
    add.locator("[name=qos-priority]").fill("500")
    add.get_by_role("button", name="sacctmgr -i add qos").click()
    page.locator("tbody tr", has=page.locator("th:text-is('urgent')")).wait_for()
    assert Qos.objects.get(name="urgent").settings.get("priority") == 500

    page.locator("tbody tr", has_text="vic").get_by_role("link", name="Edit").click()
    page.locator("[name=MaxJobs]").fill("4")
    page.get_by_role("button", name="Save").click()
    page.wait_for_url(f"**{SLURM}/accounts")
    assert Association.objects.get(account__name="vision", user="vic").settings["max_jobs"] == 4
    page.locator("tbody tr", has_text="vic").get_by_role("link", name="Edit").click()
    with answering_confirm(page, "Delete Association"):
        page.get_by_role("button", name="Delete").click()
    page.wait_for_url(f"**{SLURM}/accounts")
    assert page.locator("tbody tr", has_text="vic").count() == 0
    assert not Association.objects.filter(account__name="vision", user="vic").exists()

    page.locator("tbody tr", has=page.locator("th:text-is('urgent')")).get_by_role("link", name="Edit").click()
    page.locator("[name=Priority]").fill("600")
    page.get_by_role("button", name="Save").click()
    page.wait_for_url(f"**{SLURM}/accounts")
    assert Qos.objects.get(name="urgent").settings["priority"] == 600
    page.locator("tbody tr", has=page.locator("th:text-is('urgent')")).get_by_role("link", name="Edit").click()
    with answering_confirm(page, "Delete QOS urgent?"):
        page.get_by_role("button", name="Delete").click()
    page.wait_for_url(f"**{SLURM}/accounts")
    assert page.locator("tbody tr", has=page.locator("th:text-is('urgent')")).count() == 0
    assert not Qos.objects.filter(name="urgent").exists()


def test_the_sacctmgr_console_shows_and_commits_a_change_when_asked(page, live_server, login,
                                                                    accounts):  # noqa: F811
    login("alice")
    page.goto(f"{live_server.url}{SLURM}/sacctmgr")
    page.locator("[name=command]").fill("show account format=account")
    page.get_by_role("button", name="Run", exact=True).click()
    assert "bio" in page.locator("pre.slurm-output").inner_text()
    page.locator("[name=command]").fill("add account nlp Fairshare=5")
    page.get_by_role("button", name="Run", exact=True).click()
    page.get_by_role("button", name="Commit (y)").wait_for()
    assert not Account.objects.filter(name="nlp").exists()  # shown, not yet made
    page.get_by_role("button", name="Commit (y)").click()
    page.get_by_role("button", name="Commit (y)").wait_for(state="detached")
    assert Account.objects.filter(name="nlp").exists()
    page.locator("[name=command]").fill("delete account nlp")
    page.get_by_role("button", name="Run", exact=True).click()
    page.get_by_role("link", name="Discard (N)").click()
    page.wait_for_url(f"**{SLURM}/sacctmgr")
    assert Account.objects.filter(name="nlp").exists()


def test_every_reports_flag_form_runs_its_command_with_the_flags(page, live_server, login,
                                                                 accounts):  # noqa: F811
    make_job(accounts, user="uma", name="mine")
    make_job(accounts, user="alice", name="hers")
    Node.objects.filter(name__startswith="a4").update(state=NodeState.DRAIN, state_reason="maintenance")
    run_pass(accounts, timezone.now())  # sprio shows the priorities a pass computed for waiting jobs
    login("uma")
    for tab, button, flags, shows in (
        ("queue", "Run squeue", {"user": "alice"}, "hers"),
        ("priority", "Run sprio", {"user": "uma"}, "uma"),
        ("fairshare", "Run sshare", {"accounts": "bio"}, "bio"),
        ("accounting", "Run sacct", {"allusers": True}, "JobID"),
        ("nodes", "Run sinfo", {"nodes": True}, "a4-"),
    ):
        page.goto(f"{live_server.url}{SLURM}/{tab}")
        form = page.locator("form.filters")
        for name, value in flags.items():
            if value is True:
                form.locator(f"[name={name}]").check()
            else:
                form.locator(f"[name={name}]").fill(value)
        form.get_by_role("button", name=button).click()
        page.wait_for_url(re.compile(rf"/{tab}\?.*{next(iter(flags))}="))
        output = page.locator("#report-output").inner_text()
        assert shows in output, (tab, output)
        if tab == "queue":
            assert "mine" not in output
