"""gunicorn's threaded worker, except that a new connection goes to the worker holding the fewest.

gunicorn's workers all wait on one listening socket and whichever process the kernel wakes first
accepts; a kept-alive connection then stays with that worker until it closes. So two busy API
clients share one worker about half the time, and one process serves both (Python runs one thread
per process at a time, so one core) while the other idles. The REST submission benchmark measured
244 jobs/s that way on 2 cores, and 337-655 jobs/s with a worker per client, as the VM's speed
varied (README, Benchmarks).

``LeastConnectionsWorker`` publishes how many connections it holds on a board of shared memory
that the gunicorn master maps before it forks its workers. A worker that a new connection wakes
takes it at once unless another worker holds fewer connections; then it leaves the connection to
that worker, and takes it itself after ``FALLBACK_ACCEPT_DELAY`` if it is still waiting (a worker
can be slow to wake, and a board entry can be stale). Equal counts race as in plain gunicorn.

It overrides ``accept``, ``set_accept_enabled``, ``wait_for_and_dispatch_events`` and ``run`` of
gunicorn 27's ``ThreadWorker``: pyproject.toml pins gunicorn to that major version.
"""

from __future__ import annotations

import mmap
import os
import selectors
import time

from gunicorn.workers.gthread import ThreadWorker

#: How long a worker leaves a new connection to a worker holding fewer before it takes it itself.
FALLBACK_ACCEPT_DELAY = 0.02


class ConnectionBoard:
    """How many connections each worker holds, in memory shared by the gunicorn master and the
    workers it forks: one slot per worker, NOT_ACCEPTING while free or while its worker boots, stops
    or is at worker_connections.

    The master assigns the slots (gunicorn constructs a worker in the master just before it forks
    it), so no two workers write to the same one; a worker killed without a chance to free its
    slot has it freed when the master starts the worker that replaces it.
    """

    SLOTS = 256
    NOT_ACCEPTING = -1

    def __init__(self) -> None:
        self._memory = mmap.mmap(-1, self.SLOTS * 8)  # anonymous and MAP_SHARED: forked children see writes
        self._counts = memoryview(self._memory).cast("q")
        for slot in range(self.SLOTS):
            self._counts[slot] = self.NOT_ACCEPTING
        self._holders: dict[int, ThreadWorker] = {}  # kept in the master only

    def claim(self, worker: ThreadWorker) -> int | None:
        """A free slot for ``worker``, or None when SLOTS workers hold one (it is then not ranked).

        Every slot of a worker that no longer runs is freed first: the count a killed worker last
        published would otherwise make the others leave it connections it can never take.
        """
        for slot, holder in list(self._holders.items()):
            if not _is_running(holder.pid):
                del self._holders[slot]
                self._counts[slot] = self.NOT_ACCEPTING
        slot = next((slot for slot in range(self.SLOTS) if slot not in self._holders), None)
        if slot is not None:
            self._holders[slot] = worker
            self._counts[slot] = self.NOT_ACCEPTING  # until the worker runs and publishes
        return slot

    def publish(self, slot: int, connections: int) -> None:
        self._counts[slot] = connections

    def release(self, slot: int) -> None:
        self._counts[slot] = self.NOT_ACCEPTING

    def another_holds_fewer(self, slot: int, connections: int) -> bool:
        return any(0 <= count < connections for other, count in enumerate(self._counts) if other != slot)


def _is_running(pid: object) -> bool:
    """Whether a worker's process still runs; "[booting]" (not forked yet) counts as running."""
    if not isinstance(pid, int):
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


BOARD = ConnectionBoard()


class LeastConnectionsWorker(ThreadWorker):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._slot = BOARD.claim(self)
        # While set, the listening sockets are off the poller until this time.monotonic().
        self._accept_deferred_until: float | None = None

    def run(self) -> None:
        try:
            super().run()
        finally:
            if self._slot is not None:
                BOARD.release(self._slot)

    def accept(self, listener) -> None:
        if self._accept_deferred_until is not None:
            return  # another listener of the same poll, already deferred with the first
        if self._slot is None or not BOARD.another_holds_fewer(self._slot, self.nr_conns):
            super().accept(listener)
            return
        # Unregistered, a listener with a connection waiting does not wake this poller again and
        # again meanwhile (the poller is level-triggered).
        for socket in self.sockets:
            self.poller.unregister(socket)
        self._accept_deferred_until = time.monotonic() + FALLBACK_ACCEPT_DELAY

    def wait_for_and_dispatch_events(self, timeout: float) -> None:
        # Every change to nr_conns happens on this (the main) thread, between two of these calls. A
        # stopping worker, or one at worker_connections, is no candidate for new connections.
        if self._slot is not None:
            BOARD.publish(self._slot, self.nr_conns if self.alive and self._accepting else BOARD.NOT_ACCEPTING)
        if self._accept_deferred_until is not None:
            timeout = max(0.0, min(timeout, self._accept_deferred_until - time.monotonic()))
        super().wait_for_and_dispatch_events(timeout)
        if self._accept_deferred_until is not None and time.monotonic() >= self._accept_deferred_until:
            self._accept_deferred_until = None
            for socket in self.sockets:
                # The connection no other worker took, if it still waits; gunicorn ignores EAGAIN otherwise.
                super().accept(socket)
                self.poller.register(socket, selectors.EVENT_READ, self.accept)

    def set_accept_enabled(self, enabled: bool) -> None:
        if not enabled and self._accept_deferred_until is not None:
            # Stopping (or at worker_connections) while deferred: the listeners are off the poller already.
            self._accept_deferred_until = None
            self._accepting = False
            return
        super().set_accept_enabled(enabled)
