"""gunicorn.conf.py's workers leave a new connection to a worker holding fewer (LeastConnectionsWorker),
and take it themselves when no other worker does."""

import http.client
import os
import selectors
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from gunicorn.config import Config

from bench.environment import GUNICORN_CONFIG, REPO_ROOT, free_port
from bench.submission import _gunicorn_settings
from trainhub.common import gunicorn_worker
from trainhub.common.gunicorn_worker import FALLBACK_ACCEPT_DELAY, ConnectionBoard, LeastConnectionsWorker


class RecordingWorker(LeastConnectionsWorker):
    """The worker's accept logic on a real listening socket, recording connections instead of serving them."""

    def __init__(self, listener: socket.socket) -> None:
        super().__init__(0, os.getpid(), [listener], None, 30, Config(), None)
        self.poller = selectors.DefaultSelector()
        self.served: list = []
        self.set_accept_enabled(True)

    def enqueue_req(self, conn) -> None:
        self.served.append(conn)

    def listening(self) -> bool:
        return any(key.fileobj is self.sockets[0] for key in self.poller.get_map().values())


@pytest.fixture
def board(monkeypatch) -> ConnectionBoard:
    board = ConnectionBoard()
    monkeypatch.setattr(gunicorn_worker, "BOARD", board)
    return board


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    with socket.create_server(("127.0.0.1", 0)) as server:
        yield server


@pytest.fixture
def worker(board, listener) -> Iterator[RecordingWorker]:
    worker = RecordingWorker(listener)
    yield worker
    for conn in worker.served:
        conn.close()
    worker.poller.close()


@pytest.fixture
def client(listener) -> Iterator[socket.socket]:
    with socket.create_connection(listener.getsockname()) as connection:
        yield connection


OTHER_WORKER = 7


def test_a_worker_accepts_at_once_when_no_other_holds_fewer_connections(board, worker, client):
    worker.nr_conns = 2
    board.publish(OTHER_WORKER, 2)
    worker.wait_for_and_dispatch_events(timeout=5)
    assert len(worker.served) == 1 and worker.nr_conns == 3


def test_it_leaves_a_new_connection_to_a_worker_holding_fewer_then_takes_it_if_still_waiting(board, worker, client):
    worker.nr_conns = 1
    board.publish(OTHER_WORKER, 0)
    began = time.monotonic()
    worker.wait_for_and_dispatch_events(timeout=5)
    assert worker.served == [] and not worker.listening()
    while not worker.served:
        worker.wait_for_and_dispatch_events(timeout=5)
    assert time.monotonic() - began >= FALLBACK_ACCEPT_DELAY
    assert worker.nr_conns == 2 and worker.listening()


def test_a_connection_another_worker_took_meanwhile_is_left_alone(board, worker, listener, client):
    worker.nr_conns = 1
    board.publish(OTHER_WORKER, 0)
    worker.wait_for_and_dispatch_events(timeout=5)
    taken, _ = listener.accept()  # as the other worker does
    with taken:
        while not worker.listening():
            worker.wait_for_and_dispatch_events(timeout=5)
    assert worker.served == [] and worker.nr_conns == 1


def test_it_can_stop_accepting_while_it_defers_and_start_again(board, worker, client):
    worker.nr_conns = 1
    board.publish(OTHER_WORKER, 0)
    worker.wait_for_and_dispatch_events(timeout=5)
    worker.set_accept_enabled(False)
    worker.wait_for_and_dispatch_events(timeout=0.05)
    assert worker.served == [] and not worker.listening()
    board.release(OTHER_WORKER)
    worker.set_accept_enabled(True)
    worker.wait_for_and_dispatch_events(timeout=5)
    assert len(worker.served) == 1


def test_a_worker_publishes_its_connections_only_while_it_accepts(board, worker):
    other = RecordingWorker(worker.sockets[0])
    worker.nr_conns, other.nr_conns = 3, 1
    worker.wait_for_and_dispatch_events(timeout=0)
    assert board.another_holds_fewer(other._slot, 2) is False  # the first worker holds more
    assert board.another_holds_fewer(other._slot, 4) is True
    worker.set_accept_enabled(False)
    worker.wait_for_and_dispatch_events(timeout=0)
    assert board.another_holds_fewer(other._slot, 4) is False
    other.poller.close()


class Holder:
    """A running worker, as the board sees one."""

    pid = os.getpid()


def test_the_slots_of_workers_that_exited_are_freed_when_the_next_worker_starts(board):
    holders = [Holder() for _ in range(board.SLOTS)]
    assert [board.claim(holder) for holder in holders] == list(range(board.SLOTS))
    assert board.claim(Holder()) is None
    exited = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],  # noqa: S603
                            capture_output=True, text=True, check=True)
    holders[10].pid = holders[42].pid = int(exited.stdout)
    board.publish(42, 0)  # the last count the killed worker published
    assert board.claim(Holder()) == 10
    assert not board.another_holds_fewer(10, 1)  # slot 42 no longer counts
    assert board.claim(Holder()) == 42


def test_the_config_uses_the_balanced_worker():
    assert _gunicorn_settings()["worker_class"] == "trainhub.common.gunicorn_worker.LeastConnectionsWorker"


@contextmanager
def gunicorn(workers: int) -> Iterator[int]:
    """gunicorn with the project's config serving tests.common.process_id_app; yields its port."""
    port = free_port()
    server = subprocess.Popen(  # noqa: S603 - our own argv
        [sys.executable, "-m", "gunicorn", "tests.common.process_id_app:application", "--config",
         str(GUNICORN_CONFIG), "--workers", str(workers), "--bind", f"127.0.0.1:{port}",
         "--log-level", "warning"],
        cwd=REPO_ROOT, stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while len(workers_answering(port, workers)) < workers:
            assert time.monotonic() < deadline, "gunicorn did not start its workers"
            time.sleep(0.1)
        yield port
    finally:
        server.terminate()
        assert server.wait(timeout=30) == 0


def workers_answering(port: int, workers: int) -> set[str]:
    """The workers that answered a burst of one-request connections (the server closes each)."""
    answered = set()
    for _ in range(4 * workers):
        try:
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            connection.request("GET", "/", headers={"Connection": "close"})
            answered.add(connection.getresponse().read().decode())
            connection.close()
        except OSError:
            return set()
    return answered


def kept_alive_connection(port: int) -> tuple[http.client.HTTPConnection, str]:
    """A connection that has had one answer and stays open; the id of the process that answered."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    connection.request("GET", "/")
    return connection, connection.getresponse().read().decode()


def test_each_kept_alive_client_gets_a_worker_of_its_own_while_one_is_free():
    with gunicorn(workers=3) as port:
        for _ in range(3):  # any two of three connections share a worker 7 times in 9 when the kernel picks
            time.sleep(0.3)  # the previous connections' closes reach their workers
            held = [kept_alive_connection(port) for _ in range(3)]
            assert len({process for _, process in held}) == 3, [process for _, process in held]
            for connection, process in held:  # still kept alive, on the same worker
                connection.request("GET", "/")
                assert connection.getresponse().read().decode() == process
                connection.close()


def test_a_connection_the_less_busy_worker_cannot_take_is_taken_by_another():
    with gunicorn(workers=2) as port:
        time.sleep(0.3)  # the probe connections' closes reach their workers
        first, busy = kept_alive_connection(port)
        idle = (workers_answering(port, 2) - {busy}).pop()
        time.sleep(0.3)
        os.kill(int(idle), signal.SIGSTOP)  # holds no connection, and cannot take one
        try:
            second, answered_by = kept_alive_connection(port)
        finally:
            os.kill(int(idle), signal.SIGCONT)
        assert answered_by == busy
        first.close()
        second.close()


def test_a_busy_worker_still_takes_connections_when_it_is_the_only_one():
    with gunicorn(workers=1) as port:
        held = [kept_alive_connection(port) for _ in range(12)]
        assert len({process for _, process in held}) == 1
        for connection, _ in held:
            connection.close()
