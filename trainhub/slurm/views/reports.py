"""The queue (squeue), priority (sprio), fair-share (sshare), accounting (sacct) and nodes (sinfo, or
scontrol show node for the nodes named) pages, each showing its command's text for the flags chosen,
and a job's priority factor by factor."""

from __future__ import annotations

import re

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone
from django.utils.html import escape
from django.utils.safestring import mark_safe

from trainhub.common.collector import collector_paused
from trainhub.common.errors import ApiError
from trainhub.common.pages import html_page
from trainhub.slurm import figures, reports, selectors
from trainhub.slurm.api.reports import REPORTS, NamesNotFound
from trainhub.slurm.forms.reports import SacctForm, SinfoForm, SprioForm, SqueueForm, SshareForm
from trainhub.slurm.views.common import cluster_context, cluster_for, job_url

LIST = "aiplatform.slurmJobs.list"
PAGES = {"queue": ("squeue", SqueueForm, "Queue"), "priority": ("sprio", SprioForm, "Priority"),
         "fairshare": ("sshare", SshareForm, "Fair-share"), "accounting": ("sacct", SacctForm, "Accounting"),
         "nodes": ("sinfo", SinfoForm, "Nodes")}
#: Commands whose output the page shows a page of lines at a time (the command itself, and the
#: JSON API's text, print every line; a 10,000-job queue would be a 1.5 MB page). sshare prints
#: one line per association and is shown whole.
PAGED = ("squeue", "sprio", "sacct")
PAGE_LINES = 500


def _page_start(request: HttpRequest) -> int:
    """The first line asked for (?offset=N: squeue's ``start`` is its --start flag), rounded down to
    a page; 0 when absent or not a number."""
    text = request.GET.get("offset", "")
    return int(text) // PAGE_LINES * PAGE_LINES if text.isascii() and text.isdigit() and len(text) < 10 else 0


def _pager(request: HttpRequest, start: int, shown: int, total: int) -> dict | None:
    """Which lines the page shows of how many, and the links to the pages around it."""
    if start == 0 and shown >= total:
        return None

    def link(first: int) -> str:
        query = request.GET.copy()
        query["offset"] = str(first)
        return f"?{query.urlencode()}"

    return {"first": start + 1 if shown else start, "last": start + shown, "total": total,
            "previous": link(max(0, start - PAGE_LINES)) if start else None,
            "next": link(start + PAGE_LINES) if start + PAGE_LINES < total else None}


def _report_page(page: str):
    page_command, form_class, title = PAGES[page]

    @html_page
    def view(request: HttpRequest, project: str, location: str, cluster: str) -> HttpResponse:
        cluster_obj = cluster_for(request, project, location, cluster, LIST)
        # the nodes page's ``node``: scontrol show node's details of those nodes instead of sinfo
        command = "scontrolNodes" if page == "nodes" and request.GET.get("node", "").strip() else page_command
        build = REPORTS[command]
        args = (cluster_obj, request.GET, request.user.get_username(), timezone.now())
        start = _page_start(request)
        status = 200
        with collector_paused():  # as the API's reports (trainhub/slurm/api/reports.py)
            try:
                report = build(*args, page=slice(start, start + PAGE_LINES)) if command in PAGED else build(*args)
            except NamesNotFound as missing:  # what scontrol printed: the nodes found, a line for each other
                report = missing.report
            except ApiError as refused:  # a flag the command refuses: the form again, with its message
                if refused.http_status != 400:
                    raise
                report, status = reports.Report("", stderr=f"{refused.message}\n"), 400
        context = cluster_context(request, cluster_obj, page)
        target = job_url(cluster_obj, 0, "job_priority" if command == "sprio" else "job")
        output = report.text if command in ("sshare", "sinfo", "scontrolNodes") else linked_job_ids(report.text, target)
        shown = "scontrol show node" if command == "scontrolNodes" else command
        context.update(form=form_class(request.GET or None), command=shown, title=title, output=output,
                       stderr=report.stderr,
                       pager=_pager(request, start, len(report.items), report.total) if command in PAGED else None)
        return render(request, "slurm/report.html", context, status=status)

    view.__name__ = f"{page}_page"
    return view


_LEADING_JOB_ID = re.compile(r"^( *)(\d+(?:_\d+)?)", re.MULTILINE)  # 8, or an array task: 1_7


def linked_job_ids(text: str, url_of_job_zero: str) -> str:
    """The command's text, HTML-escaped, with the job id that starts each line linked (the URL is
    the job page's of job 0, whose id is replaced: one reverse() for thousands of lines)."""
    before, after = url_of_job_zero.split("/jobs/0/", 1)
    return mark_safe(_LEADING_JOB_ID.sub(  # noqa: S308 - the text is escaped first; ids are digits
        lambda m: f'{m[1]}<a href="{before}/jobs/{m[2]}/{after}">{m[2]}</a>', escape(text)))


queue_page, priority_page, fairshare_page, accounting_page, nodes_page = (_report_page(p) for p in PAGES)


@html_page
def job_priority(request: HttpRequest, project: str, location: str, cluster: str, slurm_job_id: str) -> HttpResponse:
    job = selectors.job_get_for_user(user=request.user, project_id=project, location=location, cluster_id=cluster,
                                     job_id=slurm_job_id, permission="aiplatform.slurmJobs.get")
    now = timezone.now()
    lines, breakdown = reports.job_priority(job, now=now)
    # A job that has started keeps its last priority; the chart compares it with the pending jobs,
    # and says so instead of drawing empty axes when none is pending.
    queue = reports.queue_breakdowns(job.cluster, now=now, include=job.job_id) if breakdown else []
    figure = figures.priority_stack(queue, job.job_id) if queue else None
    context = cluster_context(request, job.cluster, "priority")
    context.update(job=job, lines=lines, breakdown=breakdown, figure=figure,
                   computed=job.priority_time,
                   job_page=job_url(job.cluster, job.job_id))
    return render(request, "slurm/job_priority.html", context)
