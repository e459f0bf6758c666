"""trainhub's srun replays fixtures/22.05/cpu-bind.sh: ``srun --cpu-bind=...`` inside a batch job on a
Slurm cluster that binds no task to CPUs (TaskPlugin=task/none; trainhub's agent binds none either).
srun says so, checks the value as 22.05 does, and gives every task the SLURM_CPU_BIND* variables
22.05 gives, its quirks included (``--cpu-bind=cores`` is ``SLURM_CPU_BIND=quiet,corescores``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainhub.agent import srun

REAL = Path(__file__).parent / "fixtures" / "22.05" / "cpu-bind" / "out-1.txt"
#: srun's lines while another step still held the CPUs: timing, not --cpu-bind.
RETRYING = ("srun: Job 1 step creation temporarily disabled", "srun: Step created for job 1")


def sections() -> dict[str, list[str]]:
    """out-1.txt's ``== HEADER`` sections: HEADER -> its lines (sorted in the job; retries left out)."""
    parts = REAL.read_text().split("== ")[1:]
    return {part.split("\n", 1)[0]: [line for line in part.split("\n", 1)[1].splitlines()
                                     if not line.startswith(RETRYING)] for part in parts}


def given(header: str) -> str:
    return header.removeprefix("srun --cpu-bind=")


def variables(lines: list[str]) -> list[str]:
    return sorted({line for line in lines if line.startswith("SLURM_CPU_BIND")})


ACCEPTED = {header: lines for header, lines in sections().items() if "exit 0" in lines}
REFUSED = {header: lines for header, lines in sections().items() if "exit 1" in lines and "help" not in header}


def test_the_recording_has_every_case():
    assert len(ACCEPTED) == 18 and len(REFUSED) == 3


@pytest.mark.parametrize("header", sorted(ACCEPTED))
def test_each_task_gets_the_variables_slurm_gave(header):
    lines = ACCEPTED[header]
    environment = srun.own_environment(srun.parse([f"--cpu-bind={given(header)}", "env"]), {})
    assert sorted(f"{name}={value}" for name, value in environment.items()
                  if name.startswith("SLURM_CPU_BIND")) == variables(lines)
    assert srun.NO_CPU_BINDING in lines


def test_slurm_cpu_bind_in_the_environment_is_taken_as_the_option():
    lines = sections()["SLURM_CPU_BIND=verbose,sockets srun"]
    environment = srun.own_environment(srun.parse(["env"]), {"SLURM_CPU_BIND": "verbose,sockets"})
    assert sorted(f"{name}={value}" for name, value in environment.items()
                  if name.startswith("SLURM_CPU_BIND")) == variables(lines)


def test_without_cpu_bind_no_variable_is_set():
    assert sections()["srun (no --cpu-bind)"] == []
    assert not any(name.startswith("SLURM_CPU_BIND") for name in srun.own_environment(srun.parse(["env"]), {}))


@pytest.fixture
def in_a_job(monkeypatch):
    monkeypatch.setenv("TRAINHUB_STEP_CREDENTIAL", "credential")
    monkeypatch.setenv("TRAINHUB_URL", "http://127.0.0.1:9")
    monkeypatch.delenv("SLURM_CPU_BIND", raising=False)


@pytest.mark.parametrize("header", sorted(REFUSED))
def test_a_value_slurm_refuses_is_refused_with_its_lines(header, in_a_job, capsys):
    code = srun.main([f"--cpu-bind={given(header)}", "env"])
    out, err = capsys.readouterr()
    assert (code, out, sorted(err.splitlines())) == (1, "", [line for line in REFUSED[header] if line != "exit 1"])


def test_help_says_binding_is_not_supported_on_stdout_alone(in_a_job, capsys):
    code = srun.main(["--cpu-bind=help", "true"])
    out, err = capsys.readouterr()
    recorded = sections()
    assert (code, out.splitlines(), err) == (1, recorded["srun --cpu-bind=help, stdout"][:-1], "")
    assert recorded["srun --cpu-bind=help, stderr"] == []
