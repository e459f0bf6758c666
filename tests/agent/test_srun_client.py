"""The srun a batch script runs (trainhub.agent.srun): its options, Slurm's task error lines, and
that it refuses to run outside a job."""

import subprocess
import sys
from pathlib import Path

import pytest

from trainhub.agent import srun


def test_options_stop_at_the_command_which_keeps_its_own_options():
    options = srun.parse(["-l", "-N2", "--ntasks=4", "--gres=gpu:a100:2", "sh", "-c", "echo -n x"])
    assert (options.label, options.nodes, options.ntasks, options.gres) == (True, 2, 4, 2)
    assert options.command == ["sh", "-c", "echo -n x"]
    assert srun.parse(["--", "hostname"]).command == ["hostname"]
    assert srun.parse(["--gres=gpu", "--ntasks-per-node", "2", "true"]).gres == 1


@pytest.mark.parametrize("argv", [[], ["-l"], ["--gres=mem:4", "true"], ["--bogus", "true"]])
def test_bad_options_exit_with_a_usage_error(argv, capsys):
    with pytest.raises(SystemExit) as ended:
        srun.parse(argv)
    assert ended.value.code == 2 and capsys.readouterr().err.startswith("usage: srun")


def test_failed_tasks_are_reported_as_slurm_words_them():
    assert srun.task_messages([[0, "gpu1", 3, 0], [1, "gpu2", 0, 15], [3, "gpu2", 0, 9]]) == [
        "srun: error: gpu1: task 0: Exited with exit code 3", "srun: error: gpu2: task 1: Terminated",
        "srun: error: gpu2: task 3: Killed"]


def test_tasks_of_a_node_that_failed_alike_share_one_line():
    """fixtures/22.05/srun-alone/pty-12.txt: ``srun: error: gpu1: tasks 1-2: Exited with exit code 1``."""
    assert srun.task_messages([[2, "gpu1", 1, 0], [1, "gpu1", 1, 0], [4, "gpu1", 1, 0], [3, "gpu1", 2, 0]]) == [
        "srun: error: gpu1: tasks 1-2,4: Exited with exit code 1", "srun: error: gpu1: task 3: Exited with exit code 2"]


def test_outside_a_job_srun_says_why_and_fails():
    ended = subprocess.run([sys.executable, "-S", srun.__file__, "hostname"], capture_output=True, text=True,
                           env={"PATH": "/usr/bin:/bin"}, check=False)
    assert ended.returncode == 1
    assert ended.stderr.startswith("srun: error: no job step credential")


@pytest.mark.django_db
def test_srun_reaches_the_control_plane_at_the_agents_url_unless_told_another(nodes, tmp_path):
    from tests.agent.harness import join_nodes
    from trainhub.agent.main import _parser, agents_for

    join_nodes(tmp_path, [nodes["a100"].nodes.order_by("name").first()])
    base = ["run", "--state-dir", str(tmp_path), "--runtime", "subprocess", "--no-isolate"]
    assert agents_for(_parser().parse_args(base))[0].slurm.srun_url == "http://testserver"
    told = agents_for(_parser().parse_args([*base, "--srun-url", "https://10.0.0.1:8443"]))
    assert told[0].slurm.srun_url == "https://10.0.0.1:8443"


class OneAnswer:
    """The control plane's answers to srun's follow: the step's lines once, then nothing new."""

    def __init__(self, lines):
        self.lines = lines

    def call(self, method, path, body=None):
        lines, self.lines = self.lines, []
        return {"state": "COMPLETED", "lines": lines, "next": 400}


def test_srun_writes_the_tasks_stdout_and_stderr_lines_into_a_shared_file_in_their_order(tmp_path, monkeypatch):
    """In a batch script whose output file takes both streams, srun's stdout and stderr are one file:
    each line reaches it before a line of the other stream, so the file keeps the step's order."""
    import io
    import os

    fd = os.open(tmp_path / "slurm-1.out", os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    for name in ("stdout", "stderr"):  # both block-buffered, as a pipe or file makes them
        monkeypatch.setattr(sys, name, io.TextIOWrapper(io.FileIO(fd, "w", closefd=False), write_through=False))
    lines = [[0, stream, f"{stream} {i}"] for i in range(200) for stream in ("stdout", "stderr")]
    srun.follow(OneAnswer(lines), 0, label=False, num_tasks=1, poll=0)
    os.close(fd)
    assert (tmp_path / "slurm-1.out").read_text().splitlines() == [text for _, _, text in lines]


class Busy:
    """Step creation answers: busy while ``ended`` lists how many of the job's steps had ended, then created."""

    def __init__(self, ended):
        self.ended = list(ended)

    def call(self, method, path, body=None):
        if self.ended:
            return {"jobId": 3, "retry": True, "reason": "Requested nodes are busy", "stepsEnded": self.ended.pop(0)}
        return {"stepId": 4, "jobId": 3, "nodeList": "a4-0", "numTasks": 1}


def test_a_waiting_srun_says_still_disabled_each_time_another_step_ended(capsys):
    """fixtures/22.05/release/out-3.txt: three overlapping steps ended while step 4 waited for step 0."""
    assert srun.create(Busy([0, 0, 1, 1, 2, 3, 3]), {}, poll=0, max_poll=0)["stepId"] == 4
    recorded = (Path(__file__).parents[1] / "slurm" / "fixtures" / "22.05" / "release" / "out-3.txt").read_text()
    assert capsys.readouterr().err == "".join(line + "\n" for line in recorded.splitlines()
                                              if line.startswith("srun: "))
