"""A tuning study: StudySpec parsing and validation, the search algorithms, and how a trial's
measurements are chosen. Pure Python (optuna is imported only for Bayesian optimisation).

StudySpec rules (Vertex AI v1 study.proto, shared/reference/vertex-api.md section 6):
- metrics: at least one {metricId, goal MAXIMIZE|MINIMIZE}; ids have no whitespace and are unique.
  The first metric is the one the search optimises and the best trial is chosen by.
- parameters: at least one; each has a unique whitespace-free parameterId (conditional ones too)
  and exactly one of doubleValueSpec {minValue < maxValue, their difference and sum finite doubles:
  a random draw is minValue + (maxValue - minValue) * u, a reverse-log one minValue + maxValue - x},
  integerValueSpec {minValue <= maxValue},
  categoricalValueSpec {values: unique strings}, discreteValueSpec {values: increasing, at least
  1e-10 apart, at most 1000}. scaleType UNIT_LINEAR_SCALE / UNIT_LOG_SCALE /
  UNIT_REVERSE_LOG_SCALE needs a strictly positive feasible space for the log scales and is left
  unset for CATEGORICAL.
- conditionalParameterSpecs: children of a DISCRETE, INTEGER or CATEGORICAL parent, active only
  when the parent takes one of parentDiscreteValues / parentIntValues / parentCategoricalValues
  (the one matching the parent's type; every value must be feasible for the parent).
- algorithm: GRID_SEARCH (every parameter, conditional ones included, INTEGER, CATEGORICAL or
  DISCRETE), RANDOM_SEARCH, or ALGORITHM_UNSPECIFIED, Vertex's default Bayesian optimisation,
  done here with optuna's TPE sampler.
- measurementSelectionType: LAST_MEASUREMENT (also when unspecified) or BEST_MEASUREMENT.

Grid order (documented, deterministic): parameters in the order the spec lists them, the last
one varying fastest (itertools.product order); INTEGER values ascending from minValue, DISCRETE
values ascending, CATEGORICAL values as listed. The children a parent value activates are
enumerated right after that parent, before the parameters that follow it. Trial N evaluates
grid point N; a grid smaller than maxTrialCount ends the study when it is exhausted.
"""

from __future__ import annotations

import itertools
import math
import random
import re
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from trainhub.common.errors import FieldViolation
from trainhub.common.wire import parse_enum, parse_int
from trainhub.jobs.spec import Checker

GOALS = {0: "GOAL_TYPE_UNSPECIFIED", 1: "MAXIMIZE", 2: "MINIMIZE"}
SCALES = {0: "SCALE_TYPE_UNSPECIFIED", 1: "UNIT_LINEAR_SCALE", 2: "UNIT_LOG_SCALE", 3: "UNIT_REVERSE_LOG_SCALE"}
ALGORITHMS = {0: "ALGORITHM_UNSPECIFIED", 2: "GRID_SEARCH", 3: "RANDOM_SEARCH"}
SELECTIONS = {0: "MEASUREMENT_SELECTION_TYPE_UNSPECIFIED", 1: "LAST_MEASUREMENT", 2: "BEST_MEASUREMENT"}

DOUBLE, INTEGER, CATEGORICAL, DISCRETE = "DOUBLE", "INTEGER", "CATEGORICAL", "DISCRETE"
_VALUE_SPECS = {"doubleValueSpec": DOUBLE, "integerValueSpec": INTEGER, "categoricalValueSpec": CATEGORICAL,
                "discreteValueSpec": DISCRETE}
_PARENT_VALUES = {DISCRETE: "parentDiscreteValues", INTEGER: "parentIntValues", CATEGORICAL: "parentCategoricalValues"}
_GRID_KINDS = frozenset({INTEGER, CATEGORICAL, DISCRETE})
_LOG_SCALES = frozenset({"UNIT_LOG_SCALE", "UNIT_REVERSE_LOG_SCALE"})
_STUDY_FIELDS = {"metrics", "parameters", "algorithm", "measurementSelectionType"}
_PARAMETER_FIELDS = {"parameterId", "scaleType", "conditionalParameterSpecs", *_VALUE_SPECS}
_WHITESPACE = re.compile(r"\s")
MAX_DISCRETE_VALUES = 1000
MIN_DISCRETE_GAP = 1e-10

Value = float | int | str
Params = dict[str, Value]


@dataclass(frozen=True)
class Metric:
    metric_id: str
    goal: str

    @property
    def maximize(self) -> bool:
        return self.goal == "MAXIMIZE"


@dataclass(frozen=True)
class Parameter:
    parameter_id: str
    kind: str
    scale: str = "SCALE_TYPE_UNSPECIFIED"
    low: float | int | None = None
    high: float | int | None = None
    #: CATEGORICAL strings or DISCRETE numbers, in the spec's order.
    values: tuple[Value, ...] = ()
    children: tuple[Conditional, ...] = ()

    def feasible_values(self) -> Iterator[Value]:
        """Every value of a grid-searchable parameter, in grid order."""
        if self.kind == INTEGER:
            return iter(range(int(self.low), int(self.high) + 1))
        return iter(self.values)


@dataclass(frozen=True)
class Conditional:
    parent_values: frozenset[Value]
    parameter: Parameter


@dataclass(frozen=True)
class Study:
    metrics: tuple[Metric, ...]
    parameters: tuple[Parameter, ...]
    algorithm: str
    measurement_selection: str

    @property
    def primary(self) -> Metric:
        return self.metrics[0]


class StudySpecError(Exception):
    def __init__(self, violations: list[FieldViolation]):
        super().__init__("; ".join(f"{v.field}: {v.description}" for v in violations))
        self.violations = violations


# Parsing ------------------------------------------------------------------------------------------


def _number(check: Checker, value: Any, path: str) -> float | None:
    if isinstance(value, bool) or value is None:
        check.add(path, "is required" if value is None else "must be a number")
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        check.add(path, f"must be a number, got {value!r}")
        return None
    if not math.isfinite(number):
        check.add(path, "must be a finite number")
        return None
    return number


def _bound(check: Checker, kind: str, value: Any, path: str) -> float | int | None:
    if kind == DOUBLE:
        return _number(check, value, path)
    if value is None:
        check.add(path, "is required")
        return None
    return check.wire(parse_int, value, path)


def _enum(check: Checker, value: Any, path: str, names: dict[int, str], default: str) -> str:
    if value is None:
        return default
    return check.wire(parse_enum, value, path, names) or default


def _identifier(check: Checker, value: Any, path: str, seen: set[str], what: str) -> str | None:
    text = check.string(value, path, required=True, max_length=128)
    if not text:
        return None
    if _WHITESPACE.search(text):
        check.add(path, f"{what} must not contain whitespace")
        return None
    if text in seen:
        check.add(path, f"{what} {text!r} is used more than once")
        return None
    seen.add(text)
    return text


def _parse_value_spec(check: Checker, kind: str, raw_spec: Any, path: str) -> dict | None:
    """The canonical value spec (numbers as numbers), or None after recording violations."""
    ranged = kind in (DOUBLE, INTEGER)
    fields = {"minValue", "maxValue", "defaultValue"} if ranged else {"values", "defaultValue"}
    spec = check.mapping(raw_spec, path, fields)
    if spec is None:
        return None
    if spec.get("defaultValue") is not None:
        check.add(f"{path}.defaultValue", "is not supported by HyperparameterTuningJob")
    if ranged:
        low, high = (_bound(check, kind, spec.get(key), f"{path}.{key}") for key in ("minValue", "maxValue"))
        if low is None or high is None:
            return None
        if high < low or (kind == DOUBLE and high == low):
            check.add(f"{path}.maxValue", f"must be greater than minValue ({low}), got {high}")
            return None
        if kind == DOUBLE and not (math.isfinite(high - low) and math.isfinite(high + low)):
            check.add(path, f"the feasible space [{low}, {high}] is too wide: maxValue - minValue and "
                            "maxValue + minValue must be finite doubles")
            return None
        return {"minValue": low, "maxValue": high}
    raw = spec.get("values")
    if not isinstance(raw, list) or not raw:
        check.add(f"{path}.values", "must be a non-empty list")
        return None
    if kind == CATEGORICAL:
        values = check.string_list(raw, f"{path}.values")
        if len(set(values)) != len(values):
            check.add(f"{path}.values", "must not repeat a value")
            return None
        return {"values": values} if len(values) == len(raw) else None
    numbers = [_number(check, item, f"{path}.values[{i}]") for i, item in enumerate(raw)]
    if any(number is None for number in numbers):
        return None
    if len(numbers) > MAX_DISCRETE_VALUES:
        check.add(f"{path}.values", f"must have at most {MAX_DISCRETE_VALUES} values")
        return None
    if any(b - a < MIN_DISCRETE_GAP for a, b in itertools.pairwise(numbers)):
        check.add(f"{path}.values", f"must be increasing, each at least {MIN_DISCRETE_GAP} above the one before")
        return None
    return {"values": numbers}


def _feasible(parameter: Parameter, value: Value) -> bool:
    if parameter.kind == INTEGER:
        return parameter.low <= value <= parameter.high
    return value in parameter.values


def _parse_parameter(check: Checker, raw: Any, path: str, seen: set[str]) -> tuple[Parameter, dict] | None:
    spec = check.mapping(raw, path, _PARAMETER_FIELDS)
    if spec is None:
        return None
    parameter_id = _identifier(check, spec.get("parameterId"), f"{path}.parameterId", seen, "parameterId")
    present = [key for key in _VALUE_SPECS if spec.get(key) is not None]
    if len(present) != 1:
        check.add(path, "exactly one of doubleValueSpec, integerValueSpec, categoricalValueSpec or "
                        "discreteValueSpec must be set" + (f" (got {', '.join(present)})" if present else ""))
        return None
    key = present[0]
    kind = _VALUE_SPECS[key]
    value_spec = _parse_value_spec(check, kind, spec[key], f"{path}.{key}")
    scale = _enum(check, spec.get("scaleType"), f"{path}.scaleType", SCALES, "SCALE_TYPE_UNSPECIFIED")
    if kind == CATEGORICAL and scale != "SCALE_TYPE_UNSPECIFIED":
        check.add(f"{path}.scaleType", "must be left unset for a categorical parameter")
    if value_spec is not None and scale in _LOG_SCALES:
        smallest = value_spec["values"][0] if kind == DISCRETE else value_spec["minValue"]
        if smallest <= 0:
            check.add(f"{path}.scaleType", f"{scale} needs a strictly positive feasible space; the smallest "
                                           f"value is {smallest}")
    if parameter_id is None or value_spec is None:
        return None
    values = tuple(value_spec.get("values", ()))
    parameter = Parameter(parameter_id, kind, scale, value_spec.get("minValue"), value_spec.get("maxValue"), values)
    canonical: dict[str, Any] = {"parameterId": parameter_id, key: value_spec}
    if scale != "SCALE_TYPE_UNSPECIFIED":
        canonical["scaleType"] = scale
    raw_children = spec.get("conditionalParameterSpecs")
    if raw_children:
        children, canonical_children = _parse_children(check, raw_children, f"{path}.conditionalParameterSpecs",
                                                       parameter, seen)
        parameter = Parameter(parameter_id, kind, scale, parameter.low, parameter.high, values, children)
        canonical["conditionalParameterSpecs"] = canonical_children
    return parameter, canonical


def _parse_children(check: Checker, raw: Any, path: str, parent: Parameter,
                    seen: set[str]) -> tuple[tuple[Conditional, ...], list[dict]]:
    if not isinstance(raw, list):
        check.add(path, "must be a list")
        return (), []
    if parent.kind == DOUBLE:
        check.add(path, "only DISCRETE, INTEGER and CATEGORICAL parameters can have conditional parameters")
        return (), []
    wanted = _PARENT_VALUES[parent.kind]
    children, canonical = [], []
    for index, item in enumerate(raw):
        item_path = f"{path}[{index}]"
        spec = check.mapping(item, item_path, {"parameterSpec", *_PARENT_VALUES.values()})
        if spec is None:
            continue
        given = [key for key in _PARENT_VALUES.values() if spec.get(key) is not None]
        if given != [wanted]:
            check.add(item_path, f"a {parent.kind} parent {parent.parameter_id!r} takes exactly {wanted}")
            continue
        holder = check.mapping(spec[wanted], f"{item_path}.{wanted}", {"values"})
        raw_values = (holder or {}).get("values")
        if not isinstance(raw_values, list) or not raw_values:
            check.add(f"{item_path}.{wanted}.values", "must be a non-empty list")
            continue
        values: list[Value] = []
        for position, raw_value in enumerate(raw_values):
            value_path = f"{item_path}.{wanted}.values[{position}]"
            if parent.kind == INTEGER:
                value = check.wire(parse_int, raw_value, value_path)
            elif parent.kind == DISCRETE:
                value = _number(check, raw_value, value_path)
            else:
                value = check.string(raw_value, value_path, required=True)
            if value is not None and not _feasible(parent, value):
                check.add(value_path, f"{value!r} is not a feasible value of {parent.parameter_id!r}")
            elif value is not None:
                values.append(value)
        child = _parse_parameter(check, spec.get("parameterSpec"), f"{item_path}.parameterSpec", seen)
        if child is None or len(values) != len(raw_values):
            continue
        children.append(Conditional(frozenset(values), child[0]))
        canonical.append({wanted: {"values": values}, "parameterSpec": child[1]})
    return tuple(children), canonical


def _all_parameters(parameters: tuple[Parameter, ...], path: str = "studySpec.parameters",
                    suffix: str = "") -> Iterator[tuple[str, Parameter]]:
    """Every parameter, conditional ones included, with its path in the StudySpec."""
    for index, parameter in enumerate(parameters):
        here = f"{path}[{index}]{suffix}"
        yield here, parameter
        yield from _all_parameters(tuple(c.parameter for c in parameter.children),
                                   f"{here}.conditionalParameterSpecs", ".parameterSpec")


def parse_study_spec(raw: Any) -> tuple[Study, dict[str, Any]]:
    """Validate a camelCase StudySpec; return the study and its canonical document.

    Raises StudySpecError listing every violation, with paths from ``studySpec``.
    """
    check = Checker()
    spec = check.mapping(raw, "studySpec", _STUDY_FIELDS)
    if spec is None:
        raise StudySpecError(check.violations)
    metrics: list[Metric] = []
    raw_metrics = spec.get("metrics")
    if not isinstance(raw_metrics, list) or not raw_metrics:
        check.add("studySpec.metrics", "at least one metric is required")
        raw_metrics = []
    seen_metrics: set[str] = set()
    for index, item in enumerate(raw_metrics):
        path = f"studySpec.metrics[{index}]"
        metric = check.mapping(item, path, {"metricId", "goal"})
        if metric is None:
            continue
        metric_id = _identifier(check, metric.get("metricId"), f"{path}.metricId", seen_metrics, "metricId")
        goal = _enum(check, metric.get("goal"), f"{path}.goal", GOALS, "GOAL_TYPE_UNSPECIFIED")
        if goal == "GOAL_TYPE_UNSPECIFIED":
            check.add(f"{path}.goal", "is required: MAXIMIZE or MINIMIZE")
        elif metric_id:
            metrics.append(Metric(metric_id, goal))
    raw_parameters = spec.get("parameters")
    if not isinstance(raw_parameters, list) or not raw_parameters:
        check.add("studySpec.parameters", "at least one parameter is required")
        raw_parameters = []
    parameters, canonical_parameters = [], []
    seen_parameters: set[str] = set()
    for index, item in enumerate(raw_parameters):
        parsed = _parse_parameter(check, item, f"studySpec.parameters[{index}]", seen_parameters)
        if parsed is not None:
            parameters.append(parsed[0])
            canonical_parameters.append(parsed[1])
    algorithm = _enum(check, spec.get("algorithm"), "studySpec.algorithm", ALGORITHMS, "ALGORITHM_UNSPECIFIED")
    selection = _enum(check, spec.get("measurementSelectionType"), "studySpec.measurementSelectionType",
                      SELECTIONS, "MEASUREMENT_SELECTION_TYPE_UNSPECIFIED")
    if algorithm == "GRID_SEARCH":
        for path, parameter in _all_parameters(tuple(parameters)):
            if parameter.kind not in _GRID_KINDS:
                check.add(path, f"GRID_SEARCH needs every parameter to be INTEGER, CATEGORICAL or DISCRETE; "
                                f"{parameter.parameter_id!r} is {parameter.kind}")
    if check.violations:
        raise StudySpecError(check.violations)
    study = Study(tuple(metrics), tuple(parameters), algorithm, selection)
    canonical = {"metrics": [{"metricId": m.metric_id, "goal": m.goal} for m in metrics],
                 "parameters": canonical_parameters, "algorithm": algorithm, "measurementSelectionType": selection}
    return study, canonical


def render_study_spec(canonical: dict[str, Any]) -> dict[str, Any]:
    """Canonical -> wire: int64 integer bounds and parentIntValues as strings, as the v1 API emits."""

    def parameter(spec: dict[str, Any]) -> dict[str, Any]:
        out = dict(spec)
        if "integerValueSpec" in out:
            out["integerValueSpec"] = {k: str(v) for k, v in out["integerValueSpec"].items()}
        if "conditionalParameterSpecs" in out:
            children = []
            for child in out["conditionalParameterSpecs"]:
                child = {**child, "parameterSpec": parameter(child["parameterSpec"])}
                if "parentIntValues" in child:
                    child["parentIntValues"] = {"values": [str(v) for v in child["parentIntValues"]["values"]]}
                children.append(child)
            out["conditionalParameterSpecs"] = children
        return out

    return {**canonical, "parameters": [parameter(p) for p in canonical["parameters"]]}


# Trial arguments -----------------------------------------------------------------------------------


def format_value(value: Value) -> str:
    """How a parameter value is written in ``--<parameterId>=<value>``: integers (and integral
    DISCRETE values such as a batch size of 32) without a decimal point, doubles in Python's
    shortest round-trip form, categories as written."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return str(int(value))
    return str(value)


def parameter_args(parameters: list[dict[str, Any]]) -> list[str]:
    """Trial parameters [{parameterId, value}] as the flags appended to every pool's args."""
    return [f"--{item['parameterId']}={format_value(item['value'])}" for item in parameters]


# Search algorithms -----------------------------------------------------------------------------------


def _active(parameters: tuple[Parameter, ...], params: Params) -> Iterator[Parameter]:
    """The parameters a (partial) assignment makes active: roots, and children of chosen values."""
    for parameter in parameters:
        yield parameter
        if parameter.parameter_id in params:
            chosen = params[parameter.parameter_id]
            yield from _active(tuple(c.parameter for c in parameter.children if chosen in c.parent_values), params)


def _grid(parameters: tuple[Parameter, ...]) -> Iterator[Params]:
    if not parameters:
        yield {}
        return
    first, rest = parameters[0], parameters[1:]
    for value in first.feasible_values():
        children = tuple(c.parameter for c in first.children if value in c.parent_values)
        for head in _grid(children):
            for tail in _grid(rest):
                yield {first.parameter_id: value, **head, **tail}


def grid_size(parameters: tuple[Parameter, ...]) -> int:
    """How many points the grid has (conditional children multiply only their parent's value)."""
    total = 1
    for parameter in parameters:
        count = 0
        for value in parameter.feasible_values():
            count += grid_size(tuple(c.parameter for c in parameter.children if value in c.parent_values))
        total *= count
    return total


def grid_point(study: Study, index: int) -> Params | None:
    """Grid point ``index`` (0-based) in the documented order, or None past the end of the grid."""
    return next(itertools.islice(_grid(study.parameters), index, None), None)


def _random_value(parameter: Parameter, rng: random.Random) -> Value:
    if parameter.kind in (CATEGORICAL, DISCRETE):
        return rng.choice(parameter.values)
    low, high = parameter.low, parameter.high
    if parameter.kind == INTEGER:
        if parameter.scale not in _LOG_SCALES:
            return rng.randint(low, high)
        # Uniform in log space over [low, high + 1) keeps every integer reachable.
        drawn = min(high, int(math.exp(rng.uniform(math.log(low), math.log(high + 1)))))
        return drawn if parameter.scale == "UNIT_LOG_SCALE" else low + high - drawn
    if parameter.scale not in _LOG_SCALES:
        return rng.uniform(low, high)
    drawn = math.exp(rng.uniform(math.log(low), math.log(high)))
    return drawn if parameter.scale == "UNIT_LOG_SCALE" else low + high - drawn


def random_point(study: Study, rng: random.Random) -> Params:
    """Each active parameter drawn independently: uniformly on its scale (linear, log, or
    reverse log = denser near maxValue), uniformly among CATEGORICAL / DISCRETE values."""
    params: Params = {}
    pending = list(study.parameters)
    while pending:
        parameter = pending.pop(0)
        value = _random_value(parameter, rng)
        params[parameter.parameter_id] = value
        pending = [c.parameter for c in parameter.children if value in c.parent_values] + pending
    return params


@dataclass(frozen=True)
class PastTrial:
    """A trial the search has already proposed: its parameters and, once done, its objective
    (the primary metric of its final measurement; None while running or when it failed)."""

    params: Params
    objective: float | None
    finished: bool


def _optuna_distribution(parameter: Parameter):
    from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

    log = parameter.scale in _LOG_SCALES
    if parameter.kind == DOUBLE:
        return FloatDistribution(parameter.low, parameter.high, log=log)
    if parameter.kind == INTEGER:
        return IntDistribution(parameter.low, parameter.high, log=log)
    return CategoricalDistribution(parameter.values)


def _optuna_suggest(trial, parameter: Parameter) -> Value:
    log = parameter.scale in _LOG_SCALES
    if parameter.kind == DOUBLE:
        return trial.suggest_float(parameter.parameter_id, parameter.low, parameter.high, log=log)
    if parameter.kind == INTEGER:
        return trial.suggest_int(parameter.parameter_id, parameter.low, parameter.high, log=log)
    return trial.suggest_categorical(parameter.parameter_id, parameter.values)


def _to_optuna(parameter: Parameter, value: Value) -> Value:
    # optuna has no reverse-log scale: sample x' = low + high - x on a log scale instead.
    if parameter.scale == "UNIT_REVERSE_LOG_SCALE" and parameter.kind in (DOUBLE, INTEGER):
        return parameter.low + parameter.high - value
    return value


def tpe_point(study: Study, history: list[PastTrial], seed: int) -> Params:
    """Bayesian optimisation with optuna's TPE sampler, replaying every past trial into a fresh
    in-memory study. Running trials count through TPE's constant liar, so parallel trials do not
    all propose the same point; until 10 trials finished, TPE samples at random (its startup)."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        sampler = optuna.samplers.TPESampler(seed=seed, constant_liar=True)
    direction = "maximize" if study.primary.maximize else "minimize"
    optuna_study = optuna.create_study(direction=direction, sampler=sampler)
    by_id = {parameter.parameter_id: parameter for _, parameter in _all_parameters(study.parameters)}
    for past in history:
        if past.finished and past.objective is not None:
            state, value = optuna.trial.TrialState.COMPLETE, past.objective
        else:
            state, value = (optuna.trial.TrialState.FAIL if past.finished else optuna.trial.TrialState.RUNNING), None
        optuna_study.add_trial(optuna.trial.create_trial(
            params={key: _to_optuna(by_id[key], value) for key, value in past.params.items()},
            distributions={key: _optuna_distribution(by_id[key]) for key in past.params},
            value=value, state=state))
    trial = optuna_study.ask()
    params: Params = {}
    pending = list(study.parameters)
    while pending:
        parameter = pending.pop(0)
        value = _to_optuna(parameter, _optuna_suggest(trial, parameter))
        params[parameter.parameter_id] = value
        pending = [c.parameter for c in parameter.children if value in c.parent_values] + pending
    return params


def suggest(study: Study, history: list[PastTrial], *, seed: int) -> Params | None:
    """The parameters of the next trial (trial number len(history) + 1), or None when the
    algorithm has nothing left to propose (an exhausted grid). Deterministic for a given seed
    and history."""
    number = len(history) + 1
    if study.algorithm == "GRID_SEARCH":
        return grid_point(study, number - 1)
    if study.algorithm == "RANDOM_SEARCH":
        return random_point(study, random.Random(f"{seed}:{number}"))
    return tpe_point(study, history, seed=(seed * 1_000_003 + number) % 2**32)


def parameters_list(study: Study, params: Params) -> list[dict[str, Any]]:
    """Trial.parameters on the wire: active parameters in spec order, numbers as JSON numbers."""
    return [{"parameterId": p.parameter_id, "value": params[p.parameter_id]}
            for p in _active(study.parameters, params) if p.parameter_id in params]


# Measurements ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Measurement:
    step_count: int
    elapsed_seconds: float
    metrics: dict[str, float] = field(default_factory=dict)


def measurements_from_reports(reports: list[dict], metric_ids: list[str], started_at: float) -> list[Measurement]:
    """One measurement per global step, in report order, from the agent's hypertune reports
    ({"globalStep", "timestamp", "metrics"}). Only the study's metric ids count; a later report
    for the same step updates that step's measurement."""
    by_step: dict[int, Measurement] = {}
    for report in reports:
        metrics = {key: value for key, value in report["metrics"].items() if key in metric_ids}
        if not metrics:
            continue
        step = report["globalStep"]
        earlier = by_step.pop(step, None)
        merged = {**(earlier.metrics if earlier else {}), **metrics}
        by_step[step] = Measurement(step, max(0.0, report["timestamp"] - started_at), merged)
    return list(by_step.values())


def final_measurement(measurements: list[Measurement], study: Study) -> Measurement | None:
    """LAST_MEASUREMENT (and unspecified): the last one reported that has the primary metric;
    BEST_MEASUREMENT: the one whose primary metric is best for the goal (earliest on a tie)."""
    primary = study.primary
    candidates = [m for m in measurements if primary.metric_id in m.metrics]
    if not candidates:
        return None
    if study.measurement_selection != "BEST_MEASUREMENT":
        return candidates[-1]
    pick = max if primary.maximize else min
    return pick(candidates, key=lambda m: m.metrics[primary.metric_id])


def best_index(objectives: list[float | None], maximize: bool) -> int | None:
    """Position of the best objective (the first on a tie); None when no trial has one."""
    scored = [(value, index) for index, value in enumerate(objectives) if value is not None]
    if not scored:
        return None
    best_value = (max if maximize else min)(value for value, _ in scored)
    return next(index for value, index in scored if value == best_value)


def default_max_failed_trials(max_trial_count: int) -> int:
    """maxFailedTrialCount 0 ("the service decides"): fail the study after
    min(maxTrialCount, max(3, ceil(maxTrialCount / 5))) failed trials.

    At least 3 so that one or two unlucky trials (a lost node, a preempted Spot VM) do not end a
    study; a fifth of the budget so a large study tolerates proportionally more; and small enough
    that a trial spec broken for every trial (bad image, unknown flag) is stopped after a few
    wasted trials instead of all of them.
    """
    return min(max_trial_count, max(3, math.ceil(max_trial_count / 5)))
