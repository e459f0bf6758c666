"""`trainhub nodes ...` against a live server: an administrator makes a join token, a machine
joins with it over HTTP, shows up in `nodes list`, and `nodes revoke` cuts it off."""

import re

import pytest

from trainhub.agent.main import join
from trainhub.cli.main import main
from trainhub.iam.services import user_ensure
from trainhub.inventory.models import NodeCredential

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def cli(live_server, cast, tmp_path, capsys):
    user_ensure(username="ops", password="ops-password-1", is_staff=True)

    def run(*argv, user="ops"):
        environ = {"TRAINHUB_CONFIG": str(tmp_path / f"{user}.json"), "TRAINHUB_PROJECT": "alpha"}
        if not (tmp_path / f"{user}.json").exists():
            assert main(["auth", "login", "--url", live_server.url, "--username", user, "--password",
                         f"{user}-password" if user != "ops" else "ops-password-1"], environ=environ) == 0
            capsys.readouterr()
        code = main(list(argv), environ=environ)
        captured = capsys.readouterr()
        return code, captured.out, captured.err

    return run


def test_an_admin_adds_a_machine_lists_it_and_revokes_it(cli, live_server, nodes, tmp_path):
    code, out, err = cli("nodes", "join-token", "--pool", "t4", "--max-uses", "1")
    assert code == 0, err
    token = re.search(r"--token (thj_[\w-]+)", out).group(1)
    assert f"trainhub-agent run --url {live_server.url} --token" in out
    join(url=live_server.url, token=token, name="t4-0", state_dir=tmp_path / "agent", simulate=True)
    code, out, err = cli("nodes", "list")
    assert code == 0, err
    assert re.search(r"t4-0\s+t4\s+UP\s+\S+\s+simulated", out), out
    code, out, err = cli("nodes", "revoke", "t4-0")
    assert code == 0 and "revoked" in out
    assert not NodeCredential.objects.filter(node__name="t4-0", revoked_at__isnull=True).exists()


def test_a_project_member_cannot_make_join_tokens(cli, nodes):
    code, _, err = cli("nodes", "join-token", "--pool", "t4", user="uma")
    assert code == 1 and "for platform administrators" in err
    code, _, err = cli("nodes", "join-token", "--pool", "nope")
    assert code == 1 and "does not exist" in err
