"""The per-replica supervisor (slurmstepd's part): runs one replica and outlives the agent.

The agent starts ``python supervisor.py DIR`` in a session of its own, so killing or upgrading
the agent leaves the replica running. The supervisor reads ``DIR/spec.json`` ({argv, env, cwd}),
starts the command in its own process group, appends every output line to ``DIR/log.jsonl`` as
``[stream, epoch seconds, text]`` (flushed line by line, so a restarted agent resumes where the
control plane stopped receiving), records ``DIR/child.json`` ({pid, start}) and, when the command
ends, writes its wait status to ``DIR/exit.json`` atomically: the durable record a restarted
agent reports. Standard library only, and run by path, so it imports nothing of trainhub.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

SPEC, LOG, CHILD, EXIT = "spec.json", "log.jsonl", "child.json", "exit.json"


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


def _pump(stream, name: str, log, lock: threading.Lock) -> None:
    for raw in iter(stream.readline, b""):
        line = json.dumps([name, time.time(), raw.decode("utf-8", "replace").rstrip("\n")]) + "\n"
        with lock:
            log.write(line)
            log.flush()
    stream.close()


def supervise(directory: Path) -> int:
    spec = json.loads((directory / SPEC).read_text())
    lock = threading.Lock()
    with open(directory / LOG, "a", encoding="utf-8") as log:
        try:
            child = subprocess.Popen(  # noqa: S603 - an argument list, never a shell
                spec["argv"], cwd=spec["cwd"], env=spec["env"], stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
                preexec_fn=_drop_privileges(spec.get("user")),
            )
        except OSError as exc:
            log.write(json.dumps(["stderr", time.time(), f"cannot start the replica's command: {exc}"]) + "\n")
            log.flush()
            write_atomically(directory / EXIT, {"status": 127, "time": time.time()})
            return 0
        write_atomically(directory / CHILD, {"pid": child.pid, "start": process_start_time(child.pid)})
        readers = [threading.Thread(target=_pump, args=(child.stdout, "stdout", log, lock)),
                   threading.Thread(target=_pump, args=(child.stderr, "stderr", log, lock))]
        for reader in readers:
            reader.start()
        status = child.wait()
        for reader in readers:
            reader.join(timeout=10)
    write_atomically(directory / EXIT, {"status": status, "time": time.time()})
    return 0


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
