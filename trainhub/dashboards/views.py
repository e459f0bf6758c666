"""The team dashboard: live figures on top, charts that load (and refresh) one by one, each with
its data as CSV. Cluster-wide figures are for anyone who may list the nodes; quotas and waiting
jobs are those of the user's own projects."""

from __future__ import annotations

import csv
import datetime as dt

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET

from trainhub.common.plotting import figure_json
from trainhub.common.wire import format_timestamp
from trainhub.dashboards import selectors
from trainhub.dashboards.charts import CHARTS, Chart, ChartRequest, Table
from trainhub.common.pages import html_page
from trainhub.dashboards.sources import capacity_readings
from trainhub.dashboards.team import TEAM_CHARTS
from trainhub.iam.models import Project
from trainhub.dashboards.timeseries import RANGES, TimeRange, range_for
from trainhub.iam.selectors import project_get_for_user, projects_with_permission
from trainhub.scheduling.selectors import scheduler_snapshot

NODES_LIST = "aiplatform.nodes.list"
JOBS_LIST = "aiplatform.customJobs.list"


def _check_access(request: HttpRequest) -> None:
    if not projects_with_permission(user=request.user, permission=NODES_LIST):
        raise PermissionDenied(f"The dashboards need {NODES_LIST} in at least one project.")


def _chart_request(request: HttpRequest, project: Project | None = None) -> ChartRequest:
    return ChartRequest(user=request.user, time_range=range_for(request.GET.get("range", "")), now=timezone.now(),
                        wall=request.GET.get("wall") == "1", project=project)


def _team_project(request: HttpRequest, project: str) -> Project:
    """A team page's project: its members (and staff) only; 404 for anyone else."""
    return project_get_for_user(user=request.user, project_id=project, permission=JOBS_LIST)


def _chart_data(request: HttpRequest, key: str, project: str | None = None) -> tuple[Chart, ChartRequest, Table]:
    """The chart asked for (404 if none; a team page's chart with ``project``), the request it
    answers, and its data."""
    if project is None:
        _check_access(request)
        project_obj, charts = None, CHARTS
    else:
        project_obj, charts = _team_project(request, project), TEAM_CHARTS
    chart = charts.get(key)
    if chart is None:
        raise Http404(f"There is no chart {key!r}.")
    chart_request = _chart_request(request, project_obj)
    return chart, chart_request, chart.read(chart_request)


def _kpis_context(now: dt.datetime) -> dict:
    readings = capacity_readings(now)
    # Capacity from the node pools; allocations from every source: jobs on shared nodes, and the
    # GPUs Slurm jobs hold on their clusters' (dedicated) nodes.
    capacity = [reading for reading in readings if reading.source == "pool"]
    groups = selectors.active_jobs()
    nodes = selectors.node_states()
    started, mean_wait = selectors.recent_wait_summary(now=now)
    total = sum(reading.gpus_total for reading in capacity)
    allocated = sum(reading.gpus_allocated for reading in readings)
    running = [group for group in groups if group.running]
    waiting = [group for group in groups if group.waiting]
    return {"kpi": {
        "gpus_total": total, "gpus_allocated": allocated,
        "gpus_percent": round(100 * allocated / total) if total else 0,
        "gpus_dedicated": sum(reading.gpus_dedicated for reading in capacity),
        "running_jobs": sum(g.jobs for g in running), "running_gpus": sum(g.gpus for g in running),
        "waiting_jobs": sum(g.jobs for g in waiting), "waiting_gpus": sum(g.gpus for g in waiting),
        "started_last_hour": started, "mean_wait_seconds": mean_wait,
        "nodes_up": nodes.get("UP", 0), "nodes_total": sum(nodes.values()),
        "nodes_down": nodes.get("DOWN", 0), "nodes_drain": nodes.get("DRAIN", 0),
        "last_pass": scheduler_snapshot().get("lastPass", {}),
    }}


def _chart_urls(chart: Chart, request: HttpRequest, time_range: TimeRange,
                project: Project | None = None) -> dict[str, str]:
    query = f"?range={time_range.key}" + ("&wall=1" if request.GET.get("wall") == "1" else "")
    if project is None:
        names, args = ("dashboards:chart", "dashboards:chart_csv"), [chart.key]
    else:
        names, args = ("dashboards:team_chart", "dashboards:team_chart_csv"), [project.project_id, chart.key]
    return {"fragment": reverse(names[0], args=args) + query,
            "csv": reverse(names[1], args=args) + f"?range={time_range.key}"}


@login_required
@require_GET
def overview(request: HttpRequest) -> HttpResponse:
    _check_access(request)
    chart_request = _chart_request(request)
    return render(request, "dashboards/overview.html", {
        **_kpis_context(chart_request.now),
        "time_range": chart_request.time_range, "ranges": RANGES, "wall": chart_request.wall,
        "teams": projects_with_permission(user=request.user, permission=JOBS_LIST),
        "charts": [(chart, _chart_urls(chart, request, chart_request.time_range)) for chart in CHARTS.values()],
    })


@html_page
@require_GET
def team(request: HttpRequest, project: str) -> HttpResponse:
    """A project's team page: its GPUs running and waiting by type over time, why each waiting
    job waits and when it should start, its quota use and its cost so far this month."""
    project_obj = _team_project(request, project)
    chart_request = _chart_request(request, project_obj)
    return render(request, "dashboards/team.html", {
        "project": project_obj, "time_range": chart_request.time_range, "ranges": RANGES,
        "teams": projects_with_permission(user=request.user, permission=JOBS_LIST),
        "charts": [(chart, _chart_urls(chart, request, chart_request.time_range, project_obj))
                   for chart in TEAM_CHARTS.values()],
    })


@login_required
@require_GET
def kpis(request: HttpRequest) -> HttpResponse:
    _check_access(request)
    return render(request, "dashboards/_kpis.html", _kpis_context(timezone.now()))


def _script_safe(text: str) -> str:
    """JSON made safe inside a <script> element, as Django's json_script escapes it."""
    return text.translate({ord("<"): "\\u003c", ord(">"): "\\u003e", ord("&"): "\\u0026"})


@html_page
@require_GET
def chart(request: HttpRequest, key: str, project: str | None = None) -> HttpResponse:
    chart_spec, chart_request, table = _chart_data(request, key, project)
    drawing = chart_spec.draw(table, chart_request)
    return render(request, "dashboards/_chart.html", {
        "chart": chart_spec, "drawing": drawing, "records": table.records(),
        "urls": _chart_urls(chart_spec, request, chart_request.time_range, chart_request.project),
        "figure_json": _script_safe(figure_json(drawing.figure)) if drawing.figure is not None else "",
        "time_range": chart_request.time_range,
    })


def _csv_value(value: object) -> object:
    if isinstance(value, dt.datetime):
        return format_timestamp(value)
    return "" if value is None else value


@html_page
@require_GET
def chart_csv(request: HttpRequest, key: str, project: str | None = None) -> HttpResponse:
    chart_spec, chart_request, table = _chart_data(request, key, project)
    suffix = f"-{chart_request.time_range.key}" if chart_spec.over_time else ""
    response = HttpResponse(content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = (f'attachment; filename="trainhub-{chart_spec.key}{suffix}-'
                                       f'{chart_request.now:%Y%m%dT%H%MZ}.csv"')
    writer = csv.writer(response)
    writer.writerow(table.columns)
    writer.writerows([_csv_value(value) for value in row] for row in table.rows)
    return response
