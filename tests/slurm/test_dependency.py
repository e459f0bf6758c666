"""sbatch --dependency: the pure rules (trainhub.slurm.dependency) and what a pass does with them."""

from __future__ import annotations

import datetime as dt

import pytest

from trainhub.slurm.dependency import DependencyError, JobFacts, evaluate, parse_dependency
from trainhub.slurm.models import SlurmJob
from trainhub.slurm.services.jobs import Submission, job_submit

from .conftest import make_job, run_pass


def facts(**states):
    known = {int(name[1:]): JobFacts(int(name[1:]), state) for name, state in states.items()}
    return known.get


def test_each_job_id_becomes_one_unfulfilled_item():
    assert parse_dependency("afterany:2:4,after:1") == (
        "afterany:2(unfulfilled),afterany:4(unfulfilled),after:1(unfulfilled)")
    assert parse_dependency("afternotok:2?afterok:4") == "afternotok:2(unfulfilled)?afterok:4(unfulfilled)"
    assert parse_dependency("singleton") == "singleton(unfulfilled)"


@pytest.mark.parametrize("text", ["afterok:2,afterany:3?after:4", "afterok", "before:2", "afterok:x", "afterok:5"])
def test_malformed_dependencies_are_refused(text):
    with pytest.raises(DependencyError):
        parse_dependency(text, job_id=5)


def test_a_satisfied_item_leaves_an_and_list():
    status = evaluate(parse_dependency("afterany:2:4,after:1"), facts(j1="RUNNING", j2="PENDING", j4="PENDING"))
    assert (status.text, status.reason) == ("afterany:2(unfulfilled),afterany:4(unfulfilled)", "Dependency")
    status = evaluate(status.text, facts(j2="FAILED", j4="COMPLETED"))
    assert (status.text, status.reason) == ("", None)


@pytest.mark.parametrize("kind, state, expected", [
    ("afterok", "COMPLETED", None), ("afterok", "FAILED", "DependencyNeverSatisfied"),
    ("afterok", "CANCELLED", "DependencyNeverSatisfied"), ("afternotok", "COMPLETED", "DependencyNeverSatisfied"),
    ("afternotok", "TIMEOUT", None), ("afternotok", "CANCELLED", None), ("afterany", "NODE_FAIL", None),
    ("after", "RUNNING", None), ("after", "PENDING", "Dependency"), ("afterok", "RUNNING", "Dependency"),
])
def test_each_kind_follows_the_other_jobs_state(kind, state, expected):
    assert evaluate(parse_dependency(f"{kind}:2"), facts(j2=state)).reason == expected


def test_an_or_list_needs_one_item_and_fails_only_when_all_fail():
    text = parse_dependency("afternotok:2?afterok:4")
    assert evaluate(text, facts(j2="COMPLETED", j4="RUNNING")).reason == "Dependency"
    assert evaluate(text, facts(j2="COMPLETED", j4="COMPLETED")).text == ""
    assert evaluate(text, facts(j2="COMPLETED", j4="FAILED")).reason == "DependencyNeverSatisfied"


def test_sbatch_refuses_a_dependency_on_an_unknown_job(accounts, cast, now):
    from trainhub.common.errors import ApiError

    with pytest.raises(ApiError) as caught:
        job_submit(cluster=accounts, user=cast["uma"], now=now,
                   submission=Submission(argv=("--dependency=afterok:99", "--wrap", "x")))
    assert caught.value.message == "sbatch: error: Batch job submission failed: Job dependency problem"


def test_a_pass_releases_a_job_whose_dependency_is_satisfied(accounts, cast, now):
    first = make_job(accounts, now=now, name="a")
    job = job_submit(cluster=accounts, user=cast["uma"], now=now,
                     submission=Submission(argv=(f"--dependency=afterok:{first.job_id}", "--wrap", "x")))
    assert (job.reason, job.dependency) == ("Dependency", f"afterok:{first.job_id}(unfulfilled)")
    SlurmJob.objects.filter(pk=first.pk).update(state="COMPLETED", end_time=now)
    later = now + dt.timedelta(seconds=30)
    run_pass(accounts, later)
    job.refresh_from_db()
    assert (job.dependency, job.begin_time, job.accrue_time) == ("", later, later)
    assert job.reason != "Dependency"


def test_a_never_satisfied_dependency_keeps_the_job_pending_with_its_reason(accounts, cast, now):
    first = make_job(accounts, now=now, name="a")
    job = job_submit(cluster=accounts, user=cast["uma"], now=now,
                     submission=Submission(argv=(f"--dependency=afternotok:{first.job_id}", "--wrap", "x")))
    SlurmJob.objects.filter(pk=first.pk).update(state="COMPLETED", end_time=now)
    run_pass(accounts, now + dt.timedelta(seconds=30))
    job.refresh_from_db()
    assert (job.state, job.reason, job.dependency) == (
        "PENDING", "DependencyNeverSatisfied", f"afternotok:{first.job_id}(failed)")


def test_a_singleton_waits_for_the_earlier_job_of_its_name(accounts, cast, now):
    first = make_job(accounts, now=now, name="train", user="uma")
    job = job_submit(cluster=accounts, user=cast["uma"], now=now,
                     submission=Submission(argv=("--dependency=singleton", "-J", "train", "--wrap", "x")))
    run_pass(accounts, now + dt.timedelta(seconds=1))
    job.refresh_from_db()
    assert (job.reason, job.dependency) == ("Dependency", "singleton(unfulfilled)")
    SlurmJob.objects.filter(pk=first.pk).update(state="CANCELLED", end_time=now)
    run_pass(accounts, now + dt.timedelta(seconds=2))
    job.refresh_from_db()
    assert job.dependency == ""
