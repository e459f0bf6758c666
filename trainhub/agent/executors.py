"""How a node runs a replica: a real subprocess, or a simulated run for nodes without hardware."""

from __future__ import annotations

import datetime as dt
import os
import queue
import signal
import subprocess
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

#: Variables passed through from the agent's own environment; everything else comes from the job.
INHERITED_ENV = ("PATH", "HOME", "LANG", "LC_ALL", "TZ", "TMPDIR", "PYTHONPATH", "VIRTUAL_ENV")


class ReplicaProcess(Protocol):
    def poll(self, now: dt.datetime) -> int | None: ...
    def drain(self) -> list[tuple[str, dt.datetime, str]]: ...
    def terminate(self) -> None: ...
    def kill(self) -> None: ...


def _pump(stream, name: str, lines: queue.Queue) -> None:
    for raw in iter(stream.readline, b""):
        lines.put((name, dt.datetime.now(dt.timezone.utc), raw.decode("utf-8", "replace").rstrip("\n")))
    stream.close()


class SubprocessReplica:
    """A replica running as a child process in its own session (so signals reach its children)."""

    def __init__(self, argv: list[str], env: dict[str, str], work_dir: Path,
                 inherit: tuple[str, ...] = INHERITED_ENV):
        work_dir.mkdir(parents=True, exist_ok=True)
        base_env = {name: os.environ[name] for name in inherit if name in os.environ}
        self._lines: queue.Queue = queue.Queue()
        self._process = subprocess.Popen(  # noqa: S603 - argv list, never a shell
            argv, cwd=work_dir, env={**base_env, **env}, stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
        )
        self._readers = [
            threading.Thread(target=_pump, args=(self._process.stdout, "stdout", self._lines), daemon=True),
            threading.Thread(target=_pump, args=(self._process.stderr, "stderr", self._lines), daemon=True),
        ]
        for reader in self._readers:
            reader.start()

    @property
    def pid(self) -> int:
        """Also the process group id: the replica leads its own session."""
        return self._process.pid

    def poll(self, now: dt.datetime) -> int | None:
        code = self._process.poll()
        if code is None:
            return None
        for reader in self._readers:  # the last lines are read before the exit is reported
            reader.join(timeout=5)
        return code

    def drain(self) -> list[tuple[str, dt.datetime, str]]:
        lines = []
        while True:
            try:
                lines.append(self._lines.get_nowait())
            except queue.Empty:
                return lines

    def _signal(self, signum: int) -> None:
        try:
            os.killpg(self._process.pid, signum)
        except ProcessLookupError:
            pass

    def terminate(self) -> None:
        self._signal(signal.SIGTERM)

    def kill(self) -> None:
        self._signal(signal.SIGKILL)

    def wait(self, timeout: float) -> int:
        return self._process.wait(timeout=timeout)


@dataclass
class SimulatedReplica:
    """Exits 0 after ``runtime`` seconds; SIGTERM ends it at once with 143, as a real process would."""

    started: dt.datetime
    runtime: dt.timedelta
    announce: list[str]
    _code: int | None = None
    _pending: list[tuple[str, dt.datetime, str]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._pending = [("stdout", self.started, line) for line in self.announce]

    def poll(self, now: dt.datetime) -> int | None:
        if self._code is None and now >= self.started + self.runtime:
            self._pending.append(("stdout", now, "simulated replica finished"))
            self._code = 0
        return self._code

    def drain(self) -> list[tuple[str, dt.datetime, str]]:
        lines, self._pending = self._pending, []
        return lines

    def terminate(self) -> None:
        if self._code is None:
            self._code = 128 + signal.SIGTERM

    def kill(self) -> None:
        if self._code is None:
            self._code = 128 + signal.SIGKILL


class FailedToStart:
    """A replica whose command could not be started: exit 127 with the reason in its log."""

    def __init__(self, now: dt.datetime, reason: str):
        self._pending = [("stderr", now, reason)]

    def poll(self, now: dt.datetime) -> int | None:
        return 127

    def drain(self) -> list[tuple[str, dt.datetime, str]]:
        lines, self._pending = self._pending, []
        return lines

    def terminate(self) -> None:
        pass

    def kill(self) -> None:
        pass
