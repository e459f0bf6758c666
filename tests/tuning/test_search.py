"""The pure study module: StudySpec validation, the grid order, random and TPE suggestions, and
measurement selection."""

import itertools
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.tuning.helpers import categorical, discrete, double, integer, study
from trainhub.tuning.search import (
    Measurement,
    PastTrial,
    StudySpecError,
    default_max_failed_trials,
    final_measurement,
    format_value,
    grid_point,
    grid_size,
    measurements_from_reports,
    parse_study_spec,
    random_point,
    suggest,
)


def violations(spec):
    with pytest.raises(StudySpecError) as caught:
        parse_study_spec(spec)
    return {v.field: v.description for v in caught.value.violations}


def test_grid_search_refuses_a_double_parameter_naming_it():
    found = violations(study(integer("a", 1, 2), double("lr", 0.1, 1.0), algorithm="GRID_SEARCH"))
    assert "GRID_SEARCH" in found["studySpec.parameters[1]"] and "'lr' is DOUBLE" in found["studySpec.parameters[1]"]


def test_grid_search_refuses_a_double_conditional_parameter_too():
    child = {"parentIntValues": {"values": ["2"]}, "parameterSpec": double("lr", 0.1, 1.0)}
    spec = study({**integer("a", 1, 2), "conditionalParameterSpecs": [child]}, algorithm="GRID_SEARCH")
    assert "studySpec.parameters[0].conditionalParameterSpecs[0].parameterSpec" in violations(spec)


@pytest.mark.parametrize("low, high, scale", [(-1e308, 1e308, "UNIT_LINEAR_SCALE"),
                                              (1e308, 1.7e308, "UNIT_REVERSE_LOG_SCALE")])
def test_a_double_space_too_wide_to_draw_from_is_refused(low, high, scale):
    """Drawing in it made inf (stored as invalid JSON: a 500 at create)."""
    found = violations(study({**double("lr", low, high), "scaleType": scale}, algorithm="RANDOM_SEARCH"))
    assert "is too wide" in found["studySpec.parameters[0].doubleValueSpec"]


@pytest.mark.parametrize("key", ["doubleValueSpec", "integerValueSpec", "categoricalValueSpec", "discreteValueSpec"])
@pytest.mark.parametrize("wrong", [[], "x", 1])
def test_a_value_spec_that_is_not_an_object_is_a_violation_naming_it(key, wrong):
    """It was read with .get() whatever its type: a 500 at create."""
    found = violations(study({"parameterId": "p", key: wrong}))
    assert found == {f"studySpec.parameters[0].{key}": f"must be an object, got {type(wrong).__name__}"}


def test_every_violation_is_reported_at_once():
    spec = {"metrics": [{"metricId": "a b", "goal": "MAXIMIZE"}, {"metricId": "m"}],
            "parameters": [double("x", 1, 1), {"parameterId": "y"}, categorical("c", "a", "a"),
                           double("x", -1, 1, scale="UNIT_LOG_SCALE"), discrete("d", 2, 1)],
            "algorithm": "BAYES"}
    found = violations(spec)
    assert set(found) == {"studySpec.metrics[0].metricId", "studySpec.metrics[1].goal",
                          "studySpec.parameters[0].doubleValueSpec.maxValue", "studySpec.parameters[1]",
                          "studySpec.parameters[2].categoricalValueSpec.values", "studySpec.parameters[3].parameterId",
                          "studySpec.parameters[3].scaleType", "studySpec.parameters[4].discreteValueSpec.values",
                          "studySpec.algorithm"}


def test_a_conditional_parent_value_must_be_feasible_and_of_the_parents_type():
    wrong_type = {"parentIntValues": {"values": [1]}, "parameterSpec": double("lr", 0.1, 1.0)}
    infeasible = {"parentCategoricalValues": {"values": ["rmsprop"]}, "parameterSpec": double("mom", 0.1, 1.0)}
    found = violations(study(categorical("opt", "sgd", "adam", children=[wrong_type, infeasible])))
    assert "parentCategoricalValues" in found["studySpec.parameters[0].conditionalParameterSpecs[0]"]
    assert "not a feasible value" in found[
        "studySpec.parameters[0].conditionalParameterSpecs[1].parentCategoricalValues.values[0]"]


def test_enums_and_int64_arrive_as_numbers_or_strings():
    parsed, canonical = parse_study_spec({"metrics": [{"metricId": "m", "goal": 2}],
                                          "parameters": [{"parameterId": "n", "integerValueSpec": {
                                              "minValue": "1", "maxValue": 8}, "scaleType": 2}],
                                          "algorithm": 3, "measurementSelectionType": 2})
    assert (parsed.primary.goal, parsed.algorithm, parsed.measurement_selection) == (
        "MINIMIZE", "RANDOM_SEARCH", "BEST_MEASUREMENT")
    assert canonical["parameters"][0] == {"parameterId": "n", "integerValueSpec": {"minValue": 1, "maxValue": 8},
                                          "scaleType": "UNIT_LOG_SCALE"}


def test_the_grid_is_enumerated_exactly_in_the_documented_order():
    parsed, _ = parse_study_spec(study(integer("a", 1, 2), categorical("b", "x", "y", "z"), discrete("c", 0.5, 2),
                                       algorithm="GRID_SEARCH"))
    points = [grid_point(parsed, index) for index in range(12)]
    assert points == [{"a": a, "b": b, "c": c} for a, b, c in itertools.product((1, 2), "xyz", (0.5, 2.0))]
    assert grid_point(parsed, 12) is None and grid_size(parsed.parameters) == 12


def test_conditional_children_are_enumerated_right_after_their_parent_value():
    child = {"parentIntValues": {"values": ["2"]}, "parameterSpec": categorical("act", "relu", "tanh")}
    parsed, _ = parse_study_spec(study({**integer("layers", 1, 2), "conditionalParameterSpecs": [child]},
                                       discrete("lr", 0.1, 0.2), algorithm="GRID_SEARCH"))
    points = [grid_point(parsed, index) for index in range(grid_size(parsed.parameters))]
    assert points == [{"layers": 1, "lr": 0.1}, {"layers": 1, "lr": 0.2},
                      {"layers": 2, "act": "relu", "lr": 0.1}, {"layers": 2, "act": "relu", "lr": 0.2},
                      {"layers": 2, "act": "tanh", "lr": 0.1}, {"layers": 2, "act": "tanh", "lr": 0.2}]


@settings(max_examples=50, deadline=None)
@given(st.lists(st.integers(1, 4), min_size=1, max_size=4))
def test_a_grid_holds_every_combination_once(sizes):
    parsed, _ = parse_study_spec(study(*(integer(f"p{i}", 1, size) for i, size in enumerate(sizes)),
                                       algorithm="GRID_SEARCH"))
    total = grid_size(parsed.parameters)
    points = [tuple(grid_point(parsed, i).values()) for i in range(total)]
    assert total == len(set(points)) == len(list(itertools.product(*(range(1, s + 1) for s in sizes))))


@settings(max_examples=100, deadline=None)
@given(st.integers(0, 2**31), st.sampled_from(["UNIT_LINEAR_SCALE", "UNIT_LOG_SCALE", "UNIT_REVERSE_LOG_SCALE"]))
def test_random_points_stay_in_the_feasible_space(seed, scale):
    parsed, _ = parse_study_spec(study(double("lr", 1e-4, 1.0, scale=scale),
                                       {**integer("n", 1, 1000), "scaleType": scale}, categorical("c", "a", "b")))
    point = random_point(parsed, random.Random(seed))
    assert 1e-4 <= point["lr"] <= 1.0 and 1 <= point["n"] <= 1000 and point["c"] in ("a", "b")
    assert isinstance(point["n"], int)


def test_log_and_reverse_log_scales_concentrate_at_opposite_ends():
    log, _ = parse_study_spec(study(double("x", 1e-4, 1.0, scale="UNIT_LOG_SCALE")))
    reverse, _ = parse_study_spec(study(double("x", 1e-4, 1.0, scale="UNIT_REVERSE_LOG_SCALE")))
    rng = random.Random(1)
    log_median = sorted(random_point(log, rng)["x"] for _ in range(501))[250]
    reverse_median = sorted(random_point(reverse, rng)["x"] for _ in range(501))[250]
    assert log_median < 0.02 and reverse_median > 0.98


def test_bayesian_suggestions_are_reproducible_and_improve_on_a_quadratic():
    parsed, _ = parse_study_spec(study(double("x", -10, 10), goal="MINIMIZE"))
    history = []
    for _ in range(30):
        params = suggest(parsed, history, seed=42)
        history.append(PastTrial(params, (params["x"] - 3) ** 2, True))
    again = []
    for _ in range(30):
        params = suggest(parsed, again, seed=42)
        again.append(PastTrial(params, (params["x"] - 3) ** 2, True))
    assert [h.params for h in history] == [a.params for a in again]
    best_late = min(h.objective for h in history[10:])
    assert best_late < min(h.objective for h in history[:10]) and best_late < 0.5


def test_running_trials_make_bayesian_search_propose_a_different_point():
    parsed, _ = parse_study_spec(study(double("x", 0, 1), categorical("c", "a", "b")))
    done = [PastTrial({"x": i / 12, "c": "ab"[i % 2]}, float(i), True) for i in range(12)]
    first = suggest(parsed, done, seed=5)
    second = suggest(parsed, done + [PastTrial(first, None, False)], seed=5)
    assert first != second


def test_measurements_follow_steps_and_final_selection_follows_the_goal():
    parsed, _ = parse_study_spec(study(double("x", 0, 1), goal="MINIMIZE", selection="BEST_MEASUREMENT",
                                       metric="loss"))
    reports = [{"globalStep": 1, "timestamp": 110.0, "metrics": {"loss": 0.5, "junk": 1.0}},
               {"globalStep": 2, "timestamp": 120.0, "metrics": {"loss": 0.2}},
               {"globalStep": 3, "timestamp": 130.0, "metrics": {"loss": 0.3}}]
    measurements = measurements_from_reports(reports, ["loss"], started_at=100.0)
    assert measurements[0] == Measurement(1, 10.0, {"loss": 0.5})
    assert final_measurement(measurements, parsed) == Measurement(2, 20.0, {"loss": 0.2})
    last, _ = parse_study_spec(study(double("x", 0, 1), goal="MINIMIZE", metric="loss"))
    assert final_measurement(measurements, last).step_count == 3


def test_flag_values_are_written_as_a_training_script_expects():
    assert [format_value(v) for v in (3, 32.0, 0.001, "adam", 1e-05)] == ["3", "32", "0.001", "adam", "1e-05"]


@pytest.mark.parametrize("trials,expected", [(1, 1), (8, 3), (15, 3), (16, 4), (100, 20)])
def test_the_default_failure_limit(trials, expected):
    assert default_max_failed_trials(trials) == expected
