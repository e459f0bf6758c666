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


DIST_OUT = STEPS_FIXTURES.parent / "srun-dist" / "out-1.txt"


def _dist_section(command: str) -> list[str]:
    """The lines of fixtures/22.05/srun-dist/out-1.txt's ``== COMMAND`` section."""
    text = DIST_OUT.read_text()
    return text.split(f"\n== {command}\n", 1)[1].split("\n== ", 1)[0].splitlines()


def test_an_invalid_distribution_is_refused_by_srun_itself(capsys, monkeypatch):
    """srun-dist/out-1.txt: ``srun -m bogus true`` prints Slurm's line and exits 255, asking nothing."""
    monkeypatch.setenv("TRAINHUB_STEP_CREDENTIAL", "x")
    monkeypatch.setenv("TRAINHUB_URL", "http://127.0.0.1:9")
    assert srun.main(["-m", "bogus", "true"]) == 255
    assert capsys.readouterr().err.splitlines() + ["rc=255"] == _dist_section("srun -m bogus")


def test_the_distribution_reaches_the_tasks_and_srun_v():
    """srun-dist/out-1.txt: SLURM_DISTRIBUTION is -m as given, ``plane`` for plane=N; srun -v lists it."""
    for given, shown in (("cyclic", "cyclic"), ("plane=2", "plane"), ("cyclic:block", "cyclic:block")):
        environment = srun.own_environment(srun.parse(["-m", given, "true"]), {})
        recorded = next(line for line in _dist_section(f"srun -m {given}") if line.startswith("0: ")).split()[6]
        assert environment["SLURM_DISTRIBUTION"] == shown == recorded
    assert "SLURM_DISTRIBUTION" not in srun.own_environment(srun.parse(["true"]), {})
    options = srun.allocation_options(srun.parse(["-v", "-m", "cyclic", "true"]), {
        "SLURM_JOB_NODELIST": "gpu[1-2]", "SLURM_JOB_ID": "1", "SLURM_JOB_NAME": "n2n5"})
    assert ("distribution", "cyclic") in options
    assert "srun: distribution        : cyclic" in srun.defined_options(options)
    assert "srun: distribution        : cyclic" in _dist_section("srun -v -m cyclic")


def test_srun_inside_a_job_asks_for_its_default_distribution_and_srun_alone_does_not(monkeypatch, tmp_path):
    """srun-dist/out-1.txt (inside a batch job: ``block``) and srun-alone-block.txt (none): the control
    plane, which lays the step out, names the default for the tasks when srun says it is inside a job."""
    sent = []

    def create(client, body):
        sent.append(body)
        raise srun.Refused("stop here")

    monkeypatch.setattr(srun, "create", create)
    monkeypatch.setenv("TRAINHUB_STEP_CREDENTIAL", "x")
    monkeypatch.setenv("TRAINHUB_URL", "http://127.0.0.1:9")
    assert srun.main(["true"]) == 1
    monkeypatch.setenv(srun.COMPLETION, str(tmp_path / "completion"))
    assert srun.main(["-m", "cyclic", "true"]) == 1
    assert [(body["inAllocation"], body.get("distribution")) for body in sent] == [(True, None), (False, "cyclic")]


PLANE = STEPS_FIXTURES.parent / "srun-plane"


def _plane_section(command: str) -> list[str]:
    """The lines of fixtures/22.05/srun-plane/out-1.txt's ``== COMMAND`` section."""
    text = (PLANE / "out-1.txt").read_text()
    return text.split(f"\n== {command}\n", 1)[1].split("\n== ", 1)[0].splitlines()


def test_a_plane_gives_the_tasks_its_size():
    """srun-plane/out-1.txt: ``-m plane=N`` (or --distribution=plane=N) sets SLURM_DIST_PLANESIZE=N beside
    SLURM_DISTRIBUTION=plane; another distribution none, nor the batch script. srun-alone-plane.txt:
    srun outside a job as well (its step launcher gets -m)."""
    from trainhub.cli import srun as srun_cli

    for command in ("-m plane=2", "-m plane=3", "--distribution=plane=4", "-m block"):
        environment = srun.own_environment(srun.parse([*command.split(), "true"]), {})
        recorded = {tuple(line.split()[4:]) for line in _plane_section(f"srun {command}")}
        assert recorded == {(environment["SLURM_DISTRIBUTION"], environment.get("SLURM_DIST_PLANESIZE", "unset"))}
    assert (PLANE / "out-1.txt").read_text().startswith("batch script: SLURM_DIST_PLANESIZE=unset\n")
    _, step = srun_cli.split(["-A", "physics", "-p", "batch", "-N", "2", "-n", "5", "-m", "plane=2", "-l", "sh"])
    environment = srun.own_environment(srun.parse(step[1:]), {})
    alone = {tuple(line.split()[4:]) for line in (PLANE / "srun-alone-plane.txt").read_text().splitlines()}
    assert alone == {(environment["SLURM_DISTRIBUTION"], environment["SLURM_DIST_PLANESIZE"])} == {("plane", "2")}


def test_a_plane_without_its_size_is_refused_in_sruns_two_lines(capsys, monkeypatch):
    """srun-plane/out-1.txt: ``-m plane`` and ``-m plane=2:block``."""
    monkeypatch.setenv("TRAINHUB_STEP_CREDENTIAL", "x")
    monkeypatch.setenv("TRAINHUB_URL", "http://127.0.0.1:9")
    for given in ("plane", "plane=2:block"):
        assert srun.main(["-m", given, "true"]) == 255
        assert capsys.readouterr().err.splitlines() == _plane_section(f"srun -m {given}")
