"""srun --pty: task 0 on a pseudo-terminal on its node, this terminal in raw mode and relayed
(input, output, window size, Ctrl-C), end to end: the CLI on a real pseudo-terminal, a live
server and real agents; Slurm 22.05's bytes (fixtures/22.05/srun-alone/pty-*.txt)."""

import os
import termios
from pathlib import Path

from tests.slurm.conftest import SRUN_ALONE_FIXTURES
from trainhub.agent import srun as srun_shim
from trainhub.slurm.models import JobState, SlurmJob, StepInput


def recorded(name: str) -> tuple[int, bytes]:
    """A recorded terminal's bytes on the test cluster's node (gpu1 -> a4-0) and its exit status."""
    shown, _, status = (SRUN_ALONE_FIXTURES / name).read_bytes().rpartition(b"rc=")
    return int(status), shown.replace(b"gpu1", b"a4-0")


def raw(terminal: int) -> bool:
    """srun has put the terminal in raw mode (its step runs)."""
    return not termios.tcgetattr(terminal)[3] & termios.ICANON


class Typist:
    """Types ``keys`` once ``ready(terminal)``."""

    def __init__(self, keys: bytes, ready):
        self.keys = keys
        self.ready = ready
        self.typed = False

    def __call__(self, terminal: int, shown: bytes) -> None:
        if not self.typed and self.ready(terminal):
            os.write(terminal, self.keys)
            self.typed = True


def test_input_output_and_window_size_reach_task_0s_terminal(slurm_cli_as_uma):
    """pty-9.txt: what is typed is echoed by task 0's terminal and read by the task; ``stty size``
    is this terminal's; the task's stdin is a terminal; its exit code is srun's."""
    typist = Typist(b"echo typed\r", raw)
    code, shown = slurm_cli_as_uma.on_terminal(
        "srun", "-N1", "--pty", "bash", "--norc", "-c",
        'read line; echo "got $line"; stty size; tty -s && echo tty; exit 5', react=typist)
    assert (code, shown) == recorded("pty-9.txt")
    job = SlurmJob.objects.get()
    assert (job.state, job.exit_code, job.name) == (JobState.FAILED, 5, "bash")
    assert not StepInput.objects.exists()  # every input delivered and forgotten


def test_srun_pty_inside_salloc_relays_the_same_way(slurm_cli_as_uma):
    """``salloc -N1 srun --pty ...``: salloc's lines around the step's bytes of pty-9.txt."""
    typist = Typist(b"echo typed\r", raw)
    code, shown = slurm_cli_as_uma.on_terminal(
        "salloc", "-N1", "srun", "--pty", "bash", "--norc", "-c",
        'read line; echo "got $line"; stty size; tty -s && echo tty; exit 5', react=typist)
    job_id = SlurmJob.objects.get().job_id
    status, step = recorded("pty-9.txt")
    assert (code, shown) == (status, f"salloc: Granted job allocation {job_id}\r\n".encode() + step
                             + f"salloc: Relinquishing job allocation {job_id}\r\n".encode())


def _sleeping(marker: str) -> bool:
    """The task's ``sleep 30`` runs (so its shell's trap is set)."""
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if (Path(f"/proc/{pid}/cmdline").read_bytes() == b"sleep\x0030\x00"
                    and marker.encode() in Path(f"/proc/{pid}/environ").read_bytes()):
                return True
        except OSError:
            continue
    return False


def test_ctrl_c_is_delivered_by_task_0s_terminal(slurm_cli_as_uma, tmp_path):
    """pty-10.txt: Ctrl-C is a key like any other in raw mode; task 0's terminal echoes ``^C``
    and interrupts the task (its trap prints INT and exits 7)."""
    marker = f"PTY_TEST={tmp_path.name}"
    typist = Typist(b"\x03", lambda terminal: raw(terminal) and _sleeping(marker))
    code, shown = slurm_cli_as_uma.on_terminal(
        "srun", "-N1", "--pty", "bash", "--norc", "-c", 'trap "echo INT; exit 7" INT; sleep 30 & wait',
        react=typist, environ={"PTY_TEST": tmp_path.name})
    assert (code, shown) == recorded("pty-10.txt")


def test_only_task_0_is_on_the_terminal(slurm_cli_as_uma):
    """pty-11.txt: ``srun -N2 --pty``: task 1 runs too, its output is not srun's."""
    code, shown = slurm_cli_as_uma.on_terminal("srun", "-N2", "--pty", "sh", "-c", "echo task $SLURM_PROCID",
                                               react=lambda terminal, shown: None)
    assert (code, shown) == recorded("pty-11.txt")


def test_without_a_terminal_srun_says_so_and_runs_without_one():
    """srun-13.err: ``srun --pty true </dev/null``."""
    lines = (SRUN_ALONE_FIXTURES / "srun-13.err").read_text().splitlines()
    assert list(srun_shim.NO_TERMINAL) == lines[:2]
    with open(os.devnull) as nothing:
        assert srun_shim.window_size(nothing.fileno()) is None


def test_the_tasks_off_the_terminal_fail_in_one_line(slurm_cli_as_uma):
    """pty-12.txt: ``srun -n3 --pty``: only task 0 is on a terminal and shows its output; tasks 1-2's
    ``tty -s`` fails, which srun reports in one line for the node's two tasks, and exits 1."""
    code, shown = slurm_cli_as_uma.on_terminal("srun", "-n3", "--pty", "sh", "-c",
                                               "echo task $SLURM_PROCID; tty -s && echo tty",
                                               react=lambda terminal, shown: None)
    assert (code, shown) == recorded("pty-12.txt")
    job = SlurmJob.objects.get()
    assert (job.state, job.exit_code, job.num_nodes) == (JobState.FAILED, 1, 1)
