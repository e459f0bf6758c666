"""Browser pages for training pipelines: the list, a pipeline's page (the job it runs, the model it
registered) and the create form. Pipelines are written by tuning.services like the REST API's."""

from __future__ import annotations

from functools import partial

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from trainhub.common.errors import ApiError
from trainhub.common.pages import html_page, redirect_to_first_project_form, render_page_or_fragment
from trainhub.iam.selectors import project_get_for_user, projects_with_permission, user_has_permission
from trainhub.jobs.forms import DEFAULT_LOCATION
from trainhub.tuning import selectors, services
from trainhub.tuning.forms import PIPELINE_STATE_CHOICES, PipelineForm, TuningFilterForm
from trainhub.tuning.models import TrainingPipeline
from trainhub.tuning.spec import TUNING_TASK

GET = "aiplatform.trainingPipelines.get"
LIST = "aiplatform.trainingPipelines.list"
CREATE = "aiplatform.trainingPipelines.create"
CANCEL = "aiplatform.trainingPipelines.cancel"


def pipeline_urls(pipeline: TrainingPipeline) -> dict[str, str]:
    kwargs = {"project": pipeline.project.project_id, "location": pipeline.location,
              "pipeline_id": pipeline.pipeline_id}
    return {name: reverse(f"pipelines:{name}", kwargs=kwargs) for name in ("detail", "detail_status", "cancel")}


def _pipeline_for(request: HttpRequest, project: str, location: str, pipeline_id: str,
                  permission: str) -> TrainingPipeline:
    return selectors.resource_get_for_user(kind=TrainingPipeline, user=request.user, project_id=project,
                                           location=location, resource_id=pipeline_id, permission=permission)


def _rows_context(request: HttpRequest) -> dict:
    form = TuningFilterForm(request.GET, projects=projects_with_permission(user=request.user, permission=LIST),
                            state_choices=PIPELINE_STATE_CHOICES)
    pipelines, next_cursor = [], ""
    if form.is_valid():
        pipelines, next_cursor = selectors.resources_list(kind=TrainingPipeline, projects=form.selected_projects(),
                                                          state=form.cleaned_data["state"],
                                                          cursor=form.cleaned_data["cursor"])
    return {"filter_form": form, "pipelines": pipelines, "next_cursor": next_cursor}


@html_page
def pipeline_list(request: HttpRequest, fragment: str | None = None) -> HttpResponse:
    sections = {"rows": ("tuning/_pipeline_rows.html", partial(_rows_context, request))}
    return render_page_or_fragment(request, "tuning/pipeline_list.html", sections, fragment)


def _status_context(request: HttpRequest, pipeline: TrainingPipeline) -> dict:
    return {
        "pipeline": pipeline, "urls": pipeline_urls(pipeline),
        "is_tuning": pipeline.spec["trainingTaskDefinition"] == TUNING_TASK,
        "model_versions": list(pipeline.model_versions.all()),
        "can_cancel": pipeline.is_cancellable and user_has_permission(user=request.user, project=pipeline.project,
                                                                           permission=CANCEL),
    }


@html_page
def pipeline_detail(request: HttpRequest, project: str, location: str, pipeline_id: str,
                    fragment: str | None = None) -> HttpResponse:
    pipeline = _pipeline_for(request, project, location, pipeline_id, GET)
    sections = {"status": ("tuning/_pipeline_status.html", partial(_status_context, request, pipeline))}
    return render_page_or_fragment(request, "tuning/pipeline_detail.html", sections, fragment)


@require_POST
@html_page
def pipeline_cancel(request: HttpRequest, project: str, location: str, pipeline_id: str) -> HttpResponse:
    pipeline = _pipeline_for(request, project, location, pipeline_id, CANCEL)
    services.pipeline_cancel(pipeline=pipeline)
    messages.success(request, f"Cancel requested for {pipeline.display_name}.")
    return redirect(pipeline_urls(pipeline)["detail"])


@html_page
def pipeline_create(request: HttpRequest, project: str, location: str) -> HttpResponse:
    project_obj = project_get_for_user(user=request.user, project_id=project, permission=CREATE)
    form = PipelineForm(request.POST if request.method == "POST" else None)
    if request.method == "POST" and form.is_valid():
        try:
            pipeline = services.pipeline_create(project=project_obj, location=location, user=request.user,
                                                body=form.cleaned_data["document"])
        except ApiError as error:
            form.show_service_error(error)
        else:
            messages.success(request, f"Training pipeline {pipeline.display_name} created.")
            return redirect(pipeline_urls(pipeline)["detail"])
    return render(request, "tuning/pipeline_create.html", {"form": form, "project": project_obj,
                                                           "location": location})


@html_page
def pipeline_create_in_first_project(request: HttpRequest) -> HttpResponse:
    return redirect_to_first_project_form(
        request, permission=CREATE, url_name="pipelines:create", location=DEFAULT_LOCATION,
        refusal=f"You cannot create training pipelines: no project grants you {CREATE}.")
