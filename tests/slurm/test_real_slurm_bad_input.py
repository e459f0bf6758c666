"""trainhub replays fixtures/22.05/bad-input.sh (issue 19): what squeue and sbatch say to input they refuse.

- ``squeue -t`` with a word that is no job state (``bogus``; ``all`` beside another state) prints two error
  lines and a blank one, lists nothing and exits 1; lower-case codes are states (``-t pd,r``). Over REST
  it is a 400 whose message is the two lines (the page shows them above its form).
- ``sbatch -N 5 -C bogus`` (and ``-C a100``: the harness's nodes have no features) on the 4-node
  partition: the feature is refused before the node count, which alone pends (finished-jobs nodes5); each
  refusal takes a job id, so the plain ``-N 5`` after them is job 3.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model

from trainhub.common.errors import ApiError
from trainhub.slurm import reports
from trainhub.slurm.services.jobs import Submission, job_submit, submitted_message

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


def submission(*options: str) -> Submission:
    return Submission(argv=("-A", "physics", "-p", "batch", "-N", "5", *options, "-o", "/dev/null", "--wrap", "true"),
                      alloc_node="localhost")


def submit(cluster, asked: Submission):
    return job_submit(cluster=cluster, user=get_user_model().objects.get(username="alice"), now=NOW,
                      submission=asked)


NOW = dt.datetime(2026, 12, 6, 5, 20, tzinfo=dt.UTC)


def test_features_no_node_has_are_refused_before_the_count_and_lower_case_codes_are_states(cast):
    """sbatch-n5-bogus, -a100: refused, each taking a job id as slurmctld's record does; sbatch-n5: job 3,
    pending PartitionNodeLimit, which ``squeue -t pd,r`` lists."""
    cluster, _ = harness_cluster(cast, NOW)
    for name in ("sbatch-n5-bogus", "sbatch-n5-a100"):
        with pytest.raises(ApiError) as refused:
            submit(cluster, submission("-C", name.rsplit("-", 1)[1]))
        assert refused.value.message + "\n" == (REAL / f"{name}.err").read_text().removesuffix("rc=1\n")
    plain = submission()
    assert submitted_message(submit(cluster, plain), plain) + "\n" == (REAL / "sbatch-n5.txt").read_text()
    run_pass(cluster, NOW)
    assert reports.squeue(cluster, now=NOW, states="pd,r").text == (REAL / "squeue-lower.txt").read_text()
