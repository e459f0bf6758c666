"""trainhub replays fixtures/22.05/part-edge.sh: partition limits at their edges, on the slurm-harness cluster of 4
nodes x 16 CPUs x 8 GPUs (AccountingStorageEnforce=associations,limits,qos), gpu[1-2] a100,ib, gpu3 v100, gpu4 h100.

What Slurm did. EnforcePartLimits=ALL, batch MaxNodes=2 MaxTime=5: ``-N 5 -C bogus`` and ``-N 3 -C bogus`` are
refused as ``Node count specification invalid``, ``-t 10 -C bogus`` as ``Requested time limit is invalid``: the
partition's limits before the feature test. Batch DOWN as well: ``-t 10`` and ``-N 3`` refused as over the limits,
``-N 1 -t 1`` pends with PartitionDown before and after the main scheduler's run. A constraint's counts more than
the nodes having the feature (``-C a100*5``, more than the partition's 4 nodes too, and ``-N 1 -C a100*3``) are
refused as ``Requested node configuration is not available`` under NO and ALL: no partition limit. Under NO with
MaxNodes=2 MaxTime=5, a count from -n alone is no node limit: ``-n 40 -t 10`` (3 nodes) pends with PartitionConfig
then PartitionTimeLimit, ``-n 65 -t 10`` (more CPUs than the partition's 64) with PartitionConfig before and after.
"""

from __future__ import annotations

import pytest

from .part_replay import ACCEPTED_STEPS, FEATURES, Recording

PART = Recording.named("part-edge")


@pytest.fixture
def replayed(cast, now) -> dict[str, str]:
    return PART.replay(cast, now)


def test_the_replay_sets_the_limits_and_features_the_recording_had():
    """The premise: scontrol's view of batch after each part line, EnforcePartLimits after each enforce, the nodes'
    features after each features line (fixtures/22.05/part-edge: part-N, enforce-MODE, features-N)."""
    assert [PART.real(f"part-{index}") for index in range(1, 6)] == [
        "MaxNodes=2\nMaxTime=00:05:00\nState=UP\nTotalNodes=4\n",
        "MaxNodes=UNLIMITED\nMaxTime=UNLIMITED\nState=UP\nTotalNodes=4\n",
        "MaxNodes=2\nMaxTime=00:05:00\nState=UP\nTotalNodes=4\n",
        "MaxNodes=2\nMaxTime=00:05:00\nState=DOWN\nTotalNodes=4\n",
        "MaxNodes=UNLIMITED\nMaxTime=UNLIMITED\nState=UP\nTotalNodes=4\n"]
    assert (PART.real("enforce-ALL"), PART.real("enforce-NO")) == ("EnforcePartLimits       = ALL\n",
                                                                    "EnforcePartLimits       = NO\n")
    featured = "".join(f"{name} {features} {features}\n" for name, features in FEATURES.items())
    assert [PART.real(f"features-{index}") for index in (1, 2)] == [featured, featured]


def test_the_recording_has_both_kinds_of_case():
    assert PART.pending == ["n65-t10", "n40-t10", "all-down-ok"]
    assert PART.refused == ["a100x5", "N1-a100x3", "all-N5-bogus", "all-N3-bogus", "all-t10-bogus", "all-down-t10",
                       "all-down-N3", "all-a100x5", "all-N1-a100x3"]


@pytest.mark.parametrize("name", PART.pending)
def test_an_accepted_job_pends_as_in_slurm_before_and_after_the_main_schedulers_run(replayed, name):
    """fixtures/22.05/part-edge: sub-NAME (sbatch's output, stderr and exit status), at-NAME and built-NAME (squeue at
    submission and after the main scheduler's run)."""
    assert [replayed[step.format(name)] for step in ACCEPTED_STEPS] == [PART.recorded(step, name)
                                                                        for step in ACCEPTED_STEPS]


@pytest.mark.parametrize("name", PART.refused)
def test_a_refused_job_gets_slurms_first_error(replayed, name):
    """fixtures/22.05/part-edge: sub-NAME.err (sbatch's message and exit status), nothing on its stdout."""
    assert (replayed[f"sub-{name}"], PART.recorded("sub-{}.txt", name)) == (PART.recorded("sub-{}", name), "")
