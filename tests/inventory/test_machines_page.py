"""The machines page: admins create join tokens (shown once) and manage joined machines."""

import re

import pytest
from django.urls import reverse

from tests.agent.harness import join_nodes
from trainhub.iam.services import user_ensure
from trainhub.inventory.models import JoinToken, Node, NodeCredential, NodeState
from trainhub.inventory.services import node_pool_ensure

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def admin_client(client, cast):
    client.force_login(user_ensure(username="root-admin", password="root-admin-password", is_staff=True))
    return client


def test_only_administrators_see_the_machines_page(client, cast):
    client.force_login(cast["alice"])  # a project admin, not a platform admin
    assert client.get(reverse("inventory:machines")).status_code == 403


def test_an_admin_creates_a_join_token_shown_once_with_the_command_to_run(admin_client, nodes):
    response = admin_client.post(reverse("inventory:machines"), {"form": "token", "pool": "a100",
                                                                 "expires_in_hours": 2, "max_uses": 3})
    assert response.status_code == 302  # to the page, which shows the token once: a reload makes no second one
    page = admin_client.get(response["Location"]).content.decode()
    raw = re.search(r"--token (thj_[\w-]+)", page).group(1)
    assert "trainhub-agent run --url http://testserver" in page
    token = JoinToken.objects.get()
    assert (token.pool.name, token.max_uses) == ("a100", 3) and token.digest != raw
    assert raw not in admin_client.get(reverse("inventory:machines")).content.decode()


def test_a_bad_token_form_says_what_is_wrong(admin_client, nodes):
    page = admin_client.post(reverse("inventory:machines"), {"form": "token", "pool": "a100",
                                                             "expires_in_hours": 0}).content.decode()
    assert "Ensure this value is greater than or equal to 1" in page
    assert not JoinToken.objects.exists()


def test_an_admin_drains_revokes_and_removes_a_joined_machine(admin_client, nodes, tmp_path):
    join_nodes(tmp_path, list(Node.objects.filter(name="t4-2")))
    page = admin_client.get(reverse("inventory:machines")).content.decode()
    assert "t4-2" in page and "simulated" in page
    drained = admin_client.post(reverse("inventory:machines"), {"node": "t4-2", "action": "drain"}, follow=True)
    assert drained.redirect_chain == [(reverse("inventory:machines"), 302)]  # a reload repeats nothing
    assert "t4-2 drains: its running job finishes" in drained.content.decode()
    assert Node.objects.get(name="t4-2").state == NodeState.DRAIN
    admin_client.post(reverse("inventory:machines"), {"node": "t4-2", "action": "revoke"})
    assert not NodeCredential.objects.filter(node__name="t4-2", revoked_at__isnull=True).exists()
    admin_client.post(reverse("inventory:machines"), {"node": "t4-2", "action": "remove"})
    assert not Node.objects.filter(name="t4-2").exists()
    assert admin_client.post(reverse("inventory:machines"), {"node": "nope", "action": "remove"}).status_code == 400


def test_a_used_up_token_is_no_longer_listed_in_force(admin_client, nodes, tmp_path):
    admin_client.post(reverse("inventory:machines"), {"form": "token", "pool": "t4", "expires_in_hours": 1,
                                                      "max_uses": 1, "description": "one machine"})
    assert "one machine" in admin_client.get(reverse("inventory:machines")).content.decode()
    JoinToken.objects.update(uses=1)
    assert "one machine" not in admin_client.get(reverse("inventory:machines")).content.decode()


def test_a_machine_of_a_pool_without_gpus_says_no_gpu_not_the_accelerator_enum(admin_client, nodes, tmp_path):
    login_pool = node_pool_ensure(name="login", machine_type="n1-standard-4", node_count=1)
    join_nodes(tmp_path, list(login_pool.nodes.all()))
    row = re.search(r"<th scope=\"row\" class=\"mono\">login-0</th>.*?</tr>",
                    admin_client.get(reverse("inventory:machines")).content.decode(), re.S).group(0)
    assert "no GPU" in row
    assert "ACCELERATOR_TYPE_UNSPECIFIED" not in row and "0 ×" not in row
