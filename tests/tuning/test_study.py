"""A study runs its trials as CustomJobs: parallel slots, trial arguments, measurements, failure
limit, completion and cancel. Trials are finished the way the agent finishes a job; the study
advances on the jobs' state-change signals (their on_commit callbacks are executed)."""

import pytest

from tests.conftest import later
from tests.tuning.helpers import (
    args_of,
    categorical,
    discrete,
    double,
    finish_job,
    hypertune_reports,
    integer,
    study,
    tuning_body,
)
from trainhub.jobs import services as job_services
from trainhub.jobs import states
from trainhub.jobs.models import Replica
from trainhub.scheduling.services import scheduler_pass
from trainhub.tuning import services
from trainhub.tuning.models import HyperparameterTuningJob
from trainhub.tuning.render import best_trial


@pytest.fixture
def create(cast, nodes, now, django_capture_on_commit_callbacks):
    def create_job(body):
        with django_capture_on_commit_callbacks(execute=True):
            return services.tuning_job_create(project=cast["alpha"], location="us-central1", user=cast["uma"],
                                              body=body, now=now)
    return create_job


@pytest.fixture
def finish(django_capture_on_commit_callbacks):
    def finish_trial(trial, moment, **kwargs):
        with django_capture_on_commit_callbacks(execute=True):
            finish_job(trial.custom_job, moment, **kwargs)
        trial.refresh_from_db()
        return trial
    return finish_trial


def live_trials(job):
    return [t for t in job.trials.select_related("custom_job") if not t.is_final]


def test_it_starts_parallel_trial_count_trials_with_their_parameters_appended(create):
    job = create(tuning_body(study(integer("layers", 1, 3), categorical("optimizer", "sgd", "adam"),
                                   algorithm="GRID_SEARCH"), max_trials=5, parallel=2))
    trials = list(job.trials.select_related("custom_job"))
    assert [t.number for t in trials] == [1, 2]
    assert job.state == states.PENDING
    first = trials[0].custom_job
    assert args_of(first) == ["train.py", "--layers=1", "--optimizer=sgd"]
    assert args_of(trials[1].custom_job) == ["train.py", "--layers=1", "--optimizer=adam"]
    assert first.trial_id == "1" and first.owner == job.owner_key
    assert trials[0].parameters == [{"parameterId": "layers", "value": 1}, {"parameterId": "optimizer", "value": "sgd"}]


def test_a_finished_trial_frees_its_slot_for_the_next(create, finish, now):
    job = create(tuning_body(study(integer("layers", 1, 4), algorithm="GRID_SEARCH"), max_trials=4, parallel=2))
    first = job.trials.get(number=1)
    finish(first, later(now, 10), reports=hypertune_reports("score", [(1, 0.5)]))
    assert first.state == "SUCCEEDED"
    job.refresh_from_db()
    assert [t.number for t in live_trials(job)] == [2, 3]
    assert job.state == states.RUNNING


def test_trials_never_exceed_parallel_trial_count(create, finish, now):
    job = create(tuning_body(study(double("x", 0, 1), algorithm="RANDOM_SEARCH"), max_trials=6, parallel=3))
    moment = now
    while not job.is_terminal:
        assert len(live_trials(job)) <= 3
        moment = later(moment, 5)
        finish(live_trials(job)[0], moment, reports=hypertune_reports("score", [(1, 1.0)]))
        job.refresh_from_db()
    assert job.trials.count() == 6 and job.state == states.SUCCEEDED


def test_last_measurement_is_the_final_one_by_default(create, finish, now):
    job = create(tuning_body(study(double("x", 0, 1)), max_trials=1, parallel=1))
    trial = finish(job.trials.get(), later(now, 30), reports=hypertune_reports("score", [(10, 0.9), (20, 0.7)]))
    assert trial.final_measurement["stepCount"] == "20"
    assert trial.final_measurement["metrics"] == [{"metricId": "score", "value": 0.7}]
    assert [m["stepCount"] for m in trial.measurements] == ["10", "20"]


def test_best_measurement_takes_the_best_value_for_the_goal(create, finish, now):
    job = create(tuning_body(study(double("x", 0, 1), goal="MINIMIZE", selection="BEST_MEASUREMENT", metric="loss"),
                             max_trials=1, parallel=1))
    trial = finish(job.trials.get(), later(now, 30),
                   reports=hypertune_reports("loss", [(1, 0.9), (2, 0.2), (3, 0.4)]))
    assert trial.final_measurement["metrics"] == [{"metricId": "loss", "value": 0.2}]
    assert trial.objective == 0.2


def test_a_trial_that_reports_no_metric_is_infeasible(create, finish, now):
    job = create(tuning_body(study(double("x", 0, 1)), max_trials=2, parallel=1))
    trial = finish(job.trials.get(number=1), later(now, 5), reports=hypertune_reports("other", [(1, 1.0)]))
    assert trial.state == "INFEASIBLE"
    assert "without reporting metric 'score'" in trial.infeasible_reason


def test_the_study_fails_once_max_failed_trial_count_trials_failed_and_stops_the_rest(create, finish, now):
    job = create(tuning_body(study(double("x", 0, 1)), max_trials=10, parallel=3, max_failed=2))
    trials = live_trials(job)
    finish(trials[0], later(now, 5), exit_code=1)
    job.refresh_from_db()
    assert job.state != states.FAILED
    finish(trials[1], later(now, 6), exit_code=2)
    job.refresh_from_db()
    assert job.state == states.FAILED
    assert "2 trials failed" in job.error["message"] and "non-zero status of 2" in job.error["message"]
    stopped = job.trials.get(number=trials[2].number)
    assert stopped.custom_job.state in (states.CANCELLING, states.CANCELLED)
    assert job.trials.count() == 4  # the third slot was refilled after the first failure, no more after


def test_max_failed_trial_count_zero_uses_the_documented_default(create):
    job = create(tuning_body(study(double("x", 0, 1)), max_trials=40, parallel=1, max_failed=0))
    assert job.failure_limit == 8  # max(3, ceil(40 / 5))


def test_the_study_succeeds_with_the_best_trial_by_its_goal(create, finish, now):
    job = create(tuning_body(study(discrete("lr", 0.01, 0.1, 1.0), goal="MINIMIZE", algorithm="GRID_SEARCH",
                                   metric="loss"), max_trials=3, parallel=3))
    for trial, loss in zip(live_trials(job), (0.5, 0.1, 0.3)):
        finish(trial, later(now, 10), reports=hypertune_reports("loss", [(1, loss)]))
    job.refresh_from_db()
    assert job.state == states.SUCCEEDED and job.end_time is not None
    assert best_trial(job).number == 2


def test_a_study_where_no_trial_succeeded_fails(create, finish, now):
    job = create(tuning_body(study(double("x", 0, 1)), max_trials=1, parallel=1, max_failed=5))
    finish(job.trials.get(), later(now, 3), exit_code=1)
    job.refresh_from_db()
    assert job.state == states.FAILED
    assert job.error["message"].startswith("No trial succeeded")


def test_cancel_stops_live_trials_and_ends_cancelled(create, now, django_capture_on_commit_callbacks):
    job = create(tuning_body(study(double("x", 0, 1)), max_trials=4, parallel=2))
    with django_capture_on_commit_callbacks(execute=True):
        services.tuning_job_cancel(tuning_job=job, now=later(now, 1))
    job.refresh_from_db()
    assert job.state == states.CANCELLING
    assert {t.state for t in job.trials.all()} == {"STOPPING"}
    with django_capture_on_commit_callbacks(execute=True):  # the agent stops the placed replicas
        for replica in Replica.objects.filter(job__trial__tuning_job=job, active=True):
            job_services.replica_exited(replica=replica, exit_code=143, now=later(now, 2))
    job.refresh_from_db()
    assert job.state == states.CANCELLED and job.error["code"] == 1
    assert {t.custom_job.state for t in job.trials.select_related("custom_job")} == {states.CANCELLED}
    assert {t.state for t in job.trials.all()} == {"INFEASIBLE"}
    assert job.trials.count() == 2


def test_cancelling_a_finished_study_changes_nothing(create, finish, now):
    job = create(tuning_body(study(double("x", 0, 1)), max_trials=1, parallel=1))
    finish(job.trials.get(), later(now, 3), reports=hypertune_reports("score", [(1, 1.0)]))
    services.tuning_job_cancel(tuning_job=job, now=later(now, 4))
    job.refresh_from_db()
    assert job.state == states.SUCCEEDED


def test_the_beat_sweep_advances_a_study_whose_signal_was_lost(create, now):
    job = create(tuning_body(study(double("x", 0, 1)), max_trials=2, parallel=1))
    finish_job(job.trials.get().custom_job, later(now, 5), reports=hypertune_reports("score", [(1, 1.0)]))
    assert job.trials.count() == 1  # no on_commit callbacks ran: the study did not hear of it
    services.live_work_advance(now=later(now, 6))
    assert job.trials.count() == 2
    assert HyperparameterTuningJob.objects.get(pk=job.pk).trials.get(number=1).state == "SUCCEEDED"


def test_a_conditional_parameter_is_passed_only_when_its_parent_value_is_chosen(create):
    beta = {"parentCategoricalValues": {"values": ["adam"]}, "parameterSpec": discrete("beta", 0.9, 0.99)}
    job = create(tuning_body(study(categorical("optimizer", "sgd", "adam", children=[beta]), algorithm="GRID_SEARCH"),
                             max_trials=3, parallel=3))
    assert [args_of(t.custom_job)[1:] for t in job.trials.select_related("custom_job")] == [
        ["--optimizer=sgd"], ["--optimizer=adam", "--beta=0.9"], ["--optimizer=adam", "--beta=0.99"]]


def test_a_trial_is_requested_until_its_job_runs_then_active(create, now, django_capture_on_commit_callbacks):
    job = create(tuning_body(study(integer("layers", 1, 2), algorithm="GRID_SEARCH"), max_trials=2, parallel=1))
    trial = job.trials.select_related("custom_job").get()
    assert trial.state == "REQUESTED"
    scheduler_pass(now=now)
    with django_capture_on_commit_callbacks(execute=True):
        for replica in Replica.objects.filter(job=trial.custom_job, active=True):
            job_services.replica_started(replica=replica, now=later(now, 1))
    trial.refresh_from_db()
    assert trial.custom_job.state == states.RUNNING and trial.state == "ACTIVE"
