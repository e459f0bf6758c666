"""The REST-submission benchmark's client reads kept-alive HTTP/1.1 responses however they arrive."""

import socket
import threading

import pytest

from bench import submission
from bench.submission import _client, _read_response, _request_bytes


def responses(*bodies: bytes, status: str = "200 OK") -> bytes:
    return b"".join(f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
                    .encode() + body for body in bodies)


def test_it_reads_responses_split_anywhere_and_several_in_one_chunk():
    server, client = socket.socketpair()
    with server, client:
        wire = responses(b'{"a": 1}', b'{"b": 22}') + responses(b"{}", status="429 Too Many Requests")
        server.sendall(wire[:7])
        pending = bytearray()
        server.sendall(wire[7:])
        assert [_read_response(client, pending) for _ in range(3)] == [200, 200, 429]
        assert pending == bytearray()


def test_a_closed_connection_is_an_error_not_a_hang():
    server, client = socket.socketpair()
    with client:
        server.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n{}")
        server.close()
        with pytest.raises(RuntimeError, match="closed"):
            _read_response(client, bytearray())


def test_requests_carry_the_token_and_the_body_length():
    request = _request_bytes("/v1/x", "tok", b'{"a": "\xc3\xa9"}')
    head, body = request.split(b"\r\n\r\n")
    assert head.startswith(b"POST /v1/x HTTP/1.1\r\n")
    assert b"Authorization: Bearer tok" in head and b"Content-Length: 11" in head and body == b'{"a": "\xc3\xa9"}'



def test_a_client_warms_up_on_the_connection_it_times_and_times_only_its_share(monkeypatch):
    # gunicorn keeps a connection with the worker that accepted it: a warm-up on another connection
    # could warm the other worker and leave a cold one's first requests in the timed run.
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.05)
    requests_per_connection, done = [], threading.Event()

    def serve():
        while not done.is_set():
            try:
                connection, _ = listener.accept()
            except TimeoutError:
                continue
            with connection:
                served, pending = 0, b""
                while chunk := connection.recv(65536):
                    pending += chunk
                    while b"\r\n\r\n" in pending:
                        _, pending = pending.split(b"\r\n\r\n", 1)
                        served += 1
                        connection.sendall(responses(b"{}"))
                requests_per_connection.append(served)

    server = threading.Thread(target=serve, daemon=True)
    server.start()
    monkeypatch.setattr(submission, "_start_line", threading.Barrier(1))
    get = b"GET /x HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    latencies, statuses, _ = _client(listener.getsockname()[1], [get] * 3, 2)
    done.set()
    server.join(timeout=5)
    listener.close()
    assert requests_per_connection == [5] and len(latencies) == 3 and statuses == {200: 3}
