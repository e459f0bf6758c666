"""trainhub replays fixtures/22.05/bad-input.sh (issue 19): what squeue and sbatch say to input they refuse.

- ``squeue -t`` with a word that is no job state (``bogus``; ``all`` beside another state) prints two error
  lines and a blank one, lists nothing and exits 1; lower-case codes are states (``-t pd,r``). Over REST
  it is a 400 whose message is the two lines (the page shows them above its form).
- ``sbatch -N 5 -C bogus`` on the 4-node partition: the feature is refused before the node count, which
  alone would pend (finished-jobs nodes5).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from django.contrib.auth import get_user_model

from trainhub.common.errors import ApiError
from trainhub.slurm import reports
from trainhub.slurm.services.jobs import Submission, job_submit

from .conftest import run_pass
from .test_real_slurm import harness_cluster

REAL = Path(__file__).parent / "fixtures" / "22.05" / "bad-input"
URL = "/v1/projects/alpha/locations/us-central1/slurmClusters/harness/squeue"


def error_lines(name: str) -> str:
    """The recording's stderr without its blank line and exit status."""
    return (REAL / f"{name}.err").read_text().removesuffix("\nrc=1\n").rstrip("\n")


@pytest.mark.parametrize(("name", "states"), [("squeue-bogus", "bogus"), ("squeue-all-pd", "all,PD"),
                                              ("squeue-pd-bogus", "PD,bogus")])
def test_squeue_refuses_a_state_it_does_not_know_with_its_lines(cast, now, api, name, states):
    harness_cluster(cast, now)
    answer = api("alice").get(URL, {"states": states})
    assert answer.status_code == 400
    assert answer.json()["error"]["message"] == error_lines(name)
    assert (REAL / f"{name}.txt").read_text() == ""


def test_lower_case_codes_are_states(cast, now):
    cluster, _ = harness_cluster(cast, now)
    job_submit(cluster=cluster, user=get_user_model().objects.get(username="alice"), now=now, submission=Submission(
        argv=("-A", "physics", "-p", "batch", "-N", "5", "--wrap", "true"), alloc_node="localhost"))
    run_pass(cluster, now)
    shown = reports.squeue(cluster, now=now, states="pd,r").text
    recorded = (REAL / "squeue-lower.txt").read_text()
    assert shown.splitlines()[1].split()[3:] == recorded.splitlines()[1].split()[3:]  # its user, state, nodes, reason


@pytest.mark.parametrize("name", ["sbatch-n5-bogus", "sbatch-n5-a100"])
def test_a_feature_no_node_has_is_refused_before_a_count_over_the_partition(cast, now, name):
    cluster, _ = harness_cluster(cast, now)
    feature = name.rsplit("-", 1)[1]
    with pytest.raises(ApiError) as refused:
        job_submit(cluster=cluster, user=get_user_model().objects.get(username="alice"), now=now,
                   submission=Submission(argv=("-A", "physics", "-p", "batch", "-N", "5", "-C", feature, "-o",
                                               "/dev/null", "--wrap", "true"), alloc_node="localhost"))
    assert refused.value.message + "\n" == (REAL / f"{name}.err").read_text().removesuffix("rc=1\n")
