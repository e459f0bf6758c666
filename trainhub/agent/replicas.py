"""A replica's run on this node, kept in a directory so that it survives the agent.

``DIR`` holds what the supervisor writes (spec.json, log.jsonl, child.json, exit.json) and what
the agent keeps of its own progress: ``shipped.json`` ({seq, offset}: the first log line the
control plane has not acknowledged and its byte offset) and ``reported`` (the exit was reported).
A real replica runs under the supervisor; a simulated one (capacity the admin does not have) is
a directory whose exit is due ``runtime`` seconds after its start, and says so in its log.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from trainhub.agent import supervisor
from trainhub.agent.client import ControlPlane, error_message
from trainhub.agent.supervisor import CHILD, EXIT, LOG, SPEC, TERMINAL_INPUT, process_start_time, write_atomically
from trainhub.agent.supervisor import SUPERVISOR as SUPERVISOR_RECORD

SUPERVISOR_SCRIPT = Path(supervisor.__file__)
SHIPPED, REPORTED, SIMULATED, OUTPUTS = "shipped.json", "reported", "simulated.json", "outputs.json"
LOG_CHUNK_LINES = 1000
logger = logging.getLogger("trainhub.agent")


class ReplicaRun:
    """One replica's directory: start, adopt after a restart, read its log, signal it, see it end."""

    def __init__(self, directory: Path):
        self.directory = directory
        shipped = self._read(SHIPPED) or {"seq": 0, "offset": 0}
        self.seq, self.offset = int(shipped["seq"]), int(shipped["offset"])
        self._supervisor: subprocess.Popen | None = None

    # Starting ---------------------------------------------------------------------------------

    @classmethod
    def start(cls, directory: Path, *, argv: list[str], env: dict[str, str], cwd: Path,
              user: dict | None = None, outputs: dict | None = None, prepare: list[list[str]] = (),
              prepare_env: dict[str, str] | None = None, container: dict | None = None,
              files: dict[str, str] | None = None, terminal: dict[str, int] | None = None,
              exec_error: str | None = None, task_pid: bool = False) -> ReplicaRun:
        """Start the supervisor. With ``container`` ({name, signal: argv prefix, remove: argv}),
        signals go through the container runtime rather than to a process group; ``files``
        ({stream: path}) also receive the output lines; ``terminal`` ({rows, cols}): the command
        runs on a pseudo-terminal (``write_terminal``); ``exec_error``: the line a command that does
        not start prints, ``{program}`` and ``{strerror}`` filled in, and it exits with the errno
        (supervisor._start_failure); ``task_pid``: the command also gets SLURM_TASK_PID, its own pid."""
        directory.mkdir(parents=True, exist_ok=True)
        if outputs is not None:
            write_atomically(directory / OUTPUTS, outputs)
        write_atomically(directory / SPEC, {"argv": argv, "env": env, "cwd": str(cwd), "user": user,
                                            "prepare": list(prepare), "prepareEnv": prepare_env or env,
                                            "container": container, "files": files or {}, "terminal": terminal,
                                            "execError": exec_error, "taskPid": task_pid})
        run = cls(directory)
        with open(directory / "supervisor.err", "ab") as errors:
            run._supervisor = subprocess.Popen(  # noqa: S603 - an argument list, never a shell
                [sys.executable, "-S", str(SUPERVISOR_SCRIPT), str(directory)], stdin=subprocess.DEVNULL,
                stdout=errors, stderr=errors, start_new_session=True, close_fds=True)
        return run

    @classmethod
    def simulate(cls, directory: Path, *, started: float, runtime: float, announce: list[str]) -> ReplicaRun:
        directory.mkdir(parents=True, exist_ok=True)
        write_atomically(directory / SIMULATED, {"started": started, "runtime": runtime})
        with open(directory / LOG, "a", encoding="utf-8") as log:
            log.writelines(json.dumps(["stdout", started, line]) + "\n" for line in announce)
        return cls(directory)

    @staticmethod
    def note(directory: Path, now: float, text: str, stream: str = "stderr") -> None:
        """A line of the agent's own in the replica's log (what ran it, and how)."""
        directory.mkdir(parents=True, exist_ok=True)
        with open(directory / LOG, "a", encoding="utf-8") as log:
            log.write(json.dumps([stream, now, text]) + "\n")

    @classmethod
    def failed(cls, directory: Path, *, reason: str, now: float) -> ReplicaRun:
        """A replica that could not be prepared: exit 127 with the reason in its log."""
        cls.note(directory, now, reason)
        write_atomically(directory / EXIT, {"status": 127, "time": now})
        return cls(directory)

    # Reading ----------------------------------------------------------------------------------

    def _read(self, name: str) -> dict | None:
        try:
            return json.loads((self.directory / name).read_text())
        except (OSError, ValueError):
            return None

    @property
    def outputs(self) -> dict | None:
        """Where the primary replica leaves its metric file and model directory (outputs.json)."""
        return self._read(OUTPUTS)

    @property
    def replica_id(self) -> int:
        return int(self.directory.name)

    def exit_status(self, now: float) -> int | None:
        """The wait status once the replica ended (negative: killed by that signal), else None."""
        ended = self._read(EXIT)
        if ended is not None:
            if self._supervisor is not None:
                self._supervisor.poll()  # reap it
            return int(ended["status"])
        simulated = self._read(SIMULATED)
        if simulated is not None and now >= simulated["started"] + simulated["runtime"]:
            self.note(self.directory, now, "simulated replica finished", stream="stdout")
            write_atomically(self.directory / EXIT, {"status": 0, "time": now})
            return 0
        return None

    def write_terminal(self, documents: list[dict]) -> int:
        """Hand the supervisor input for the command's terminal ({"data": base64} or {"rows",
        "cols"}, in order); how many it took (none before it made its FIFO, fewer when the FIFO
        is full: the rest are handed again later)."""
        try:
            fifo = os.open(self.directory / TERMINAL_INPUT, os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:  # not made yet (ENOENT), or the supervisor is gone (ENXIO)
            return 0
        taken = 0
        try:
            for document in documents:
                # One write of less than PIPE_BUF bytes is atomic: all of a document or none of it.
                os.write(fifo, (json.dumps(document) + "\n").encode())
                taken += 1
        except BlockingIOError:
            pass
        finally:
            os.close(fifo)
        return taken

    def lost(self) -> bool:
        """The supervisor is gone without recording an exit (the machine rebooted, it was killed)."""
        if (self.directory / EXIT).exists() or (self.directory / SIMULATED).exists():
            return False
        if self._supervisor is not None:
            gone = self._supervisor.poll() is not None
        else:
            supervisor = self._read(SUPERVISOR_RECORD)
            gone = supervisor is None or process_start_time(supervisor["pid"]) != supervisor["start"]
        return gone and not (self.directory / EXIT).exists()

    def child(self) -> int | None:
        """The command's pid (its process group) while it runs, None before and after."""
        child = self._read(CHILD)
        if child is None or (self.directory / EXIT).exists() or process_start_time(child["pid"]) != child["start"]:
            return None
        return int(child["pid"])

    def exit_record(self) -> dict | None:
        """exit.json: {status, time, phase ("prepare": the image could not be pulled), message}."""
        return self._read(EXIT)

    def running(self) -> bool:
        return not (self.directory / EXIT).exists() and not self.lost()

    def unshipped(self, limit: int) -> tuple[list[list], int]:
        """Up to ``limit`` complete log lines from the first unacknowledged one, and the offset after them."""
        lines, offset = [], self.offset
        try:
            with open(self.directory / LOG, "rb") as log:
                log.seek(self.offset)
                while len(lines) < limit:
                    raw = log.readline()
                    if not raw.endswith(b"\n"):
                        break  # a line still being written
                    offset += len(raw)
                    try:
                        lines.append(json.loads(raw))
                    except ValueError:
                        lines.append(["stderr", time.time(), raw.decode("utf-8", "replace").rstrip("\n")])
        except FileNotFoundError:
            pass
        return lines, offset

    def acknowledge(self, seq: int, offset: int) -> None:
        self.seq, self.offset = seq, offset
        write_atomically(self.directory / SHIPPED, {"seq": seq, "offset": offset})

    def rewind(self, seq: int) -> None:
        """The control plane holds ``seq`` lines (it lost a chunk, or got one twice): resume from there."""
        offset = 0
        with open(self.directory / LOG, "rb") as log:
            for _ in range(seq):
                raw = log.readline()
                if not raw.endswith(b"\n"):
                    break
                offset += len(raw)
        self.acknowledge(seq, offset)

    @property
    def reported(self) -> bool:
        return (self.directory / REPORTED).exists()

    def mark_reported(self) -> None:
        (self.directory / REPORTED).touch()

    def clean_up(self) -> None:
        """After a lost supervisor: remove the container it may have left behind."""
        container = (self._read(SPEC) or {}).get("container")
        if container:
            subprocess.run(container["remove"], stdin=subprocess.DEVNULL, capture_output=True, timeout=60,  # noqa: S603
                           check=False)

    # Signalling -------------------------------------------------------------------------------

    def signal(self, signum: int, now: float, *, group: bool = True) -> None:
        """Signal the replica's whole process group, or only its command's own process (a simulated
        one ends at once, as 128 + signal)."""
        if (self.directory / EXIT).exists():
            return
        if (self.directory / SIMULATED).exists():
            write_atomically(self.directory / EXIT, {"status": -signum, "time": now})
            return
        container = (self._read(SPEC) or {}).get("container")
        if container:
            subprocess.run([*container["signal"], signal.Signals(signum).name.removeprefix("SIG"), container["name"]],
                           stdin=subprocess.DEVNULL, capture_output=True, timeout=60, check=False)  # noqa: S603
            return
        child = self._read(CHILD)
        if child is None or process_start_time(child["pid"]) != child["start"]:
            return
        try:
            (os.killpg if group else os.kill)(child["pid"], signum)
        except ProcessLookupError:
            pass

    def terminate(self, now: float) -> None:
        self.signal(signal.SIGTERM, now)

    def kill(self, now: float) -> None:
        self.signal(signal.SIGKILL, now)


def ship_logs(api: ControlPlane, run: ReplicaRun, path: str) -> bool:
    """Send a run's unacknowledged lines to ``path`` (a log endpoint of the agent API) in chunks;
    True once every complete line is stored (or the control plane forgot the run: 404)."""
    while True:
        lines, offset = run.unshipped(LOG_CHUNK_LINES)
        if not lines:
            return True
        answer = api.post(path, {"first": run.seq, "lines": lines})
        if answer.status == 409:
            run.rewind(int(answer.body.get("expected", 0)))
            continue
        if answer.status != 200:
            logger.warning("log chunk to %s refused: %s", path, error_message(answer))
            return answer.status == 404
        run.acknowledge(run.seq + len(lines), offset)
        if len(lines) < LOG_CHUNK_LINES:
            return True
