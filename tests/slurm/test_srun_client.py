"""srun's own side of step creation (trainhub.agent.srun, standard library only): the lines it
prints while its step waits for other steps, and the node count it refuses before asking."""

from tests.slurm.conftest import STEPS_FIXTURES
from trainhub.agent import srun


class Answers:
    """A control plane that makes the step wait ``waits`` times, then creates it."""

    def __init__(self, waits: int):
        self.waits = waits
        self.calls = 0
        self.times = []

    def call(self, method, path, body=None):
        self.calls += 1
        self.times.append(body["time"])
        if self.calls <= self.waits:
            return {"jobId": 1, "retry": True, "reason": "Requested nodes are busy"}
        return {"jobId": 1, "stepId": 1, "nodeList": "a4-0", "numTasks": 1}


def recorded(name: str) -> list[str]:
    return [line for line in (STEPS_FIXTURES / name).read_text().splitlines() if line.startswith("srun: ")]


def test_a_waiting_step_prints_slurms_two_lines_once_each(capsys):
    """fixtures/22.05/steps/out-1.txt (job 1): one line when it starts waiting, one when created."""
    answers = Answers(waits=3)
    assert srun.create(answers, {"argv": ["hostname"]}, poll=0.001, max_poll=0.001)["stepId"] == 1
    assert answers.calls == 4
    assert answers.times == sorted(answers.times) and len(set(answers.times)) == 4  # each request's own time
    assert capsys.readouterr().err.splitlines() == recorded("out-1.txt")


def test_a_step_created_at_once_prints_nothing(capsys):
    assert srun.create(Answers(waits=0), {"argv": ["hostname"]}, poll=0)["stepId"] == 1
    assert capsys.readouterr().err == ""


def test_more_nodes_than_the_job_has_are_refused_by_srun_itself(capsys, monkeypatch):
    """fixtures/22.05/steps/out-5.txt (job 5, one node): ``srun -N 2 hostname``."""
    monkeypatch.setenv("TRAINHUB_STEP_CREDENTIAL", "x")
    monkeypatch.setenv("TRAINHUB_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("SLURM_JOB_NUM_NODES", "1")
    assert srun.main(["-N", "2", "hostname"]) == 1
    assert capsys.readouterr().err.splitlines() == recorded("out-5.txt")[-1:]
