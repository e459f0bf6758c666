"""Every button of the account and machine pages pressed once, in a real browser: the API token
page (create, copy, rotate), log out, the nodes page filter, and the machines page (create and
revoke a join token; drain, return to service, revoke the credential of and remove a machine).
Each press is checked on the page and in the database."""

import pytest

from tests.agent.harness import join_nodes
from tests.browser.conftest import answering_confirm, sign_in
from trainhub.iam.models import ApiToken
from trainhub.iam.tokens import token_digest
from trainhub.inventory.models import JoinToken, Node, NodeCredential, NodeState

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_token_page_creates_copies_and_rotates_the_token_and_log_out_ends_the_session(
        chromium, live_server, cast):
    context = chromium.new_context(viewport={"width": 1400, "height": 900})
    context.grant_permissions(["clipboard-read", "clipboard-write"], origin=live_server.url)
    page = context.new_page()
    sign_in(page, live_server.url, "uma")
    page.get_by_role("link", name="API token").click()
    page.get_by_role("button", name="Create token").click()
    page.get_by_text("Your API token was created.").wait_for()
    first = page.locator("#api-token").input_value()
    assert ApiToken.objects.get(user=cast["uma"]).digest == token_digest(first)

    copy = page.locator("button[data-copy='#api-token']")
    copy.click()
    page.get_by_role("button", name="Copied").wait_for()
    assert page.evaluate("navigator.clipboard.readText()") == first
    page.locator("button[data-copy='#cli-example']").click()
    assert page.evaluate("navigator.clipboard.readText()") == (
        f"trainhub auth login --url {live_server.url} --token {first}")
    page.locator("button[data-copy='#curl-example']").click()
    assert page.evaluate("navigator.clipboard.readText()").startswith(f'curl -H "Authorization: Bearer {first}"')

    page.get_by_role("button", name="Rotate token").click()
    page.get_by_text("Your API token was rotated").wait_for()
    second = page.locator("#api-token").input_value()
    assert second != first and ApiToken.objects.get(user=cast["uma"]).digest == token_digest(second)

    page.get_by_role("button", name="Log out").click()
    page.wait_for_load_state()
    assert page.goto(f"{live_server.url}/").url.startswith(f"{live_server.url}/login/")
    context.close()


def test_the_nodes_page_filter_shows_only_the_chosen_pool(page, live_server, login, cast, nodes):
    login("vic")
    page.goto(f"{live_server.url}/nodes/")
    page.select_option("[name=pool]", "t4")
    page.get_by_role("button", name="Apply").click()
    page.wait_for_url("**/nodes/?*pool=t4*")
    names = page.locator("#node-rows th").all_inner_texts()
    assert sorted(names) == ["t4-0", "t4-1", "t4-2"]


def test_every_button_on_the_machines_page_does_what_it_says(page, live_server, login, cast, nodes, tmp_path):
    from trainhub.iam.services import user_ensure

    user_ensure(username="root-admin", password="root-admin-password", is_staff=True)
    join_nodes(tmp_path, list(Node.objects.filter(name="t4-2")))
    login("root-admin")
    page.goto(f"{live_server.url}/nodes/machines")
    page.select_option("[name=pool]", "a100")
    page.fill("[name=max_uses]", "2")
    page.fill("[name=description]", "rack 7")
    page.get_by_role("button", name="Create join token").click()
    command = page.locator("#join-command").inner_text()
    assert command.startswith(f"trainhub-agent run --url {live_server.url} --token thj_")
    token = JoinToken.objects.get(description="rack 7")
    assert token.digest == token_digest(command.rsplit(" ", 1)[1]) and token.max_uses == 2
    page.reload()  # shown once; reloading makes no second token
    assert page.locator("#join-command").count() == 0 and JoinToken.objects.filter(description="rack 7").count() == 1

    tokens = page.locator("section[aria-labelledby=tokens]")
    with answering_confirm(page, "Revoke the join token for pool a100?"):
        tokens.locator("tr", has_text="rack 7").get_by_role("button", name="Revoke").click()
    page.get_by_text("Join token for pool a100 revoked.").wait_for()
    assert tokens.locator("tr", has_text="rack 7").count() == 0
    token.refresh_from_db()
    assert token.revoked_at is not None

    machine = page.locator("section[aria-labelledby=joined] tr", has_text="t4-2")
    for button, says, state in (("Drain", "t4-2 drains", NodeState.DRAIN),
                                ("Return to service", "t4-2 is back in service.", NodeState.UP),
                                ("Revoke credential", "t4-2's credential is revoked", NodeState.DOWN)):
        if button == "Revoke credential":
            page.once("dialog", lambda dialog: dialog.accept())
        machine.get_by_role("button", name=button).click()
        page.get_by_text(says).wait_for()
        assert Node.objects.get(name="t4-2").state == state, button
    assert machine.get_by_role("button", name="Revoke credential").count() == 0
    assert not NodeCredential.objects.filter(node__name="t4-2", revoked_at__isnull=True).exists()
    with answering_confirm(page, "Remove node t4-2 from trainhub?"):
        machine.get_by_role("button", name="Remove").click()
    page.get_by_text("t4-2 removed.").wait_for()
    assert machine.count() == 0 and not Node.objects.filter(name="t4-2").exists()
