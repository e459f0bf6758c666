"""The long poll of the agent API: ``GET /agent/v1/assignments?wait=S`` held until the node's work changes.

An agent sends the ETag of the assignments it holds. While the node's wake-up counter still has
that value the request waits, up to ``wait`` seconds (at most MAX_WAIT_SECONDS), and answers the
moment a placement, stop or Slurm change for the node is committed (``wake.nodes_wake`` publishes
it): the new assignments with their ETag, or 304 when the wait ran out with nothing new. So an
idle fleet costs one request per agent per wait, and a placement reaches its agent at once.

Holding a thousand waiting requests needs an event loop, not a thousand threads: this is an ASGI
application (served by uvicorn as its own process, ``trainhub.longpoll_asgi``), as GitLab
Workhorse holds runners' ``jobs/request`` in Go beside the Rails workers. One Redis subscription
per process (``WakeListener``) wakes the waiting requests, as Workhorse's key watcher does. A
waiting request holds no database connection: the credential lookup (the agent API's own compiled
statement, ``node_by_credential``) and the assignments read run on TRAINHUB_LONG_POLL_DB_THREADS
threads, each with its one persistent connection, however many agents wait.

A held long poll is the node's contact (``trainhub.inventory.contact``): every 5 s (``record_period``) the
process records, in one Redis command, the nodes that asked meanwhile and those still waiting; an
agent that hangs up stops counting at once. The heartbeat sweep writes them to the database, so an
agent heart-beats through gunicorn only when it has something to report.

When Redis cannot be reached (or its subscription is down) the answer is 503 at once, never a
hang: the agent then polls gunicorn's endpoint conditionally until the long poll answers again.
A Redis that lost its data re-creates each counter with a value no agent has seen, so every
waiting or new request answers in full, once.
"""

from __future__ import annotations

import asyncio
import logging
import math
import threading
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import parse_qs

import redis.asyncio as aioredis
from django.conf import settings
from django.db import close_old_connections, connections
from redis.exceptions import RedisError
from rest_framework.renderers import JSONRenderer

from trainhub.common.errors import UNAUTHENTICATED_MESSAGE, ApiError, FieldViolation, invalid_argument
from trainhub.inventory import contact
from trainhub.inventory.agent_auth import bearer_credential
from trainhub.inventory.assignments import node_assignments_of
from trainhub.inventory.selectors import node_by_credential
from trainhub.inventory.wake import WAKE_CHANNEL, wake_value_commands, wake_value_of, woken_nodes

logger = logging.getLogger(__name__)

PATH = "/agent/v1/assignments"
#: The longest wait an agent may ask for (below the idle timeouts of common proxies, 60 s).
MAX_WAIT_SECONDS = 30.0
#: The wait of a request that names none.
DEFAULT_WAIT_SECONDS = 25.0
#: How long a request waits for the subscription to come up (after a start or a Redis restart).
SUBSCRIBED_WITHIN_SECONDS = 2.0
RECONNECT_SECONDS = (0.2, 5.0)
#: How often a quiet subscription is checked with a PING.
HEALTH_SECONDS = 10
#: Redis connections the waiting requests share for their counter reads.
REDIS_CONNECTIONS = 32

Send = Callable[[dict], Awaitable[None]]
Receive = Callable[[], Awaitable[dict]]


class WakeListener:
    """One subscription to WAKE_CHANNEL for the process; wakes the requests waiting on a node.

    While the subscription is down (Redis restarting) ``subscribed`` is clear and every waiter is
    woken to look again; once it is back, every waiter is woken once more (a publication sent
    meanwhile was lost; the counter it bumped was not, unless Redis lost its data too)."""

    def __init__(self, redis_url: str) -> None:
        # Its own connection, with no read timeout: a quiet channel is not a lost subscription (a
        # PING every HEALTH_SECONDS finds a dead one).
        self.client = aioredis.Redis.from_url(redis_url, socket_connect_timeout=5,
                                              health_check_interval=HEALTH_SECONDS)
        self.subscribed = asyncio.Event()
        self.waiters: dict[int, set[asyncio.Event]] = defaultdict(set)

    def watch(self, node_id: int) -> asyncio.Event:
        event = asyncio.Event()
        self.waiters[node_id].add(event)
        return event

    def unwatch(self, node_id: int, event: asyncio.Event) -> None:
        events = self.waiters.get(node_id)
        if events is not None:
            events.discard(event)
            if not events:
                del self.waiters[node_id]

    def _wake(self, node_ids: list[int]) -> None:
        for node_id in node_ids:
            for event in self.waiters.get(node_id, ()):
                event.set()

    async def run(self) -> None:
        delay = RECONNECT_SECONDS[0]
        while True:
            pubsub = self.client.pubsub(ignore_subscribe_messages=True)
            try:
                await pubsub.subscribe(WAKE_CHANNEL)
                self.subscribed.set()
                self._wake(list(self.waiters))
                delay = RECONNECT_SECONDS[0]
                while True:
                    message = await pubsub.get_message(timeout=HEALTH_SECONDS)
                    if message is not None and message["type"] == "message":
                        self._wake(woken_nodes(message["data"]))
            except (RedisError, OSError) as exc:
                logger.warning("agent long poll: Redis subscription lost (%s); waiting requests answer 503 "
                               "until it is back; retrying in %.1f s", exc, delay)
            except Exception:  # noqa: BLE001 - logged; the process keeps serving (503s) and retries
                logger.exception("agent long poll: the Redis subscription failed; retrying in %.1f s", delay)
            finally:
                self.subscribed.clear()
                self._wake(list(self.waiters))
                await pubsub.aclose()
            await asyncio.sleep(delay)
            delay = min(delay * 2, RECONNECT_SECONDS[1])


def _on_database(function: Callable[..., Any], *args: Any) -> Any:
    """Run ``function`` on a database thread, as a request would (a broken or aged connection is replaced)."""
    close_old_connections()
    try:
        return function(*args)
    finally:
        close_old_connections()


def _node_of(raw: str):
    return node_by_credential(raw=raw)


def _wait_of(query: bytes) -> float:
    values = parse_qs(query.decode("latin-1")).get("wait")
    if not values:
        return DEFAULT_WAIT_SECONDS
    try:
        wait = float(values[-1])
    except ValueError:
        wait = math.nan
    if not 0 <= wait <= MAX_WAIT_SECONDS:
        raise invalid_argument([FieldViolation("wait", f"seconds to wait, 0 to {MAX_WAIT_SECONDS:g}")])
    return wait


class LongPoll:
    """The ASGI application: the long poll at PATH and ``/healthz``; 404 for anything else."""

    def __init__(self, *, redis_url: str, database_threads: int) -> None:
        # A request waits for a free connection as long as it may wait at all: on a starved machine a
        # slow answer beats a 503 that sends the agent to poll gunicorn.
        pool = aioredis.BlockingConnectionPool.from_url(redis_url, max_connections=REDIS_CONNECTIONS,
                                                        timeout=MAX_WAIT_SECONDS, socket_timeout=10,
                                                        socket_connect_timeout=5)
        self.redis = aioredis.Redis(connection_pool=pool, health_check_interval=30)
        self.listener = WakeListener(redis_url)
        self.database_threads = database_threads
        self.database = ThreadPoolExecutor(max_workers=database_threads, thread_name_prefix="longpoll-db")
        #: node id -> when (whole epoch seconds) it last asked, since contacts were last recorded.
        self.asked: dict[int, float] = {}
        self._listening: asyncio.Task | None = None
        self._recording: asyncio.Task | None = None

    async def __call__(self, scope: dict, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
        elif scope["type"] == "http":
            self._listen()
            try:
                await self._http(scope, receive, send)
            except ApiError as error:
                await _respond(send, error.http_status, error.body(), _error_headers(error))

    def _listen(self) -> None:
        loop = asyncio.get_running_loop()
        if self._listening is None or self._listening.done():
            self._listening = loop.create_task(self.listener.run())
        if self._recording is None or self._recording.done():
            self._recording = loop.create_task(self._record_contacts())

    async def _record_contacts(self) -> None:
        while True:
            await asyncio.sleep(contact.record_period(settings.TRAINHUB_NODE_HEARTBEAT_TTL_SECONDS))
            await self.contacts_record()

    async def contacts_record(self) -> None:
        """One ZADD: the nodes that asked since the last one (when they asked) and those still
        waiting (now: a held long poll is contact). Kept for the next try when Redis fails."""
        contacts = {**self.asked, **dict.fromkeys(self.listener.waiters, float(math.floor(time.time())))}
        self.asked = {}
        if not contacts:
            return
        try:
            pipe = self.redis.pipeline(transaction=False)
            contact.contacts_commands(pipe, contacts)
            await pipe.execute()
        except (RedisError, OSError) as exc:
            logger.warning("agent long poll: contact of %d node(s) not recorded (%s); retrying", len(contacts), exc)
            for node_id, moment in contacts.items():
                self.asked[node_id] = max(moment, self.asked.get(node_id, moment))

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                self._listen()
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                for task in (self._listening, self._recording):
                    if task is not None:
                        task.cancel()
                await asyncio.get_running_loop().run_in_executor(None, self.close)
                await send({"type": "lifespan.shutdown.complete"})
                return

    def close(self) -> None:
        """Close every database thread's connection, then the threads."""
        everyone = threading.Barrier(self.database_threads)

        def close_connection() -> None:
            everyone.wait(timeout=10)
            connections.close_all()

        for closing in [self.database.submit(close_connection) for _ in range(self.database_threads)]:
            closing.result()
        self.database.shutdown()

    async def _database(self, function: Callable[..., Any], *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self.database, _on_database, function, *args)

    async def _wake_value(self, node_id: int) -> str:
        pipe = self.redis.pipeline(transaction=False)
        wake_value_commands(pipe, node_id)
        return wake_value_of(await pipe.execute())

    async def _http(self, scope: dict, receive: Receive, send: Send) -> None:
        if scope["path"] == "/healthz":
            await _respond(send, 200, {"status": "ok", "subscribed": self.listener.subscribed.is_set()})
            return
        if scope["path"] != PATH:
            raise ApiError(404, f"{scope['path']} is not served here: this process serves only the agents' long poll.")
        if scope["method"] != "GET":
            raise ApiError(405, f'Method "{scope["method"]}" not allowed.')
        # The wait counts from the request's arrival: time spent authenticating is part of it.
        arrived = asyncio.get_running_loop().time()
        headers = {name.decode("latin-1").lower(): value.decode("latin-1") for name, value in scope["headers"]}
        raw = bearer_credential(headers.get("authorization", ""))
        node = await self._database(_node_of, raw) if raw is not None else None
        if node is None:
            raise ApiError(401, UNAUTHENTICATED_MESSAGE)
        self.asked[node.pk] = float(math.floor(time.time()))
        wait = _wait_of(scope["query_string"])
        await self._answer(send, receive, node.pk, headers.get("if-none-match", ""), arrived + wait)

    async def _answer(self, send: Send, receive: Receive, node_id: int, etag: str, deadline: float) -> None:
        """Answer when the node's counter differs from ``etag``, or 304 at ``deadline`` (loop time).

        The counter is read when the request arrives and after every wake-up, never when the wait
        simply runs out: no publication for the node came since the last read (the listener wakes
        every waiter whenever its subscription drops or returns), so that read still holds, and a
        thousand waits ending together cost no Redis round trips."""
        loop = asyncio.get_running_loop()
        woken = self.listener.watch(node_id)
        # An agent that hangs up (killed, restarted) stops waiting - and counting as contact - at once.
        gone = loop.create_task(_hung_up(receive))
        try:
            while True:
                woken.clear()
                current = await self._current_etag(node_id)
                if current != etag:
                    # As gunicorn's endpoint: the counter read before the database.
                    document = await self._database(node_assignments_of, node_id)
                    await _respond(send, 200, document, {"ETag": current})
                    return
                remaining = deadline - loop.time()
                if remaining > 0:
                    waking = loop.create_task(woken.wait())
                    await asyncio.wait((waking, gone), timeout=remaining, return_when=asyncio.FIRST_COMPLETED)
                    waking.cancel()
                    if gone.done():
                        return
                if not woken.is_set():
                    await _respond(send, 304, None, {"ETag": current})
                    return
        finally:
            gone.cancel()
            self.listener.unwatch(node_id, woken)

    async def _current_etag(self, node_id: int) -> str:
        """The node's ETag now; 503 when wake-ups cannot be had (agents then poll gunicorn)."""
        try:
            await asyncio.wait_for(self.listener.subscribed.wait(), SUBSCRIBED_WITHIN_SECONDS)
            return f'"{await self._wake_value(node_id)}"'
        except (TimeoutError, RedisError, OSError) as exc:
            logger.warning("agent long poll: node %s answered 503: %s", node_id, exc or "Redis not subscribed")
            raise ApiError(503, f"Wake-ups are unavailable (Redis: {exc or 'not subscribed'}); poll "
                                "/agent/v1/assignments on the control plane meanwhile.") from None


async def _hung_up(receive: Receive) -> None:
    """Returns once the client has disconnected (a GET's request body is read and dropped)."""
    while (await receive())["type"] != "http.disconnect":
        pass


def _error_headers(error: ApiError) -> dict[str, str]:
    if error.http_status == 401:
        return {"WWW-Authenticate": 'Bearer realm="trainhub"'}
    if error.http_status == 503:
        return {"Retry-After": "30"}
    return {}


async def _respond(send: Send, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
    content = b"" if body is None else JSONRenderer().render(body)
    fields = [(name.encode("latin-1"), value.encode("latin-1")) for name, value in (headers or {}).items()]
    if body is not None:
        fields += [(b"content-type", b"application/json")]
    await send({"type": "http.response.start", "status": status,
                "headers": [*fields, (b"content-length", str(len(content)).encode())]})
    await send({"type": "http.response.body", "body": content})


def long_poll_app() -> LongPoll:
    """The application for this process's settings (REDIS_URL must name a Redis)."""
    if not settings.REDIS_URL:
        raise RuntimeError("the agent long poll needs REDIS_URL (make run sets the embedded Redis's)")
    return LongPoll(redis_url=settings.REDIS_URL, database_threads=settings.TRAINHUB_LONG_POLL_DB_THREADS)
