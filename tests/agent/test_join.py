"""Joining from the agent's side: the answer to a committed join can be lost (a network error, a
crash, a 5xx after the commit); asking again must let the machine in, not lock it out."""

import datetime as dt

import pytest
from django.utils import timezone

import trainhub.agent.main as agent_main
from tests.agent.harness import InProcessControlPlane
from trainhub.agent.client import ControlPlaneUnreachable
from trainhub.inventory.models import JoinToken, Node, NodeCredential, NodePool
from trainhub.inventory.services import join_token_create


class AnswerLostOnce(InProcessControlPlane):
    """The request reaches the control plane and commits; its answer never comes back, once."""

    lost = 0

    def call(self, method, path, body=None, *, etag=""):
        answer = super().call(method, path, body, etag=etag)
        if AnswerLostOnce.lost == 0:
            AnswerLostOnce.lost += 1
            raise ControlPlaneUnreachable("connection reset by peer")
        return answer


@pytest.mark.django_db(transaction=True)
def test_a_join_whose_answer_was_lost_succeeds_when_asked_again_with_a_single_use_token(tmp_path, monkeypatch):
    pool = NodePool.objects.create(name="live", machine_type="n1-standard-4")
    _, token = join_token_create(pool=pool, created_by="test", now=timezone.now(), ttl=dt.timedelta(hours=1),
                                 max_uses=1)
    monkeypatch.setattr(agent_main, "ControlPlane", lambda url, verify=True: AnswerLostOnce())
    arguments = dict(url="http://testserver", token=token, name="gpu-1", state_dir=tmp_path, simulate=True)
    with pytest.raises(agent_main.AgentError, match="cannot reach the control plane"):
        agent_main.join(**arguments)
    assert Node.objects.get(name="gpu-1").joined_at is not None and JoinToken.objects.get().uses == 1
    identity = agent_main.join(**arguments)
    assert identity["node"] == "gpu-1" and identity["credential"].startswith("thn_")
    assert NodeCredential.objects.filter(node__name="gpu-1", revoked_at__isnull=True).count() == 1
    assert InProcessControlPlane(identity["credential"]).post("/agent/v1/heartbeat", {"running": []}).status == 200
    assert [path.name for path in (tmp_path / "nodes").iterdir()] == ["gpu-1.json"]
    assert oct((tmp_path / "nodes" / "gpu-1.json").stat().st_mode & 0o777) == "0o600"
