"""The agent API: joining, node identity and its confinement (as Kubernetes tests NodeRestriction),
heart-beats with fencing, conditional assignment polls and idempotent log chunks."""

import datetime as dt
import json

import pytest
from django.test import Client
from django.utils import timezone

from tests.conftest import container_pool, job_body
from trainhub.iam.services import api_token_get_or_create
from trainhub.inventory.models import JoinToken, Node, NodeCredential, NodeState
from trainhub.inventory.services import join_token_create, node_credential_revoke
from trainhub.jobs.models import CustomJob, LogLine
from trainhub.scheduling.services import scheduler_pass

pytestmark = pytest.mark.django_db(transaction=True)
JOBS = "/v1/projects/alpha/locations/us-central1/customJobs"
H100_FACTS = {"hostname": "gpu-7", "address": "10.0.0.7", "cpus": 208, "memoryBytes": 1 << 40,
              "gpus": [{"index": i, "uuid": f"GPU-{i}", "name": "NVIDIA H100 80GB HBM3"} for i in range(8)]}


def post(path, body, credential=""):
    headers = {"HTTP_AUTHORIZATION": f"Bearer {credential}"} if credential else {}
    return Client().post(path, json.dumps(body), content_type="application/json", **headers)


def get(path, credential, etag=""):
    headers = {"HTTP_AUTHORIZATION": f"Bearer {credential}"}
    if etag:
        headers["HTTP_IF_NONE_MATCH"] = etag
    return Client().get(path, **headers)


def token_for(pool, **kwargs):
    kwargs.setdefault("ttl", dt.timedelta(hours=1))
    return join_token_create(pool=pool, created_by="alice", now=timezone.now(), **kwargs)[1]


def join(pool, name, facts=None, **kwargs):
    return post("/agent/v1/join", {"token": token_for(pool, **kwargs), "name": name, "facts": facts or {"simulated": True}})


@pytest.fixture
def joined(nodes):
    """Every node joined (simulated): name -> its credential."""
    return {node.name: join(node.pool, node.name).json()["credential"] for node in Node.objects.select_related("pool")}


def test_a_machine_joins_with_a_token_and_gets_a_credential_stored_only_as_a_digest(nodes):
    answer = join(nodes["h100"], "gpu-7", H100_FACTS)
    assert answer.status_code == 200, answer.content
    credential = answer.json()["credential"]
    node = Node.objects.get(name="gpu-7")
    assert (node.pool.name, node.address, node.facts["cpus"], len(node.facts["gpus"])) == ("h100", "10.0.0.7", 208, 8)
    assert credential.startswith("thn_")
    assert not NodeCredential.objects.filter(digest=credential).exists()
    assert NodeCredential.objects.get(node=node).digest != credential


def test_a_machines_arch_os_and_boot_time_are_kept_for_scontrol_show_node(nodes):
    facts = {**H100_FACTS, "arch": "aarch64", "os": "Linux 6.8.0-45-generic #45-Ubuntu SMP", "bootTime": 1764900000}
    assert join(nodes["h100"], "gpu-7", facts).status_code == 200
    kept = Node.objects.get(name="gpu-7").facts
    assert (kept["arch"], kept["os"], kept["bootTime"]) == ("aarch64", "Linux 6.8.0-45-generic #45-Ubuntu SMP", 1764900000)


def test_machine_facts_scontrol_show_node_cannot_print_are_not_kept(nodes):
    """A boot time past any date (fromtimestamp would raise in every scontrol show node, a 500) or
    not a number, an OS over several lines (a forged field in scontrol's text) are dropped."""
    facts = {**H100_FACTS, "arch": ["x"], "os": "Linux\n   State=IDLE", "bootTime": 10 ** 20}
    assert join(nodes["h100"], "gpu-7", facts).status_code == 200
    kept = Node.objects.get(name="gpu-7").facts
    assert not {"arch", "os", "bootTime"} & kept.keys()
    for index, boot_time in enumerate((True, 1.5, -1)):
        assert join(nodes["h100"], f"gpu-{index}", {**H100_FACTS, "bootTime": boot_time}).status_code == 200
        assert "bootTime" not in Node.objects.get(name=f"gpu-{index}").facts


def test_a_machine_without_its_pools_gpus_is_refused_with_what_it_has(nodes):
    facts = {**H100_FACTS, "gpus": H100_FACTS["gpus"][:1] + [{"index": 1, "uuid": "x", "name": "Tesla T4"}]}
    answer = join(nodes["h100"], "gpu-8", facts)
    assert answer.status_code == 400
    message = answer.json()["error"]["message"]
    assert "needs 8 x NVIDIA_H100_80GB" in message and "has 1 of them" in message and "Tesla T4" in message
    assert not Node.objects.filter(name="gpu-8").exists()


def test_a_join_token_is_refused_when_expired_used_up_or_unknown(nodes):
    pool = nodes["a100"]
    expired = token_for(pool)
    JoinToken.objects.update(expires_at=timezone.now() - dt.timedelta(seconds=1))
    once = token_for(pool, max_uses=1)
    assert post("/agent/v1/join", {"token": once, "name": "a100-0", "facts": {"simulated": True}}).status_code == 200
    for token in (expired, once, "thj_made-up"):
        answer = post("/agent/v1/join", {"token": token, "name": "a100-1", "facts": {"simulated": True}})
        assert answer.status_code == 401, token
        assert "unknown, expired, used up or revoked" in answer.json()["error"]["message"]


def test_a_joined_node_cannot_be_claimed_again_until_its_credential_is_revoked(nodes):
    assert join(nodes["a100"], "a100-0").status_code == 200
    again = join(nodes["a100"], "a100-0")
    assert again.status_code == 409 and "already joined" in again.json()["error"]["message"]
    other_pool = join(nodes["t4"], "a100-1")
    assert other_pool.status_code == 409 and "belongs to pool a100" in other_pool.json()["error"]["message"]
    node_credential_revoke(node=Node.objects.get(name="a100-0"), now=timezone.now())
    assert join(nodes["a100"], "a100-0").status_code == 200
    assert Node.objects.get(name="a100-0").state == NodeState.UP


def test_a_join_asked_again_with_the_agents_own_credential_answers_as_the_first_did(nodes):
    """The answer to a committed join can be lost; the retry must not lock the machine out."""
    once = token_for(nodes["a100"], max_uses=1)
    chosen = "thn_" + "k" * 43
    body = {"token": once, "name": "a100-0", "facts": {"simulated": True}, "credential": chosen}
    first, retry = post("/agent/v1/join", body), post("/agent/v1/join", body)
    assert (first.status_code, retry.status_code) == (200, 200), retry.content
    assert first.json() == retry.json() and retry.json()["credential"] == chosen
    assert JoinToken.objects.get().uses == 1 and NodeCredential.objects.count() == 1
    assert post("/agent/v1/heartbeat", {"running": []}, chosen).status_code == 200
    someone_else = post("/agent/v1/join", {**body, "credential": "thn_" + "z" * 43})
    assert someone_else.status_code == 401
    other_pool = post("/agent/v1/join", {**body, "token": token_for(nodes["t4"])})
    assert other_pool.status_code == 409


@pytest.mark.parametrize("credential", ["thn_short", "thj_" + "k" * 43, "thn_" + "k" * 42 + "/", 7])
def test_a_weak_or_malformed_chosen_credential_is_refused_naming_the_field(nodes, credential):
    body = {"token": token_for(nodes["a100"]), "name": "a100-0", "facts": {"simulated": True}, "credential": credential}
    answer = post("/agent/v1/join", body)
    assert answer.status_code == 400 and "credential" in answer.content.decode()
    assert not NodeCredential.objects.exists()


def test_a_chosen_credential_already_in_use_is_refused(nodes):
    chosen = "thn_" + "k" * 43
    assert post("/agent/v1/join", {"token": token_for(nodes["a100"]), "name": "a100-0", "facts": {"simulated": True},
                                   "credential": chosen}).status_code == 200
    again = post("/agent/v1/join", {"token": token_for(nodes["a100"]), "name": "a100-1", "facts": {"simulated": True},
                                    "credential": chosen})
    assert again.status_code == 409 and "already in use" in again.json()["error"]["message"]


def test_a_node_credential_reads_and_writes_only_its_own_node(api, joined, now):
    body = job_body(container_pool(machine_type="a2-highgpu-1g", command=["sleep", "60"]))
    assert api("uma").post(JOBS, body, format="json").status_code == 200
    scheduler_pass(now=now)
    replica = CustomJob.objects.get().replicas.get()
    owner, stranger = joined[replica.node.name], joined["t4-0"]
    assignments = get("/agent/v1/assignments", stranger).json()
    assert assignments["replicas"] == [] and assignments["node"] == "t4-0"
    assert [r["id"] for r in get("/agent/v1/assignments", owner).json()["replicas"]] == [replica.pk]
    for path, body in ((f"/agent/v1/replicas/{replica.pk}/started", {}),
                       (f"/agent/v1/replicas/{replica.pk}/logs", {"first": 0, "lines": [["stdout", 1.0, "forged"]]}),
                       (f"/agent/v1/replicas/{replica.pk}/exited", {"exitCode": 0})):
        assert post(path, body, stranger).status_code == 404, path
        assert post(path, body, "thn_forged").status_code == 401, path
    replica.refresh_from_db()
    assert (replica.state, LogLine.objects.count()) == ("ASSIGNED", 0)
    assert post(f"/agent/v1/replicas/{replica.pk}/started", {}, owner).status_code == 200


def test_user_tokens_and_node_credentials_do_not_cross(api, joined, cast):
    user_token = api_token_get_or_create(user=cast["alice"]).key
    for path in ("/agent/v1/heartbeat", "/agent/v1/replicas/1/exited"):
        assert post(path, {}, user_token).status_code == 401
    assert get("/agent/v1/assignments", user_token).status_code == 401
    assert post("/agent/v1/heartbeat", {}).status_code in (401, 403)
    node_credential = joined["a100-0"]
    assert Client().get(JOBS, HTTP_AUTHORIZATION=f"Bearer {node_credential}").status_code == 401
    assert Client().get("/v1/me", HTTP_AUTHORIZATION=f"Bearer {node_credential}").status_code == 401


def test_a_revoked_credential_stops_working_at_once(joined):
    node = Node.objects.get(name="a100-0")
    node_credential_revoke(node=node, now=timezone.now())
    assert post("/agent/v1/heartbeat", {"running": []}, joined["a100-0"]).status_code == 401
    node.refresh_from_db()
    assert node.state == NodeState.DOWN and node.state_reason.startswith("agent credential revoked")


def test_an_unchanged_assignment_answers_304_until_a_placement_wakes_the_node(api, joined, now):
    credential = joined["a100-0"]
    first = get("/agent/v1/assignments", credential)
    assert first.status_code == 200 and first.headers["ETag"]
    assert get("/agent/v1/assignments", credential, first.headers["ETag"]).status_code == 304
    body = job_body(*(container_pool(machine_type="a2-highgpu-1g", command=["true"]) for _ in range(2)))
    assert api("uma").post(JOBS, body, format="json").status_code == 200
    scheduler_pass(now=now)
    changed = get("/agent/v1/assignments", credential, first.headers["ETag"])
    assert changed.status_code == 200 and len(changed.json()["replicas"]) == 1
    peers = changed.json()["replicas"][0]["context"]["hosts"]
    assert sorted(peers) == ["0", "1"]  # both gang members, at the addresses their agents reported


def test_an_exit_report_answers_with_the_nodes_assignments_so_the_agent_need_not_fetch_them(api, joined, now):
    body = job_body(container_pool(machine_type="a2-highgpu-1g", command=["sleep", "60"]))
    assert api("uma").post(JOBS, body, format="json").status_code == 200
    scheduler_pass(now=now)
    replica = CustomJob.objects.get().replicas.get()
    credential = joined[replica.node.name]
    assert post(f"/agent/v1/replicas/{replica.pk}/started", {}, credential).status_code == 200
    exited = post(f"/agent/v1/replicas/{replica.pk}/exited", {"exitCode": 0}, credential)
    assert exited.status_code == 200
    assert exited.json()["replicas"] == [] and exited.json()["node"] == replica.node.name
    assert get("/agent/v1/assignments", credential, exited.headers["ETag"]).status_code == 304
    resent = post(f"/agent/v1/replicas/{replica.pk}/exited", {"exitCode": 0}, credential)  # after a lost answer
    assert resent.status_code == 200 and resent.json()["replicas"] == []


def test_a_resent_log_chunk_is_stored_once_and_a_gap_asks_for_the_missing_lines(api, joined, now):
    body = job_body(container_pool(machine_type="a2-highgpu-1g", command=["true"]))
    api("uma").post(JOBS, body, format="json")
    scheduler_pass(now=now)
    replica = CustomJob.objects.get().replicas.get()
    credential, path = joined[replica.node.name], f"/agent/v1/replicas/{replica.pk}/logs"
    chunk = {"first": 0, "lines": [["stdout", 1.0, "one"], ["stdout", 1.1, "two"]]}
    assert post(path, chunk, credential).json() == {"next": 2}
    assert post(path, chunk, credential).json() == {"next": 2}  # the answer was lost; the agent resent
    assert post(path, {"first": 1, "lines": [["stdout", 1.1, "two"], ["stderr", 1.2, "three"]]}, credential).json() == {"next": 3}
    gap = post(path, {"first": 7, "lines": [["stdout", 2.0, "eight"]]}, credential)
    assert gap.status_code == 409 and gap.json()["expected"] == 3
    assert list(LogLine.objects.order_by("id").values_list("text", flat=True)) == ["one", "two", "three"]


def test_bad_reports_answer_400_naming_the_field(joined):
    credential = joined["a100-0"]
    for body, field in (({"running": ["x"]}, "running"), ({"running": [], "time": "soon"}, "time"),
                        ({"facts": []}, "facts")):
        answer = post("/agent/v1/heartbeat", body, credential)
        assert answer.status_code == 400
        assert answer.json()["error"]["details"][0]["fieldViolations"][0]["field"] == field


def test_a_node_whose_agent_reports_a_replica_it_no_longer_has_goes_down_until_clean(joined):
    credential = joined["a100-0"]
    down = post("/agent/v1/heartbeat", {"running": [424242]}, credential).json()
    assert down["state"] == "DOWN" and down["stateReason"].startswith("stale replicas still running")
    assert post("/agent/v1/heartbeat", {"running": []}, credential).json()["state"] == "UP"


def test_an_exit_report_of_a_one_replica_job_stops_no_other_replicas_it_does_not_have(
        api, joined, now, django_assert_max_num_queries, monkeypatch):
    monkeypatch.setattr("trainhub.scheduling.pass_requests.enqueue", lambda *args: None)  # the passes it asks for
    for measured in (False, True):  # the first exit also creates the project's cost ledger
        body = job_body(container_pool(machine_type="a2-highgpu-1g", command=["sleep", "60"]))
        assert api("uma").post(JOBS, body, format="json").status_code == 200
        scheduler_pass(now=now)
        job = CustomJob.objects.latest("pk")
        replica = job.replicas.get()
        credential = joined[replica.node.name]
        assert post(f"/agent/v1/replicas/{replica.pk}/started", {}, credential).status_code == 200
        # Credential, replica; in one transaction: job and replica locked, replica and event written,
        # other active replicas looked for, job and event written, cost ledger read and written; the
        # assignments. No statements to stop other replicas when there are none.
        with django_assert_max_num_queries(14 if measured else 20):
            assert post(f"/agent/v1/replicas/{replica.pk}/exited", {"exitCode": 0}, credential).status_code == 200
        job.refresh_from_db()
        assert job.state == "JOB_STATE_SUCCEEDED"
