"""trainhub replays fixtures/22.05/part-order.sh: the order in which slurmctld weighs a job's partition limits
against each other and against its account and QOS, on the slurm-harness cluster of 4 nodes x 16 CPUs x 8 GPUs
(AccountingStorageEnforce=associations,limits,qos), batch given MaxNodes=2 MaxTime=5.

What Slurm did. EnforcePartLimits=NO: at submission a job over a limit pends with PartitionConfig; the main
scheduler's next run gives ``-N 3 -t 10`` and ``-N 5 -t 10`` PartitionNodeLimit (nodes before time, also ``-N 5
-t 10`` with MaxNodes unset: the partition's 4 nodes), ``-t 10`` PartitionTimeLimit. With batch DOWN, ``-t 10``
pends with PartitionDown at once (job_limits_check: node limits, then the partition's state, then its time
limit), ``-N 3`` and ``-N 5`` with PartitionConfig, then all PartitionDown (the main scheduler tests the state
first). EnforcePartLimits=ALL: a job over both is refused as ``Node count specification invalid``, with MaxNodes
unset too; an unknown account or QOS is refused as such whatever the node count or time (_job_create validates
the association and QOS before _valid_job_part).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from .part_replay import replay, script_steps

REAL = Path(__file__).parent / "fixtures" / "22.05" / "part-order"
#: The script's steps, in order, as words: part ARGS, enforce MODE, pend NAME ARGS, refuse NAME ARGS, cancel.
STEPS = script_steps(REAL.with_suffix(".sh"))
PENDING = [words[1] for words in STEPS if words[0] == "pend"]
REFUSED = [words[1] for words in STEPS if words[0] == "refuse"]


def real(name: str, suffix: str = "txt") -> str:
    return (REAL / f"{name}.{suffix}").read_text()


@pytest.fixture
def replayed(cast, now) -> dict[str, str]:
    return replay(cast, now, STEPS)


def test_the_replay_sets_the_limits_the_recording_had():
    """The premise: scontrol's view of batch after each part line, and EnforcePartLimits after each enforce."""
    assert [real(f"part-{index}") for index in range(1, 7)] == [
        "MaxNodes=2\nMaxTime=00:05:00\nState=UP\nTotalNodes=4\n",
        "MaxNodes=UNLIMITED\nMaxTime=00:05:00\nState=UP\nTotalNodes=4\n",
        "MaxNodes=2\nMaxTime=00:05:00\nState=DOWN\nTotalNodes=4\n",
        "MaxNodes=2\nMaxTime=00:05:00\nState=UP\nTotalNodes=4\n",
        "MaxNodes=2\nMaxTime=00:05:00\nState=UP\nTotalNodes=4\n",
        "MaxNodes=UNLIMITED\nMaxTime=00:05:00\nState=UP\nTotalNodes=4\n"]
    assert real("enforce-ALL") == "EnforcePartLimits       = ALL\n"


@pytest.mark.parametrize("name", PENDING)
def test_a_job_over_its_partition_is_accepted_and_pends_as_in_slurm(replayed, name):
    assert (replayed[f"sub-{name}"], replayed[f"sub-{name}.txt"]) == (real(f"sub-{name}", "err"),
                                                                       real(f"sub-{name}"))
    assert replayed[f"at-{name}"] == real(f"at-{name}")


@pytest.mark.parametrize("name", PENDING)
def test_the_main_schedulers_run_gives_the_reason_slurm_gave(replayed, name):
    assert replayed[f"built-{name}"] == real(f"built-{name}")


@pytest.mark.parametrize("name", REFUSED)
def test_enforce_part_limits_refuses_with_slurms_first_error(replayed, name):
    assert replayed[f"sub-{name}"] == real(f"sub-{name}", "err")
    assert real(f"sub-{name}") == ""
