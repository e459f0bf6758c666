"""The per-replica supervisor (slurmstepd's part): runs one replica and outlives the agent.

The agent starts ``python supervisor.py DIR`` in a session of its own, so killing or upgrading
the agent leaves the replica running. The supervisor reads ``DIR/spec.json`` ({argv, env, cwd,
user, prepare, prepareEnv, files}), runs the ``prepare`` commands (an image pull) and then the command,
each in its own process group, and appends every output line to ``DIR/log.jsonl`` as
``[stream, epoch seconds, text]``, flushed line by line, so a restarted agent resumes where the
control plane stopped receiving. A command's output comes through two pipes; a Slurm batch script's
(``files``: {stream: path}) goes straight into its output files, the descriptors handed to it as
slurmstepd does (one file taking both streams keeps their order), and is read back from them into the
log. A command given a terminal (``terminal``: {rows, cols}; srun --pty's task 0) runs on a
pseudo-terminal of that size as its controlling terminal, stdin, stdout and stderr: what it prints
goes to the log as ``pty`` entries, base64 of the bytes read (a terminal's output is not lines),
and what the agent writes to the FIFO ``DIR/terminal.in`` - one JSON document a line, {"data":
base64} typed bytes or {"rows", "cols"} a new window size (the kernel sends the command SIGWINCH)
- goes to the terminal; the supervisor waits on both with select, holding at most
TERMINAL_BUFFER bytes not yet taken by the terminal. It records ``DIR/child.json`` ({pid, start}) and, when the command
ends, writes its wait status to ``DIR/exit.json`` atomically: the durable record a restarted
agent reports. Standard library only, and run by path, so it imports nothing of trainhub.
"""

from __future__ import annotations

import base64
import errno
import fcntl
import json
import os
import select
import struct
import subprocess
import termios
import sys
import threading
import time
from pathlib import Path

SPEC, LOG, CHILD, EXIT, SUPERVISOR = "spec.json", "log.jsonl", "child.json", "exit.json", "supervisor.json"
#: The FIFO the agent writes a terminal's input to.
TERMINAL_INPUT = "terminal.in"
#: The most input bytes held for a terminal that is not reading them.
TERMINAL_BUFFER = 1 << 16


def write_atomically(path: Path, document: dict) -> None:
    temporary = path.with_name(path.name + ".tmp")
    with open(temporary, "w", encoding="utf-8") as handle:
        json.dump(document, handle)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, path)


def process_start_time(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (guards against a reused pid)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat[stat.rindex(")") + 2:].split()[19]


#: How output files are opened: once, before the command starts, never through a symlink (the last
#: component here, the directories by _open_following_no_symlink; the agent resolved and checked the
#: path; the command may replace it while it runs, and writes then keep going to the file opened).
_APPEND = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC


#: How each directory on the way to an output file is opened: by its parent's descriptor, never
#: through a symlink; O_PATH needs no read permission on it.
_DIRECTORY = getattr(os, "O_PATH", os.O_RDONLY) | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _open_following_no_symlink(path: str, flags: int, mode: int) -> int:
    """os.open of an absolute ``path`` that follows no symlink in any component (each directory is
    opened from its parent's descriptor with O_NOFOLLOW; ``flags`` must hold O_NOFOLLOW for the
    last). The agent resolved and checked the path just before; a job that swaps one of its
    directories for a symlink to a host directory in between gets ELOOP or ENOTDIR here, not a file
    the root supervisor created there (and then gave to the job's uid)."""
    parts = [part for part in path.split("/") if part not in ("", ".")]
    if not path.startswith("/") or not parts or ".." in parts:
        raise OSError(errno.EINVAL, "not an absolute path without '..'", path)
    directory = os.open("/", _DIRECTORY)
    try:
        for part in parts[:-1]:
            inner = os.open(part, _DIRECTORY, dir_fd=directory)
            os.close(directory)
            directory = inner
        return os.open(parts[-1], flags, mode, dir_fd=directory)
    except OSError as exc:  # named by the whole path, not the component (OSError picks the subclass by errno)
        raise OSError(exc.errno, exc.strerror, path) from exc
    finally:
        os.close(directory)


def open_append(path: str, owner: dict | None = None) -> int:
    """A descriptor appending to ``path`` (created 0644), refusing a symlink as any of its components.

    With ``owner`` ({uid, gid}: the command runs as that user, as slurmstepd opens a job's files as
    the job's user) a file this call creates is given to that user through the descriptor; a file
    that already existed keeps its owner, whoever it is (O_EXCL tells the two apart; a symlink fails
    both opens). Raises OSError."""
    try:
        fd = _open_following_no_symlink(path, _APPEND | os.O_EXCL, 0o644)
    except FileExistsError:
        return _open_following_no_symlink(path, _APPEND, 0o644)
    if owner:
        try:
            os.fchown(fd, int(owner["uid"]), int(owner["gid"]))
        except OSError:
            os.close(fd)
            raise
    return fd


class Log:
    """The run's ``log.jsonl``: one ``[stream, epoch seconds, text]`` a line, flushed line by line."""

    def __init__(self, handle):
        self.handle = handle
        self.lock = threading.Lock()

    def write(self, stream: str, text: str) -> None:
        with self.lock:
            self.handle.write(json.dumps([stream, time.time(), text]) + "\n")
            self.handle.flush()


#: A line longer than this without its newline is logged in pieces of this size (the control plane
#: keeps 64 KiB of a line).
MAX_LINE_BYTES = 1 << 16


class _Tail:
    """Reads what was appended to one output file, through a descriptor of its own on the file opened
    (``/proc/self/fd``: never the path again, which the command may have swapped), from its size at
    the start; complete lines go to the log."""

    def __init__(self, stream: str, write_fd: int):
        self.stream = stream
        self.fd = os.open(f"/proc/self/fd/{write_fd}", os.O_RDONLY | os.O_CLOEXEC)
        self.position = os.fstat(self.fd).st_size
        self.partial = b""

    def copy(self, log: Log, *, final: bool) -> None:
        if os.fstat(self.fd).st_size < self.position:  # truncated (``: > slurm-1.out``): from its start
            self.position, self.partial = 0, b""
        while chunk := os.pread(self.fd, MAX_LINE_BYTES, self.position):
            self.position += len(chunk)
            *lines, self.partial = (self.partial + chunk).split(b"\n")
            for line in lines:
                log.write(self.stream, line.decode("utf-8", "replace"))
            while len(self.partial) >= MAX_LINE_BYTES:
                piece, self.partial = self.partial[:MAX_LINE_BYTES], self.partial[MAX_LINE_BYTES:]
                log.write(self.stream, piece.decode("utf-8", "replace"))
        if final and self.partial:
            log.write(self.stream, self.partial.decode("utf-8", "replace"))
            self.partial = b""


#: The exit record's phase when the command never started because its output files could not be opened.
LAUNCH = "launch"


class OutputFileError(OSError):
    """An output file that could not be opened, and for which stream (slurmstepd names it)."""

    def __init__(self, stream: str, error: OSError):
        super().__init__(error.errno, error.strerror, error.filename)
        self.stream = stream


class OutputFiles:
    """A Slurm batch script's output files (``files``: stream -> path; one file may take both
    streams), handed to the command as its stdout and stderr descriptors, as slurmstepd does: one
    file taking both streams keeps their order. Those it creates belong to ``owner``, the user the
    script runs as. Each file is read back into the log as it grows (``copy``) - a file taking both
    streams under ``stdout``, since the order, not the stream, is what the file keeps."""

    def __init__(self, files: dict[str, str], owner: dict | None = None):
        self.descriptors: dict[str, int] = {}
        self.tails: list[_Tail] = []
        opened: dict[str, int] = {}
        for stream, path in files.items():
            try:
                if path in opened:
                    self.descriptors[stream] = opened[path]
                else:
                    # kept at once, so close() closes it should its tail fail
                    opened[path] = self.descriptors[stream] = open_append(path, owner)
                    self.tails.append(_Tail(stream, opened[path]))
            except OSError as exc:
                self.close()
                raise OutputFileError(stream, exc) from exc

    def copy(self, log: Log, *, final: bool = False) -> None:
        for tail in self.tails:
            tail.copy(log, final=final)

    def write(self, stream: str, text: str) -> None:
        """A line of the supervisor's own into the file (slurmstepd's errors go there too)."""
        os.write(self.descriptors[stream], (text + "\n").encode())

    def close(self) -> None:
        for fd in {*self.descriptors.values(), *(tail.fd for tail in self.tails)}:
            os.close(fd)
        self.descriptors, self.tails = {}, []


def _pump(stream, name: str, log: Log, last: list[str] | None) -> None:
    for raw in iter(stream.readline, b""):
        text = raw.decode("utf-8", "replace").rstrip("\n")
        if last is not None and text.strip():
            last[:] = [*last[-4:], text.strip()]
        log.write(name, text)
    stream.close()


#: How often the output files are read back while the batch script runs (seconds).
TAIL_INTERVAL = 0.1


def _start_failure(argv: list[str], exc: OSError, exec_error: str | None) -> tuple[str, int]:
    """(the line, the exit status) of a command that did not start: ``exec_error`` (a job step's task:
    ``slurmstepd-NODE: error: execve(): {program}: {strerror}``, exiting with the errno, as slurmstepd's
    task does: fixtures/22.05/srun-alone/srun-5.err), else trainhub's line and 127."""
    if exec_error and exc.errno:
        return exec_error.format(program=argv[0], strerror=os.strerror(exc.errno)), exc.errno
    return f"cannot start {argv[0]}: {exc}", 127


def _run(argv: list[str], *, env: dict | None, cwd: str, user: dict | None, log: Log, files: OutputFiles | None,
         directory: Path | None, exec_error: str | None = None, task_pid: bool = False) -> tuple[int, list[str]]:
    """Run one command; its wait status and last stderr lines. Its output goes to ``files`` (read
    back into the log) or, without, through two pipes into the log. With ``directory``, the child's
    pid is recorded there (the replica's own command)."""
    streams = ({"stdout": files.descriptors["stdout"], "stderr": files.descriptors["stderr"]} if files else
               {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE})
    try:
        child = subprocess.Popen(  # noqa: S603 - an argument list, never a shell
            argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, **streams,
            start_new_session=True, preexec_fn=_prepare_child(user, task_pid),
        )
    except OSError as exc:
        message, status = _start_failure(argv, exc, exec_error)
        if files:
            files.write("stderr", message)
            files.copy(log, final=True)
        else:
            log.write("stderr", message)
        return status, [message]
    if directory is not None:
        write_atomically(directory / CHILD, {"pid": child.pid, "start": process_start_time(child.pid)})
    if files:
        while child.poll() is None:
            files.copy(log)
            time.sleep(TAIL_INTERVAL)
        files.copy(log, final=True)
        return child.returncode, []
    last: list[str] = []
    readers = [threading.Thread(target=_pump, args=(child.stdout, "stdout", log, None)),
               threading.Thread(target=_pump, args=(child.stderr, "stderr", log, last))]
    for reader in readers:
        reader.start()
    status = child.wait()
    for reader in readers:
        reader.join(timeout=10)
    return status, last


def set_window_size(fd: int, rows: int, cols: int) -> None:
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))


def _controlling_terminal(demote):
    """In the child (a new session, the terminal on 0-2): make it the session's controlling
    terminal, then drop privileges."""
    def prepare() -> None:
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)
        if demote is not None:
            demote()

    return prepare


def _run_on_terminal(argv: list[str], *, env: dict | None, cwd: str, user: dict | None, log: Log, directory: Path,
                     size: dict, exec_error: str | None = None, task_pid: bool = False) -> int:
    """Run the command on a new pseudo-terminal (see the module's docstring); its wait status."""
    fifo = directory / TERMINAL_INPUT
    if not fifo.exists():
        os.mkfifo(fifo, 0o600)
    # Opened read-write, the FIFO never reads end-of-file between the agent's writes.
    inbox = os.open(fifo, os.O_RDWR | os.O_NONBLOCK | os.O_CLOEXEC)
    master, slave = os.openpty()
    set_window_size(master, size["rows"], size["cols"])
    try:
        child = subprocess.Popen(  # noqa: S603 - an argument list, never a shell
            argv, cwd=cwd, env=env, stdin=slave, stdout=slave, stderr=slave, start_new_session=True,
            preexec_fn=_controlling_terminal(_prepare_child(user, task_pid)))
    except OSError as exc:
        message, status = _start_failure(argv, exc, exec_error)
        log.write("stderr", message)
        for fd in (master, slave, inbox):
            os.close(fd)
        return status
    os.close(slave)
    write_atomically(directory / CHILD, {"pid": child.pid, "start": process_start_time(child.pid)})
    os.set_blocking(master, False)
    pending, typed = b"", b""
    while True:
        readable, writable, _ = select.select([master] + ([inbox] if len(typed) < TERMINAL_BUFFER else []),
                                              [master] if typed else [], [])
        if master in readable:
            try:
                output = os.read(master, 4096)
            except OSError:  # EIO: the command and everything it started closed the terminal
                output = b""
            if not output:
                break
            log.write("pty", base64.b64encode(output).decode())
        if inbox in readable:
            *documents, pending = (pending + os.read(inbox, 4096)).split(b"\n")
            for document in documents:
                item = json.loads(document)
                if "data" in item:
                    typed += base64.b64decode(item["data"])
                else:
                    set_window_size(master, item["rows"], item["cols"])
        if master in writable:
            try:
                typed = typed[os.write(master, typed):]
            except BlockingIOError:
                pass
    os.close(master)
    os.close(inbox)
    return child.wait()


def supervise(directory: Path) -> int:
    """Run the spec's ``prepare`` commands (pulling an image) one after another, then its command.
    A failed preparation ends the replica with that status and its last error lines as the message."""
    write_atomically(directory / SUPERVISOR, {"pid": os.getpid(), "start": process_start_time(os.getpid())})
    spec = json.loads((directory / SPEC).read_text())
    with open(directory / LOG, "a", encoding="utf-8") as handle:
        log = Log(handle)
        try:
            files = OutputFiles(spec["files"], spec.get("user")) if spec.get("files") else None
        except OutputFileError as exc:
            message = f"slurmstepd: error: Could not open {exc.stream} file {exc.filename}: {exc.strerror}"
            log.write("stderr", message)
            write_atomically(directory / EXIT, {"status": 1, "time": time.time(), "phase": LAUNCH,
                                                "message": message})
            return 0
        for argv in spec.get("prepare", []):
            status, last = _run(argv, env=spec.get("prepareEnv", spec["env"]), cwd=spec["cwd"], user=None, log=log,
                                files=None, directory=None)
            if status != 0:
                write_atomically(directory / EXIT, {"status": status, "time": time.time(), "phase": "prepare",
                                                    "message": " ".join(last[-3:])[:2000]})
                return 0
        env, task_pid = spec["env"], bool(spec.get("taskPid"))
        if task_pid:
            # The command's environment is this process's own, which the child gets as it is plus its
            # pid (_with_task_pid): the environment handed to Popen is fixed before the fork.
            os.environ.clear()
            os.environ.update(env)
            env = None
        if spec.get("terminal"):
            status = _run_on_terminal(spec["argv"], env=env, cwd=spec["cwd"], user=spec.get("user"), log=log,
                                      directory=directory, size=spec["terminal"], exec_error=spec.get("execError"),
                                      task_pid=task_pid)
        else:
            status, _ = _run(spec["argv"], env=env, cwd=spec["cwd"], user=spec.get("user"), log=log,
                             files=files, directory=directory, exec_error=spec.get("execError"), task_pid=task_pid)
        if files:
            files.close()
    write_atomically(directory / EXIT, {"status": status, "time": time.time(), "phase": "run"})
    return 0


def _prepare_child(user: dict | None, task_pid: bool):
    """What the child does before exec: with ``task_pid``, SLURM_TASK_PID in its environment, its own
    pid (which the command keeps through exec), as slurmstepd gives each task
    (fixtures/22.05/srun-details/env-1.txt); then drop privileges (_drop_privileges)."""
    demote = _drop_privileges(user)
    if not task_pid:
        return demote

    def prepare() -> None:
        os.putenv("SLURM_TASK_PID", str(os.getpid()))
        if demote is not None:
            demote()

    return prepare


def _drop_privileges(user: dict | None):
    """Run the replica as the unprivileged uid/gid the agent chose (when it runs as root)."""
    if not user:
        return None

    def demote() -> None:
        os.setgroups([])
        os.setgid(int(user["gid"]))
        os.setuid(int(user["uid"]))

    return demote


if __name__ == "__main__":
    sys.exit(supervise(Path(sys.argv[1])))
