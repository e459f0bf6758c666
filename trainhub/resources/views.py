"""Browser pages for persistent resources: the list, the pool view of one resource (live
fragments polled by htmx, a utilisation chart) and, for those allowed, create, resize, reboot and
delete. Thin: forms parse input, selectors read, services write."""

from __future__ import annotations

import datetime as dt
from functools import partial

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_POST

from trainhub.common.errors import ApiError
from trainhub.iam.selectors import project_get_for_user, projects_with_permission, user_has_permission
from trainhub.jobs.forms import DEFAULT_LOCATION, machine_catalog
from trainhub.common.pages import Section, html_page, redirect_to_first_project_form, render_page_or_fragment
from trainhub.common.plotting import figure_html
from trainhub.resources import selectors, services
from trainhub.resources.charts import utilisation_figure
from trainhub.resources.forms import ResourceCreateForm, ResourceResizeForm
from trainhub.resources.models import PersistentResource, State

GET = "aiplatform.persistentResources.get"
LIST = "aiplatform.persistentResources.list"
CREATE = "aiplatform.persistentResources.create"
UPDATE = "aiplatform.persistentResources.update"
DELETE = "aiplatform.persistentResources.delete"
CHART_HOURS = 24


def resource_urls(resource: PersistentResource) -> dict[str, str]:
    kwargs = {"project": resource.project.project_id, "location": resource.location,
              "resource_id": resource.resource_id}
    return {name: reverse(f"resources:{name}", kwargs=kwargs)
            for name in ("detail", "detail_status", "detail_chart", "resize", "reboot", "delete")}


def _resource_for(request: HttpRequest, project: str, location: str, resource_id: str,
                  permission: str) -> PersistentResource:
    return selectors.resource_get_for_user(user=request.user, project_id=project, location=location,
                                           resource_id=resource_id, permission=permission)


def _rows_context(request: HttpRequest) -> dict:
    projects = projects_with_permission(user=request.user, permission=LIST)
    return {"rows": selectors.resource_rows(projects=projects, now=timezone.now()),
            "can_create": bool(projects_with_permission(user=request.user, permission=CREATE))}


@html_page
def resource_list(request: HttpRequest, fragment: str | None = None) -> HttpResponse:
    if not projects_with_permission(user=request.user, permission=LIST):
        raise PermissionDenied(f"Seeing persistent resources needs {LIST} in at least one project.")
    sections = {"rows": ("resources/_resource_rows.html", partial(_rows_context, request))}
    return render_page_or_fragment(request, "resources/resource_list.html", sections, fragment)


def _status_context(request: HttpRequest, resource: PersistentResource) -> dict:
    return {
        "resource": resource, "urls": resource_urls(resource),
        **selectors.resource_page(resource=resource, now=timezone.now()),
        "can_update": user_has_permission(user=request.user, project=resource.project, permission=UPDATE),
        "can_delete": user_has_permission(user=request.user, project=resource.project, permission=DELETE),
        "live": resource.state != State.STOPPING,
    }


def _chart_context(resource: PersistentResource) -> dict:
    now = timezone.now()
    series = selectors.utilisation_series(resource=resource, since=now - dt.timedelta(hours=CHART_HOURS))
    figure = utilisation_figure(list(resource.pools.all()), series, selectors.pool_usage(resources=[resource], now=now),
                                now)
    return {"resource": resource, "urls": resource_urls(resource), "chart_hours": CHART_HOURS,
            "has_samples": any(series.values()), "chart": figure_html(figure, f"utilisation-{resource.pk}")}


def _resize_context(request: HttpRequest, resource: PersistentResource, form: ResourceResizeForm | None) -> dict:
    allowed = user_has_permission(user=request.user, project=resource.project, permission=UPDATE)
    return {"resize_form": (form or ResourceResizeForm(resource=resource)) if allowed else None,
            "urls": resource_urls(resource)}


def _detail_sections(request: HttpRequest, resource: PersistentResource,
                     resize_form: ResourceResizeForm | None = None) -> dict[str, Section]:
    return {
        "status": ("resources/_resource_status.html", partial(_status_context, request, resource)),
        "chart": ("resources/_resource_chart.html", partial(_chart_context, resource)),
        "resize": ("resources/_resize_form.html", partial(_resize_context, request, resource, resize_form)),
    }


@html_page
def resource_detail(request: HttpRequest, project: str, location: str, resource_id: str,
                    fragment: str | None = None) -> HttpResponse:
    resource = _resource_for(request, project, location, resource_id, GET)
    return render_page_or_fragment(request, "resources/resource_detail.html", _detail_sections(request, resource),
                                   fragment)


@require_POST
@html_page
def resource_resize(request: HttpRequest, project: str, location: str, resource_id: str) -> HttpResponse:
    resource = _resource_for(request, project, location, resource_id, UPDATE)
    form = ResourceResizeForm(request.POST, resource=resource)
    if form.is_valid():
        update_mask, body = form.update()
        try:
            services.persistent_resource_update(resource=resource, update_mask=update_mask, body=body)
        except ApiError as error:
            form.show_service_error(error)
        else:
            messages.success(request, f"Resizing {resource.resource_id}; it is RUNNING again once its nodes are in.")
            return redirect(resource_urls(resource)["detail"])
    response = render_page_or_fragment(request, "resources/resource_detail.html",
                                       _detail_sections(request, resource, form), None)
    response.status_code = 400
    return response


def _operation_view(permission: str, start, done_message: str, *, to_list: bool = False):
    """A POST button (reboot, delete): start the operation, say so, go back."""

    @require_POST
    @html_page
    def view(request: HttpRequest, project: str, location: str, resource_id: str) -> HttpResponse:
        resource = _resource_for(request, project, location, resource_id, permission)
        try:
            operation = start(resource=resource)
        except ApiError as error:
            messages.error(request, error.message)
        else:
            messages.success(request, done_message.format(resource=resource.resource_id,
                                                          operation=operation.operation_id))
        return redirect("resources:list") if to_list else redirect(resource_urls(resource)["detail"])

    return view


resource_reboot = _operation_view(UPDATE, services.persistent_resource_reboot,
                                  "Rebooting {resource} (operation {operation}); replicas running on it are lost.")
resource_delete = _operation_view(DELETE, services.persistent_resource_delete,
                                  "Deleting {resource} (operation {operation}); its jobs are being cancelled.",
                                  to_list=True)


@html_page
def resource_create(request: HttpRequest, project: str, location: str) -> HttpResponse:
    project_obj = project_get_for_user(user=request.user, project_id=project, permission=CREATE)
    form = ResourceCreateForm(request.POST if request.method == "POST" else None, location=location)
    if request.method == "POST" and form.is_valid():
        settings = form.settings.cleaned_data
        try:
            operation = services.persistent_resource_create(
                project=project_obj, location=settings["location"], resource_id=settings["resource_id"],
                body=form.persistent_resource_body(), user=request.user)
        except ApiError as error:
            form.show_service_error(error)
        else:
            messages.success(request, f"Creating {settings['resource_id']} (operation {operation.operation_id}): "
                                      "reserving its nodes.")
            return redirect(resource_urls(operation.resource)["detail"])
    return render(request, "resources/resource_create.html", {
        "form": form, "project": project_obj, "machine_catalog": machine_catalog(),
        "other_projects": [p for p in projects_with_permission(user=request.user, permission=CREATE)
                           if p != project_obj]}, status=400 if form.has_errors else 200)


@html_page
def resource_create_in_first_project(request: HttpRequest) -> HttpResponse:
    return redirect_to_first_project_form(
        request, permission=CREATE, url_name="resources:create", location=DEFAULT_LOCATION,
        refusal=f"Creating a persistent resource needs {CREATE}: ask a project admin.")
