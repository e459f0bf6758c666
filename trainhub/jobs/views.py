"""Browser pages for CustomJobs. Thin: forms parse input, selectors read, services write."""

from __future__ import annotations

import re
from functools import partial

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_POST

from trainhub.common.errors import ApiError
from trainhub.common.pages import html_page, redirect_to_first_project_form, render_page_or_fragment
from trainhub.iam.selectors import (
    project_get_for_user,
    projects_with_permission,
    user_has_permission,
)
from trainhub.jobs import page_selectors, selectors, services, states
from trainhub.jobs.capacity import node_kinds
from trainhub.jobs.costs import job_cost
from trainhub.jobs.forms import (
    DEFAULT_LOCATION,
    ArgvPreviewForm,
    JobListForm,
    JobSubmitForm,
    LogFilterForm,
    machine_catalog,
)
from trainhub.jobs.models import CustomJob
from trainhub.jobs.page_selectors import TABS, ListTab, Sort
from trainhub.scheduling.selectors import wait_explanation

GET = "aiplatform.customJobs.get"
LIST = "aiplatform.customJobs.list"
CREATE = "aiplatform.customJobs.create"
CANCEL = "aiplatform.customJobs.cancel"


def job_urls(job: CustomJob) -> dict[str, str]:
    kwargs = {"project": job.project.project_id, "location": job.location, "job_id": job.job_id}
    return {name: reverse(f"jobs:{name}", kwargs=kwargs) for name in ("detail", "detail_status", "detail_logs", "cancel")}


def _job_for(request: HttpRequest, project: str, location: str, job_id: str, permission: str) -> CustomJob:
    return selectors.job_get_for_user(user=request.user, project_id=project, location=location, job_id=job_id,
                                      permission=permission)


def _sort_headers(tab: ListTab, current: Sort) -> dict[str, dict]:
    """Per sortable column: the sort its header links to (the other direction when it is the
    current one) and its aria-sort value."""
    by_column: dict[str, list[Sort]] = {}
    for sort in tab.sorts:
        by_column.setdefault(sort.ordering.field, []).append(sort)
    headers = {}
    for column, sorts in by_column.items():
        is_current = current in sorts
        target = sorts[(sorts.index(current) + 1) % len(sorts)] if is_current else sorts[0]
        direction = "descending" if current.ordering.descending else "ascending"
        headers[column] = {"key": target.key, "label": target.label, "aria_sort": direction if is_current else ""}
    return headers


def _job_rows_context(request: HttpRequest) -> dict:
    projects = projects_with_permission(user=request.user, permission=LIST)
    submitters = page_selectors.job_submitters(projects=projects)
    form = JobListForm(request.GET, projects=projects, submitters=submitters, me=request.user.get_username())
    tab = form.list_tab
    page = page_selectors.JobPage([], "", None)
    sort = tab.default_sort
    if form.is_valid():
        query = form.query()
        usernames = {pk: name for name, pk in submitters.items()}
        page, sort = page_selectors.jobs_page(query, usernames=usernames), query.sort
    return {"filter_form": form, "tab": tab, "tabs": TABS.values(), "page": page, "jobs": page.jobs,
            "next_cursor": page.next_cursor, "sort_headers": _sort_headers(tab, sort),
            # Later pages stay still while read; the first page follows new jobs.
            "live": form.is_valid() and not form.cleaned_data["cursor"]}


@html_page
def job_list(request: HttpRequest, fragment: str | None = None) -> HttpResponse:
    sections = {"rows": ("jobs/_job_rows_fragment.html", partial(_job_rows_context, request))}
    return render_page_or_fragment(request, "jobs/job_list.html", sections, fragment)


def _progress(job: CustomJob, replicas: list) -> dict | None:
    """How far a gang has got while it starts (replicas running) or stops (replicas ended)."""
    if job.state == states.PENDING and replicas:
        done = sum(1 for replica in replicas if replica.state != states.REPLICA_ASSIGNED)
        return {"label": "Starting replicas", "done": done, "total": len(replicas), "verb": "running"}
    if job.state == states.CANCELLING:
        done = sum(1 for replica in replicas if replica.state == states.REPLICA_EXITED)
        return {"label": "Stopping replicas", "done": done, "total": len(replicas), "verb": "stopped"}
    return None


def _status_context(request: HttpRequest, job: CustomJob) -> dict:
    replicas = selectors.job_replicas(job=job)
    return {
        "job": job,
        "wait": wait_explanation(job_pk=job.pk),
        "cost": job_cost(job, timezone.now()),
        "urls": job_urls(job),
        "replicas": replicas,
        "progress": _progress(job, replicas),
        "events": selectors.job_events(job=job),
        "can_cancel": job.is_cancellable and user_has_permission(user=request.user, project=job.project,
                                                                    permission=CANCEL),
    }


def _logs_context(request: HttpRequest, job: CustomJob) -> dict:
    form = LogFilterForm(request.GET, job_spec=job.spec["jobSpec"])
    lines = []
    if form.is_valid():
        lines = page_selectors.job_log_tail(job=job, after=form.cleaned_data["after"] or 0,
                                            task=form.selected_task())
    after = lines[-1].pk if lines else form.cleaned_data.get("after") or 0
    return {"job": job, "urls": job_urls(job), "log_form": form, "log_lines": lines, "log_after": after,
            "log_limit": page_selectors.LOG_TAIL_LINES,
            "log_task": form.cleaned_data.get("task", ""), "logs_live": form.is_valid() and not job.is_terminal}


@html_page
def job_detail(request: HttpRequest, project: str, location: str, job_id: str,
               fragment: str | None = None) -> HttpResponse:
    job = _job_for(request, project, location, job_id, GET)
    sections = {
        "status": ("jobs/_job_status.html", partial(_status_context, request, job)),
        "logs": ("jobs/_job_logs.html", partial(_logs_context, request, job)),
    }
    return render_page_or_fragment(request, "jobs/job_detail.html", sections, fragment)


@require_POST
@html_page
def job_cancel(request: HttpRequest, project: str, location: str, job_id: str) -> HttpResponse:
    job = services.job_cancel(job=_job_for(request, project, location, job_id, CANCEL))
    messages.success(request, f"Cancel requested for {job.display_name}.")
    return redirect(job_urls(job)["detail"])


@html_page
def job_create(request: HttpRequest, project: str, location: str) -> HttpResponse:
    project_obj = project_get_for_user(user=request.user, project_id=project, permission=CREATE)
    form = JobSubmitForm(request.POST if request.method == "POST" else None, location=location,
                         kinds=node_kinds(location=location), catalog=request.GET.get("catalog") == "1")
    if request.method == "POST" and form.is_valid() and not form.never_fits():
        try:
            job = services.job_submit(project=project_obj, location=form.location, user=request.user,
                                      body=form.custom_job_body())
        except ApiError as error:
            form.show_service_error(error)
        else:
            messages.success(request, f"Job {job.display_name} submitted.")
            return redirect(job_urls(job)["detail"])
    other_projects = [p for p in projects_with_permission(user=request.user, permission=CREATE)
                      if p != project_obj]
    return render(request, "jobs/job_create.html", {"form": form, "project": project_obj,
                                                    "other_projects": other_projects,
                                                    "machine_catalog": machine_catalog()})


_POOL_PREFIX = re.compile(r"pool\d")


@html_page
def argv_preview(request: HttpRequest) -> HttpResponse:
    """What a pool's command and arguments fields run, as the argument list the node executes:
    shown under the fields while the user types (GET pool0-command=...&pool0-args=...&prefix=pool0)."""
    prefix = request.GET.get("prefix", "")
    if not _POOL_PREFIX.fullmatch(prefix):
        raise ApiError(400, "prefix must name a worker pool (pool0 ... pool3)")
    command, args, problem = ArgvPreviewForm(request.GET, prefix=prefix).argv()
    return render(request, "jobs/_argv_preview.html", {"argv": command + args, "entrypoint": not command,
                                                       "problem": problem})


@html_page
def job_create_in_first_project(request: HttpRequest) -> HttpResponse:
    """The nav's "Submit job": the form of the first project where the user may submit."""
    return redirect_to_first_project_form(
        request, permission=CREATE, url_name="jobs:create", location=DEFAULT_LOCATION,
        refusal="You cannot submit jobs: no project grants you aiplatform.customJobs.create.")
