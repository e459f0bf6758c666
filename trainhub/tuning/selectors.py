"""Reads for the tuning API and pages. Every lookup also checks the user's permission in the
project (another project's resources are 404, as for CustomJobs)."""

from __future__ import annotations

import datetime as dt
from typing import NamedTuple

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import Model as DjangoModel
from django.db.models import JSONField, Prefetch, QuerySet

from trainhub.common.errors import ApiError
from trainhub.iam.models import Project
from trainhub.iam.selectors import project_get_for_user
from trainhub.jobs.models import CustomJob
from trainhub.jobs.selectors import DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE, NEWEST_FIRST, keyset_page
from trainhub.tuning.models import HyperparameterTuningJob, Model, ModelVersion, TrainingPipeline, Trial

_LOOKUP_FIELD = {HyperparameterTuningJob: "job_id", TrainingPipeline: "pipeline_id", Model: "model_id"}
_COLLECTION = {HyperparameterTuningJob: "hyperparameterTuningJobs", TrainingPipeline: "trainingPipelines",
               Model: "models"}


def _documents(link: str, model: type[DjangoModel]) -> list[str]:
    """``link``'s JSON columns (a job's document, labels, error and outputs), to defer where only
    its resource name is shown: the columns that are large and cost decoding."""
    return [f"{link}__{field.name}" for field in model._meta.concrete_fields if isinstance(field, JSONField)]


#: Trials as the API renders them (the default), each with its job's resource name.
ALL_TRIALS = Trial.objects.select_related("custom_job__project")
#: Trials as a study's page shows them: each with its job's id and project, not the job's
#: document and outputs (the API renders those; a 50-trial study would read them all).
DETAIL_PAGE_TRIALS = ALL_TRIALS.defer(*_documents("custom_job", CustomJob))


def _with_related(kind: type[DjangoModel], rows: QuerySet, trials: QuerySet[Trial] | None = ALL_TRIALS) -> QuerySet:
    """The related rows a resource is rendered with; ``trials`` narrows what a tuning job's trials read
    (None: none, for a page that reads ``trial_summaries`` instead)."""
    rows = rows.select_related("project")
    if kind is HyperparameterTuningJob:
        return rows if trials is None else rows.prefetch_related(Prefetch("trials", queryset=trials))
    if kind is TrainingPipeline:
        # A pipeline shows its backing job's resource name, never the job's document.
        return (rows.select_related("custom_job__project", "tuning_job__project")
                .defer(*_documents("custom_job", CustomJob), *_documents("tuning_job", HyperparameterTuningJob))
                .prefetch_related(Prefetch("model_versions", queryset=ModelVersion.objects.select_related("model__project"))))
    # A model version names the pipeline and job that produced it, never their documents.
    return rows.prefetch_related(Prefetch("versions", queryset=ModelVersion.objects.select_related(
        "pipeline__project", "custom_job__project").defer(*_documents("pipeline", TrainingPipeline),
                                                           *_documents("custom_job", CustomJob))))


def resource_get_for_user(*, kind: type[DjangoModel], user: AbstractBaseUser, project_id: str, location: str,
                          resource_id: str, permission: str, trials: QuerySet[Trial] | None = ALL_TRIALS):
    """A tuning job, pipeline or model of the project, if the user holds ``permission`` there."""
    project = project_get_for_user(user=user, project_id=project_id, permission=permission)
    found = _with_related(kind, kind.objects.filter(project=project, location=location,
                                                    **{_LOOKUP_FIELD[kind]: resource_id}), trials).first()
    if found is None:
        raise ApiError(404, f"{kind.__name__} projects/{project_id}/locations/{location}/{_COLLECTION[kind]}/"
                            f"{resource_id} not found.")
    return found


def resources_list(*, kind: type[DjangoModel], projects: list[Project], location: str | None = None,
                   state: str = "", page_size: int | None = None, page_token: str = "",
                   cursor: tuple[dt.datetime, int] | None = None,
                   trials: QuerySet[Trial] | None = ALL_TRIALS) -> tuple[list, str]:
    """Newest first, keyset-paginated on (create_time, id) with the same tokens as customJobs.list."""
    size = DEFAULT_PAGE_SIZE if not page_size else min(page_size, MAX_PAGE_SIZE)
    rows = kind.objects.filter(project__in=projects)
    if location is not None:
        rows = rows.filter(location=location)
    if state:
        rows = rows.filter(state=state)
    if page_token:
        cursor = NEWEST_FIRST.decode(page_token)
    return keyset_page(_with_related(kind, rows, trials), cursor=cursor, size=size)


class TrialSummary(NamedTuple):
    """What the study list shows of a trial: enough to count trials and name the best one."""

    number: int
    state: str
    objective: float | None

    @property
    def trial_id(self) -> str:
        return str(self.number)


def trial_summaries(*, tuning_jobs: list[HyperparameterTuningJob]) -> dict[int, list[TrialSummary]]:
    """Each study's trials by number, as plain values read in one query.

    The study list shows 50 studies of up to 50 trials each: building a Trial object for every one
    of them was half of the page's time.
    """
    summaries: dict[int, list[TrialSummary]] = {job.pk: [] for job in tuning_jobs}
    rows = (Trial.objects.filter(tuning_job__in=list(summaries)).order_by("tuning_job_id", "number")
            .values_list("tuning_job_id", "number", "state", "objective"))
    for tuning_job_pk, *summary in rows:
        summaries[tuning_job_pk].append(TrialSummary(*summary))
    return summaries


def trials_sorted(*, tuning_job: HyperparameterTuningJob, maximize: bool, by_metric: bool) -> list[Trial]:
    """Trials by number, or best first by the primary metric (trials without a value last)."""
    trials = list(tuning_job.trials.all())
    if by_metric:
        trials.sort(key=lambda t: (t.objective is None, -(t.objective or 0) if maximize else (t.objective or 0),
                                   t.number))
    return trials
