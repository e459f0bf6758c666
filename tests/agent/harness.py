"""Node agents in tests: real trainhub-agent code talking to the real agent API, in process.

``InProcessControlPlane`` sends each agent call through Django's test client (URL routing,
middleware, authentication and views as in production, without a socket), so tests step agents
with ``tick(now)`` inside the test's database. tests/agent/test_live_agent.py runs them over real
HTTP against a live server instead.
"""

from __future__ import annotations

import datetime as dt
import json
import time
from pathlib import Path

from django.test import Client
from requests.utils import parse_header_links
from django.utils import timezone

from trainhub.agent.client import Answer, ControlPlane
from trainhub.agent.main import join
from trainhub.agent.node import NodeAgent, NodeSettings
from trainhub.agent.replicas import ReplicaRun
from trainhub.inventory.models import Node, NodePool
from trainhub.inventory.services import join_token_create


class InProcessControlPlane(ControlPlane):
    def __init__(self, credential: str = ""):
        super().__init__("http://testserver", credential, retries=0)
        self.client = Client()

    def call(self, method: str, path: str, body=None, *, etag: str = "") -> Answer:
        headers = {}
        if self.credential:
            headers["HTTP_AUTHORIZATION"] = f"Bearer {self.credential}"
        if etag:
            headers["HTTP_IF_NONE_MATCH"] = etag
        if method == "GET":
            response = self.client.get(path, **headers)
        else:
            response = self.client.post(path, json.dumps(body or {}), content_type="application/json", **headers)
        payload = json.loads(response.content) if response.content else {}
        links = {link["rel"]: link["url"] for link in parse_header_links(response.headers.get("Link", ""))}
        return Answer(response.status_code, payload, response.headers.get("ETag", ""), links)


#: Every group a test made: its replicas are killed when the test ends (they outlive agents).
_GROUPS: list["AgentGroup"] = []


class AgentGroup:
    """The agents of many nodes on one host, ticked together (as one `trainhub-agent run`)."""

    def __init__(self, agents: list[NodeAgent]):
        self.agents = agents
        _GROUPS.append(self)

    def kill_replicas(self) -> None:
        """Every replica, Slurm batch script and step task the group's agents started."""
        for agent in self.agents:
            for directory in agent.replica_dir.iterdir():
                if directory.name.isdigit():
                    ReplicaRun(directory).kill(time.time())
            for directory in [*agent.slurm.task_dir.glob("*/*"), *agent.slurm.batch_dir.glob("*")]:
                ReplicaRun(directory).kill(time.time())
            agent.shutdown()


    def tick(self, *, now: dt.datetime) -> None:
        for agent in self.agents:
            agent.tick(now=now)



def kill_every_replica() -> None:
    """What the test's agents started and left running (a test that killed its agent on purpose)."""
    while _GROUPS:
        _GROUPS.pop().kill_replicas()


def join_nodes(state_dir: Path, nodes: list[Node] | None = None, *, simulate: bool = True,
               addresses: dict[str, str] | None = None) -> list[dict]:
    """Join ``nodes`` (default: every node) through the agent API, each at its address in
    ``addresses`` (default 127.0.0.1); returns their identities."""
    identities = []
    now = timezone.now()
    tokens: dict[int, str] = {}
    for node in nodes if nodes is not None else Node.objects.select_related("pool").order_by("name"):
        if node.pool_id not in tokens:
            _, tokens[node.pool_id] = join_token_create(pool=NodePool.objects.get(pk=node.pool_id), created_by="test",
                                                        now=now, ttl=dt.timedelta(hours=1))
        address = (addresses or {}).get(node.name, "127.0.0.1")
        identities.append(_join(state_dir, tokens[node.pool_id], node.name, simulate, address))
    return identities


def _join(state_dir: Path, token: str, name: str, simulate: bool, address: str) -> dict:
    import trainhub.agent.main as agent_main

    real = agent_main.ControlPlane
    agent_main.ControlPlane = lambda url, verify=True: InProcessControlPlane()
    try:
        return join(url="http://testserver", token=token, name=name, state_dir=state_dir, simulate=simulate,
                    address=address)
    finally:
        agent_main.ControlPlane = real


def agent_for_identity(identity: dict, state_dir: Path, work_dir: Path, grace: float = 1.0, **settings) -> NodeAgent:
    return NodeAgent(name=identity["node"], control_plane=InProcessControlPlane(identity["credential"]),
                     settings=NodeSettings(work_dir=work_dir, state_dir=state_dir, grace_seconds=grace,
                                           facts={"simulated": identity["simulate"], "address": identity["address"]},
                                           **settings))


def agents_on(tmp_path: Path, nodes: list[Node] | None = None, grace: float = 1.0,
              addresses: dict[str, str] | None = None, **settings) -> AgentGroup:
    """Join nodes and return one agent per node, state under tmp_path/agent, work dirs under tmp_path."""
    state_dir = tmp_path / "agent"
    identities = join_nodes(state_dir, nodes, addresses=addresses)
    return AgentGroup([agent_for_identity(identity, state_dir, tmp_path, grace, **settings)
                       for identity in identities])
