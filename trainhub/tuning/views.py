"""Browser pages: tuning job list, detail (trials, charts), create form, model registry."""

from __future__ import annotations

from functools import partial

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from trainhub.common.errors import ApiError
from trainhub.iam.selectors import project_get_for_user, projects_with_permission, user_has_permission
from trainhub.jobs.forms import DEFAULT_LOCATION, machine_catalog
from trainhub.common.pages import html_page, redirect_to_first_project_form, render_page_or_fragment
from trainhub.common.plotting import figure_html
from trainhub.tuning import figures, selectors, services
from trainhub.tuning.forms import ALGORITHM_CHOICES, TuningFilterForm, TuningJobForm
from trainhub.tuning.models import HyperparameterTuningJob, Model
from trainhub.tuning.render import best_of, best_trial, study_maximizes

GET = "aiplatform.hyperparameterTuningJobs.get"
LIST = "aiplatform.hyperparameterTuningJobs.list"
CREATE = "aiplatform.hyperparameterTuningJobs.create"
CANCEL = "aiplatform.hyperparameterTuningJobs.cancel"
MODELS_LIST = "aiplatform.models.list"
SORTS = ("number", "metric")


def tuning_urls(job: HyperparameterTuningJob) -> dict[str, str]:
    kwargs = {"project": job.project.project_id, "location": job.location, "tuning_job_id": job.job_id}
    return {name: reverse(f"tuning:{name}", kwargs=kwargs)
            for name in ("detail", "detail_status", "detail_charts", "cancel")}


def _job_for(request: HttpRequest, project: str, location: str, tuning_job_id: str, permission: str):
    return selectors.resource_get_for_user(kind=HyperparameterTuningJob, user=request.user, project_id=project,
                                           location=location, resource_id=tuning_job_id, permission=permission,
                                           trials=selectors.DETAIL_PAGE_TRIALS)


def _rows_context(request: HttpRequest) -> dict:
    form = TuningFilterForm(request.GET, projects=projects_with_permission(user=request.user, permission=LIST))
    jobs, next_cursor = [], ""
    if form.is_valid():
        jobs, next_cursor = selectors.resources_list(kind=HyperparameterTuningJob, projects=form.selected_projects(),
                                                     state=form.cleaned_data["state"],
                                                     cursor=form.cleaned_data["cursor"],
                                                     trials=None)
    summaries = selectors.trial_summaries(tuning_jobs=jobs)
    rows = [(job, len(summaries[job.pk]), best_of(summaries[job.pk], study_maximizes(job))) for job in jobs]
    return {"filter_form": form, "tuning_jobs": rows, "next_cursor": next_cursor}


@html_page
def tuning_list(request: HttpRequest, fragment: str | None = None) -> HttpResponse:
    sections = {"rows": ("tuning/_tuning_rows.html", partial(_rows_context, request))}
    return render_page_or_fragment(request, "tuning/tuning_list.html", sections, fragment)


def describe_parameter(spec: dict, parent: str = "") -> list[str]:
    """A parameter and its conditional children as readable lines, e.g. "lr: 0.001 to 0.1 (UNIT_LOG_SCALE)"."""
    if "doubleValueSpec" in spec or "integerValueSpec" in spec:
        bounds = spec.get("doubleValueSpec") or spec["integerValueSpec"]
        domain = f"{bounds['minValue']} to {bounds['maxValue']}"
    else:
        values = (spec.get("categoricalValueSpec") or spec["discreteValueSpec"])["values"]
        domain = "one of " + ", ".join(str(v) for v in values)
    scale = f" ({spec['scaleType']})" if spec.get("scaleType") else ""
    lines = [f"{spec['parameterId']}: {domain}{scale}{parent}"]
    for child in spec.get("conditionalParameterSpecs", []):
        parent_values = next(v["values"] for k, v in child.items() if k.startswith("parent"))
        condition = f" when {spec['parameterId']} is " + " or ".join(str(v) for v in parent_values)
        lines += describe_parameter(child["parameterSpec"], condition)
    return lines


def _study_facts(job: HyperparameterTuningJob) -> dict:
    metric = job.spec["studySpec"]["metrics"][0]
    parameters = job.spec["studySpec"]["parameters"]
    algorithm = job.spec["studySpec"].get("algorithm") or "ALGORITHM_UNSPECIFIED"
    selection = job.spec["studySpec"].get("measurementSelectionType") or ""
    strategy = job.spec["trialJobSpec"].get("scheduling", {}).get("strategy") or "STRATEGY_UNSPECIFIED"
    return {"metric_id": metric["metricId"], "maximize": study_maximizes(job),
            "algorithm": dict(ALGORITHM_CHOICES).get(algorithm, algorithm),
            # The defaults named as what they do, never as their *_UNSPECIFIED enum.
            "measurement_selection": ("Best reported" if selection == "BEST_MEASUREMENT" else
                                      "Last reported" if selection == "LAST_MEASUREMENT" else "Last reported (default)"),
            "trial_strategy": ("Standard (default)" if strategy == "STRATEGY_UNSPECIFIED"
                               else strategy.replace("_", "-").capitalize()),
            "parameter_ids": [p["parameterId"] for p in parameters],
            "parameter_lines": [line for p in parameters for line in describe_parameter(p)]}


def _status_context(request: HttpRequest, job: HyperparameterTuningJob) -> dict:
    facts = _study_facts(job)
    sort = request.GET.get("sort") if request.GET.get("sort") in SORTS else "number"
    trials = selectors.trials_sorted(tuning_job=job, maximize=facts["maximize"], by_metric=sort == "metric")
    best = best_trial(job)
    rows = [(trial, [{p["parameterId"]: p["value"] for p in trial.parameters}.get(pid, "")
                     for pid in facts["parameter_ids"]]) for trial in trials]
    return {
        "job": job, "urls": tuning_urls(job), "rows": rows, "best": best, "sort": sort, **facts,
        "failed_count": sum(1 for trial in trials if trial.state == "INFEASIBLE"),
        "can_cancel": job.is_cancellable and user_has_permission(user=request.user, project=job.project,
                                                                    permission=CANCEL),
    }


def _drawn(figure: dict | None, div_id: str) -> str | None:
    return None if figure is None else figure_html(figure, div_id)


def _charts_context(request: HttpRequest, job: HyperparameterTuningJob) -> dict:
    facts = _study_facts(job)
    trials = list(job.trials.all())
    best = best_of(trials, facts["maximize"])
    return {
        "job": job, "urls": tuning_urls(job),
        "parallel_chart": _drawn(figures.parallel_coordinates(trials, facts["metric_id"], facts["parameter_ids"]),
                                 "tuning-parcoords"),
        "metric_chart": _drawn(figures.metric_by_trial(trials, facts["metric_id"], facts["maximize"],
                                                       best.number if best else None), "tuning-metric"),
    }


@html_page
def tuning_detail(request: HttpRequest, project: str, location: str, tuning_job_id: str,
                  fragment: str | None = None) -> HttpResponse:
    job = _job_for(request, project, location, tuning_job_id, GET)
    sections = {
        "status": ("tuning/_tuning_status.html", partial(_status_context, request, job)),
        "charts": ("tuning/_tuning_charts.html", partial(_charts_context, request, job)),
    }
    return render_page_or_fragment(request, "tuning/tuning_detail.html", sections, fragment)


@require_POST
@html_page
def tuning_cancel(request: HttpRequest, project: str, location: str, tuning_job_id: str) -> HttpResponse:
    job = _job_for(request, project, location, tuning_job_id, CANCEL)
    services.tuning_job_cancel(tuning_job=job)
    messages.success(request, f"Cancel requested for {job.display_name}.")
    return redirect(tuning_urls(job)["detail"])


@html_page
def tuning_create(request: HttpRequest, project: str, location: str) -> HttpResponse:
    project_obj = project_get_for_user(user=request.user, project_id=project, permission=CREATE)
    form = TuningJobForm(request.POST if request.method == "POST" else None, location=location)
    if request.method == "POST" and form.is_valid():
        try:
            job = services.tuning_job_create(project=project_obj, location=form.location, user=request.user,
                                             body=form.tuning_job_body())
        except ApiError as error:
            form.show_service_error(error)
        else:
            messages.success(request, f"Tuning job {job.display_name} created.")
            return redirect(tuning_urls(job)["detail"])
    return render(request, "tuning/tuning_create.html", {"form": form, "project": project_obj,
                                                         "machine_catalog": machine_catalog()})


@html_page
def tuning_create_in_first_project(request: HttpRequest) -> HttpResponse:
    return redirect_to_first_project_form(
        request, permission=CREATE, url_name="tuning:create", location=DEFAULT_LOCATION,
        refusal=f"You cannot create tuning jobs: no project grants you {CREATE}.")


@html_page
def model_list(request: HttpRequest) -> HttpResponse:
    projects = projects_with_permission(user=request.user, permission=MODELS_LIST)
    models, _ = selectors.resources_list(kind=Model, projects=projects, page_size=selectors.MAX_PAGE_SIZE)
    return render(request, "tuning/model_list.html", {"models": models})
