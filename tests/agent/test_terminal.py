"""A task on a terminal (srun --pty's task 0): its supervisor owns a pseudo-terminal, takes typed
bytes and window sizes from the agent through a FIFO and logs what the task prints as raw chunks."""

import base64
import json
import time

from trainhub.agent.replicas import ReplicaRun


def printed(run: ReplicaRun) -> bytes:
    """Every byte the task printed on its terminal, from the run's log."""
    log = run.directory / "log.jsonl"
    lines = log.read_text().splitlines() if log.exists() else []
    return b"".join(base64.b64decode(text) for stream, _, text in map(json.loads, lines) if stream == "pty")


def wait_for(condition, patience: float = 60.0) -> None:
    """Until ``condition()``: the supervisor is a process of its own (not a scheduler: no sleep stands in for one)."""
    give_up = time.monotonic() + patience
    while not condition():
        assert time.monotonic() < give_up, "gave up waiting"
        time.sleep(0.02)


def test_typed_bytes_and_a_new_window_size_reach_the_task_in_order(tmp_path):
    run = ReplicaRun.start(tmp_path / "0", argv=["bash", "--norc", "-c", "stty size; read line; stty size; exit 4"],
                           env={"PATH": "/usr/bin:/bin"}, cwd=tmp_path, terminal={"rows": 24, "cols": 80})
    try:
        wait_for(lambda: b"24 80" in printed(run))  # the supervisor made its FIFO before it started the task
        assert run.write_terminal([{"rows": 30, "cols": 100}, {"data": base64.b64encode(b"hi\r").decode()}]) == 2
        wait_for(lambda: run.exit_status(time.time()) is not None)
    finally:
        if run.exit_status(time.time()) is None:
            run.kill(time.time())  # a failed test leaves no task waiting for input
    assert printed(run) == b"24 80\r\nhi\r\n30 100\r\n"
    assert run.exit_status(time.time()) == 4


def test_before_its_supervisor_made_the_fifo_nothing_is_taken(tmp_path):
    assert ReplicaRun(tmp_path).write_terminal([{"data": "eA=="}]) == 0


def logged(run: ReplicaRun, stream: str) -> list[str]:
    log = run.directory / "log.jsonl"
    return [text for name, _, text in map(json.loads, log.read_text().splitlines()) if name == stream]


def test_a_step_task_gets_its_own_pid_as_slurm_task_pid_on_a_terminal_or_not(tmp_path):
    """slurmstepd's SLURM_TASK_PID (fixtures/22.05/srun-details/env-1.txt): the task's own pid, which
    the supervisor's child learns only after the fork; the rest of the environment is the spec's,
    PATH included."""
    show = 'echo "$$ $SLURM_TASK_PID $MINE"; echo "$PATH"'
    plain = ReplicaRun.start(tmp_path / "0", argv=["sh", "-c", show], env={"PATH": "/bin", "MINE": "x"},
                             cwd=tmp_path, task_pid=True)
    other = ReplicaRun.start(tmp_path / "1", argv=["sh", "-c", show], env={"PATH": "/usr/bin", "MINE": "y"},
                             cwd=tmp_path, task_pid=True, terminal={"rows": 24, "cols": 80})
    untold = ReplicaRun.start(tmp_path / "2", argv=["sh", "-c", show], env={"PATH": "/bin"}, cwd=tmp_path)
    for run in (plain, other, untold):
        wait_for(lambda: run.exit_status(time.time()) is not None)
    pid, task_pid, mine = logged(plain, "stdout")[0].split(" ")
    assert (pid == task_pid, mine, logged(plain, "stdout")[1]) == (True, "x", "/bin")
    pid, task_pid, mine = printed(other).decode().splitlines()[0].split(" ")
    assert (pid == task_pid, mine, printed(other).decode().splitlines()[1]) == (True, "y", "/usr/bin")
    assert logged(untold, "stdout")[0] == f"{logged(untold, 'stdout')[0].split()[0]}  "
