"""Browser forms for tuning jobs and training pipelines. They only turn text into the HyperparameterTuningJob wire shape;
tuning.search and jobs.spec decide what is valid, and their field violations are shown on the
matching fields. The trial's CustomJob is the job submit form itself (jobs.forms.JobSubmitForm)."""

from __future__ import annotations

import re
from typing import Any

import yaml

from django import forms
from django.core.exceptions import ValidationError

from trainhub.common.errors import ApiError, FieldViolation
from trainhub.common.formerrors import show_service_error
from trainhub.iam.models import Project
from trainhub.jobs import states
from trainhub.jobs.forms import JobSubmitForm
from trainhub.jobs.selectors import NEWEST_FIRST
from trainhub.tuning.models import pipeline_state

ALGORITHM_CHOICES = [
    ("ALGORITHM_UNSPECIFIED", "Bayesian (default)"),
    ("GRID_SEARCH", "Grid search (integer, categorical and discrete parameters only)"),
    ("RANDOM_SEARCH", "Random search"),
]
SCALES = {"linear": "UNIT_LINEAR_SCALE", "log": "UNIT_LOG_SCALE", "reverse-log": "UNIT_REVERSE_LOG_SCALE"}
_STUDY_FIELD_BY_PATH = (
    ("studySpec.metrics[0].metricId", "metric_id"),
    ("studySpec.metrics[0].goal", "goal"),
    ("studySpec.parameters", "parameters"),
    ("studySpec.algorithm", "algorithm"),
    ("studySpec.measurementSelectionType", "measurement_selection"),
    ("maxTrialCount", "max_trial_count"),
    ("parallelTrialCount", "parallel_trial_count"),
    ("maxFailedTrialCount", "max_failed_trial_count"),
)
_PARAMETERS_HELP = (
    "One parameter per line: NAME double MIN MAX [linear|log|reverse-log], NAME integer MIN MAX [scale], "
    "NAME categorical A,B,C or NAME discrete 1,2,4 [scale]. Each trial gets --NAME=VALUE appended to its "
    "arguments. Conditional parameters: use the REST API or the CLI.")


def _parameter(line: str) -> dict[str, Any]:
    """One line of the parameters field as a ParameterSpec; ValueError says what is wrong."""
    words = line.split()
    if len(words) < 3:
        raise ValueError("write NAME TYPE followed by the range or the values")
    name, kind, rest = words[0], words[1].lower(), words[2:]
    scale = None
    if rest[-1].lower() in SCALES:
        scale = SCALES[rest.pop().lower()]
    spec: dict[str, Any] = {"parameterId": name}
    if kind in ("double", "integer"):
        if len(rest) != 2:
            raise ValueError(f"a {kind} parameter takes MIN MAX")
        spec[f"{kind}ValueSpec"] = {"minValue": rest[0], "maxValue": rest[1]}
    elif kind in ("categorical", "discrete") and len(rest) == 1:
        values = [value for value in rest[0].split(",") if value]
        spec[f"{kind}ValueSpec"] = {"values": values}
    else:
        raise ValueError("the type must be double, integer, categorical or discrete; list values as A,B,C")
    if kind == "double":
        spec["doubleValueSpec"] = {key: _float(value) for key, value in spec["doubleValueSpec"].items()}
    if kind == "discrete":
        spec["discreteValueSpec"]["values"] = [_float(value) for value in spec["discreteValueSpec"]["values"]]
    if scale:
        spec["scaleType"] = scale
    return spec


def _float(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise ValueError(f"{text!r} is not a number") from None


_LISTED_STATES = (states.QUEUED, states.PENDING, states.RUNNING, states.SUCCEEDED, states.FAILED,
                  states.CANCELLING, states.CANCELLED)
TUNING_STATE_CHOICES = [(state, state.removeprefix("JOB_STATE_").capitalize()) for state in _LISTED_STATES]
PIPELINE_STATE_CHOICES = [(pipeline_state(state), label) for state, label in TUNING_STATE_CHOICES]


class TuningFilterForm(forms.Form):
    """The GET filters of the tuning job and pipeline lists. ``cursor`` is the keyset position of
    the page to show."""

    project = forms.ChoiceField(required=False)
    state = forms.ChoiceField(required=False)
    cursor = forms.CharField(required=False)

    def __init__(self, *args: Any, projects: list[Project], state_choices: list[tuple[str, str]] = TUNING_STATE_CHOICES,
                 **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.projects = projects
        self.fields["project"].choices = [("", "All my projects")] + [(p.project_id, p.project_id) for p in projects]
        self.fields["state"].choices = [("", "Any state")] + state_choices

    def clean_cursor(self) -> tuple | None:
        token = self.cleaned_data["cursor"]
        if not token:
            return None
        try:
            return NEWEST_FIRST.decode(token)
        except ApiError as exc:
            raise ValidationError("This is not a link from a previous page; start again from the first page.") from exc

    def selected_projects(self) -> list[Project]:
        chosen = self.cleaned_data["project"]
        return [p for p in self.projects if not chosen or p.project_id == chosen]


class StudyForm(forms.Form):
    section = "Study"
    metric_id = forms.CharField(max_length=128, initial="score", label="Metric",
                                help_text="The tag the training code reports with cloudml-hypertune.")
    goal = forms.ChoiceField(choices=[("MAXIMIZE", "Maximize"), ("MINIMIZE", "Minimize")])
    parameters = forms.CharField(widget=forms.Textarea(attrs={"rows": 4}), help_text=_PARAMETERS_HELP,
                                 initial="x double -5 5\ny double -5 5")
    algorithm = forms.ChoiceField(choices=ALGORITHM_CHOICES)
    measurement_selection = forms.ChoiceField(label="Final measurement", choices=[
        ("LAST_MEASUREMENT", "Last reported"), ("BEST_MEASUREMENT", "Best reported")])
    max_trial_count = forms.IntegerField(min_value=1, initial=8, label="Trials")
    parallel_trial_count = forms.IntegerField(min_value=1, initial=2, label="Trials at once")
    max_failed_trial_count = forms.IntegerField(
        min_value=0, initial=0, label="Failed trials allowed",
        help_text="The study fails when this many trials failed. 0: max(3, a fifth of the trials).")

    def clean_parameters(self) -> list[dict[str, Any]]:
        specs, problems = [], []
        for number, line in enumerate(self.cleaned_data["parameters"].splitlines(), start=1):
            if not line.strip():
                continue
            try:
                specs.append(_parameter(line))
            except ValueError as exc:
                problems.append(f"Line {number}: {exc}.")
        if problems:
            raise ValidationError(problems)
        return specs

    def study_fields(self) -> dict[str, Any]:
        data = self.cleaned_data
        return {
            "studySpec": {"metrics": [{"metricId": data["metric_id"], "goal": data["goal"]}],
                          "parameters": data["parameters"], "algorithm": data["algorithm"],
                          "measurementSelectionType": data["measurement_selection"]},
            "maxTrialCount": data["max_trial_count"],
            "parallelTrialCount": data["parallel_trial_count"],
            "maxFailedTrialCount": data["max_failed_trial_count"],
        }


class TuningJobForm:
    """The create page: the study, and the trial's CustomJob as on the job submit page."""

    def __init__(self, data: Any = None, *, location: str) -> None:
        self.study = StudyForm(data, prefix="study")
        self.job = JobSubmitForm(data, location=location)
        self.violations: list[FieldViolation] = []
        self.service_message = ""

    def is_valid(self) -> bool:
        return all([self.study.is_valid(), self.job.is_valid()])

    @property
    def has_errors(self) -> bool:
        return bool(self.study.errors) or self.job.has_errors

    @property
    def location(self) -> str:
        return self.job.location

    def tuning_job_body(self) -> dict[str, Any]:
        trial_job = self.job.custom_job_body()
        return {"displayName": trial_job["displayName"], **self.study.study_fields(),
                "trialJobSpec": trial_job["jobSpec"]}

    def show_service_error(self, error: ApiError) -> None:
        show_service_error(self, error, self._field_for)

    def _field_for(self, path: str) -> tuple[forms.Form, str | None]:
        if path.startswith("trialJobSpec") or path == "displayName":
            return self.job._field_for(re.sub(r"^trialJobSpec", "jobSpec", path))
        return self.study, next((name for prefix, name in _STUDY_FIELD_BY_PATH if path.startswith(prefix)), None)


PIPELINE_EXAMPLE = """\
displayName: fit-quadratic
trainingTaskDefinition: gs://google-cloud-aiplatform/schema/trainingjob/definition/custom_task_1.0.0.yaml
trainingTaskInputs:
  workerPoolSpecs:
  - machineSpec:
      machineType: n1-standard-4
    replicaCount: 1
    containerSpec:
      imageUri: python:3.11
      command: [python3, -c]
      args:
      - "import os, pathlib; d = pathlib.Path(os.environ['AIP_MODEL_DIR']); d.mkdir(parents=True, exist_ok=True); (d / 'model.txt').write_text('a=1')"
  baseOutputDirectory:
    outputUriPrefix: gs://models/fit-quadratic
modelToUpload:
  displayName: quadratic
"""


class PipelineForm(forms.Form):
    """The create page: a whole TrainingPipeline in YAML or JSON, as the REST API takes it."""

    document = forms.CharField(
        label="TrainingPipeline (YAML or JSON)", initial=PIPELINE_EXAMPLE,
        widget=forms.Textarea(attrs={"rows": 22, "class": "mono", "spellcheck": "false"}),
        help_text="trainingTaskDefinition is the custom task or the hyperparameter tuning task; trainingTaskInputs "
                  "is a CustomJobSpec or a tuning job's fields; modelToUpload registers what the job saves under "
                  "AIP_MODEL_DIR.")

    def clean_document(self) -> dict[str, Any]:
        try:
            body = yaml.safe_load(self.cleaned_data["document"])
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
            raise ValidationError(f"This is not valid YAML or JSON{where}: {getattr(exc, 'problem', exc)}.") from exc
        if not isinstance(body, dict):
            raise ValidationError("Write one TrainingPipeline object (displayName, trainingTaskDefinition, ...).")
        return body

    def show_service_error(self, error: ApiError) -> None:
        for violation in error.violations or [FieldViolation("", error.message)]:
            self.add_error("document", f"{violation.field}: {violation.description}" if violation.field
                           else violation.description)
