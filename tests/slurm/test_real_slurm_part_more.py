"""trainhub replays fixtures/22.05/part-more.sh: more partition limits at their edges, on the slurm-harness cluster
of 4 nodes x 16 CPUs x 8 GPUs (AccountingStorageEnforce=associations,limits,qos), gpu[1-2] a100,ib, gpu3 v100,
gpu4 h100.

What Slurm did. Batch MaxNodes=2 MaxTime=5: a count from -n alone is no node limit, but the node test is confined to
MaxNodes: ``-n 40`` alone (3 nodes of 16 CPUs) is refused as ``Requested node configuration is not available`` under
EnforcePartLimits=NO and ALL. Under ALL ``-n 40 -t 10`` is refused as ``Requested time limit is invalid`` (the
partition's limits before the node test), ``-n 65 -t 10``, more CPUs than the partition's 64, as ``More processors
requested than permitted`` (_part_access_check's CPU test, before the node counts and the time). Batch
MaxNodes=UNLIMITED MaxTime=INFINITE, a constraint's counts beside -N: ``-N 5 -C a100*5`` is a partition limit first
(-N over the 4 nodes), pending with PartitionConfig then PartitionNodeLimit under NO, refused as ``Node count
specification invalid`` under ALL; held, ``-H -C a100*5`` is accepted under NO and ALL and shows JobHeldUser before
and after (a held job is not tested against the nodes); ``-N 2 -C a100*2`` pends with None at once, then runs on
gpu[1-2] and ends (``--wrap true``) before squeue's second look, which shows nothing.
"""

from __future__ import annotations

import pytest

from .part_replay import ACCEPTED_STEPS, FEATURES, Recording

PART = Recording.named("part-more")


@pytest.fixture
def replayed(cast, now) -> dict[str, str]:
    return PART.replay(cast, now)


def test_the_replay_sets_the_limits_and_features_the_recording_had():
    """The premise: scontrol's view of batch after each part line, EnforcePartLimits after each enforce, the nodes'
    features after each features line (fixtures/22.05/part-more: part-N, enforce-MODE, features-N)."""
    limited, unlimited = ("MaxNodes=2\nMaxTime=00:05:00\nState=UP\nTotalNodes=4\n",
                          "MaxNodes=UNLIMITED\nMaxTime=UNLIMITED\nState=UP\nTotalNodes=4\n")
    assert [PART.real(f"part-{index}") for index in range(1, 5)] == [limited, unlimited, limited, unlimited]
    assert (PART.real("enforce-ALL"), PART.real("enforce-NO")) == ("EnforcePartLimits       = ALL\n",
                                                                    "EnforcePartLimits       = NO\n")
    featured = "".join(f"{name} {features} {features}\n" for name, features in FEATURES.items())
    assert [PART.real(f"features-{index}") for index in (1, 2)] == [featured, featured]


def test_the_recording_has_both_kinds_of_case():
    assert PART.pending == ["N5-a100x5", "H-a100x5", "N2-a100x2", "all-H-a100x5", "all-N2-a100x2"]
    assert PART.refused == ["n40", "all-n40-t10", "all-n65-t10", "all-n40", "all-N5-a100x5"]


@pytest.mark.parametrize("name", PART.pending)
def test_an_accepted_job_pends_as_in_slurm_before_and_after_the_main_schedulers_run(replayed, name):
    """fixtures/22.05/part-more: sub-NAME (sbatch's output, stderr and exit status), at-NAME and built-NAME (squeue
    at submission and after the main scheduler's run: nothing for a job that ran, ``true`` having ended)."""
    assert [replayed[step.format(name)] for step in ACCEPTED_STEPS] == [PART.recorded(step, name)
                                                                        for step in ACCEPTED_STEPS]


@pytest.mark.parametrize("name", PART.refused)
def test_a_refused_job_gets_slurms_first_error(replayed, name):
    """fixtures/22.05/part-more: sub-NAME.err (sbatch's message and exit status), nothing on its stdout."""
    assert (replayed[f"sub-{name}"], PART.recorded("sub-{}.txt", name)) == (PART.recorded("sub-{}", name), "")
