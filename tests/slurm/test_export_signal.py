"""sbatch --export and --signal as the agent applies them (trainhub.slurm.jobenv)."""

import signal

from trainhub.slurm.jobenv import SignalPlan, export_environment, signal_plan

SUBMISSION = {"HOME": "/home/uma", "PATH": "/usr/bin", "LANG": "C.UTF-8"}


def test_export_all_none_and_lists():
    assert export_environment("", SUBMISSION) == SUBMISSION
    assert export_environment("ALL", SUBMISSION) == SUBMISSION
    assert export_environment("NONE", SUBMISSION) == {} == export_environment("NIL", SUBMISSION)
    assert export_environment("PATH,EPOCHS=3", SUBMISSION) == {"PATH": "/usr/bin", "EPOCHS": "3"}
    assert export_environment("ALL,HOME=/scratch", SUBMISSION) == {**SUBMISSION, "HOME": "/scratch"}
    assert export_environment("MISSING", SUBMISSION) == {}


def test_signal_plans_as_stored_by_sbatch():
    assert signal_plan("") is None
    assert signal_plan("B:USR1@120") == SignalPlan(signal.SIGUSR1, 120, batch_only=True)
    assert signal_plan("USR2@60") == SignalPlan(signal.SIGUSR2, 60, batch_only=False)
    assert signal_plan("RB:10@90") == SignalPlan(10, 90, batch_only=True)
    assert signal_plan("R:TERM@5") == SignalPlan(signal.SIGTERM, 5, batch_only=False)
