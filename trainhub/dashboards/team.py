"""A project's team page: what the team runs and waits for, by GPU type over time; each waiting
job with its reasons and estimated start; its quotas; and what it has cost so far this month.

The GPUs over time are read from the jobs themselves (submitted, started, ended), not from the
cluster-wide samples, so a team's history is exact and needs no per-project sampling.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from typing import Any

from django.db.models import Q

from trainhub.catalog.machines import accelerator_label
from trainhub.catalog.pricing import SLURM, cost_of
from trainhub.common.plotting import trace
from trainhub.dashboards.charts import (
    Chart,
    ChartRequest,
    Drawing,
    Table,
    _figure,
    _stacked,
    count_axis,
    draw_quotas,
    draw_waiting_jobs,
    history_note,
    line_mode,
    read_quotas,
    read_waiting_jobs,
    time_axis,
    type_color,
)
from trainhub.dashboards.sources import JobSpan, job_sources
from trainhub.jobs.costs import gpus_by_type, prices
from trainhub.jobs.models import CustomJob
from trainhub.jobs.templatetags.trainhub_format import compact_duration

#: Points per series on the GPUs-over-time chart, whatever the range.
POINTS = 120


def _custom_job_spans(request: ChartRequest, since: dt.datetime) -> list[JobSpan]:
    rows = (CustomJob.objects.filter(project=request.project, create_time__lt=request.now)
            .filter(Q(end_time__isnull=True) | Q(end_time__gte=since))
            .values_list("accelerator_type", "gpu_count", "create_time", "start_time", "end_time"))
    return [JobSpan(kind, gpus, created, began, ended) for kind, gpus, created, began, ended in rows if gpus]


def read_team_gpus(request: ChartRequest) -> Table:
    """GPUs the project's jobs (CustomJobs and Slurm jobs) ran on and waited for, per GPU type, in
    POINTS equal buckets of the range: the most at any instant of each bucket."""
    since = request.now - dt.timedelta(minutes=request.time_range.minutes)
    spans = _custom_job_spans(request, since) + [
        span for source in job_sources() for span in source.spans(request.project, since, request.now)]
    step = (request.now - since) / POINTS
    moments = [since + step * (index + 1) for index in range(POINTS)]
    rows = []
    for kind in sorted({span.gpu_type for span in spans if span.gpus}, key=accelerator_label):
        peaks = bucket_peaks([span for span in spans if span.gpu_type == kind], moments, step,
                             until=request.now + step)
        rows.extend((moment, kind, running, waiting) for moment, (running, waiting) in zip(moments, peaks))
    return Table(("time", "gpu_type", "running_gpus", "waiting_gpus"), rows)


def bucket_peaks(spans: list[JobSpan], moments: list[dt.datetime], step: dt.timedelta, *,
                 until: dt.datetime) -> list[tuple[int, int]]:
    """Per bucket ``(moment - step, moment]``: the most GPUs running and the most waiting at any
    instant of it (a job runs from its start until its end, ``until`` while it runs; it waits from
    its submission until it starts or ends). A peak, not a sample at the bucket's end: a job
    shorter than a bucket (a minute's run on the 24 h range, whose buckets are 12 minutes) still
    shows. One pass over the jobs' sorted start and end times."""
    changes: dict[dt.datetime, list[int]] = defaultdict(lambda: [0, 0])
    for span in spans:
        ended = span.ended or until
        waited_until = min(ended, span.started or ended)
        if span.submitted < waited_until:
            changes[span.submitted][1] += span.gpus
            changes[waited_until][1] -= span.gpus
        if span.started is not None and span.started < ended:
            changes[span.started][0] += span.gpus
            changes[ended][0] -= span.gpus
    times = sorted(changes)
    running = waiting = index = 0
    peaks = []
    for moment in moments:
        low = moment - step
        while index < len(times) and times[index] <= low:
            running, waiting = running + changes[times[index]][0], waiting + changes[times[index]][1]
            index += 1
        most_running, most_waiting = running, waiting
        while index < len(times) and times[index] <= moment:
            running, waiting = running + changes[times[index]][0], waiting + changes[times[index]][1]
            most_running, most_waiting = max(most_running, running), max(most_waiting, waiting)
            index += 1
        peaks.append((most_running, most_waiting))
    return peaks


def draw_team_gpus(table: Table, request: ChartRequest) -> Drawing:
    """Running GPUs stacked by type above, waiting GPUs below, on the range's time axis."""
    records = table.records()
    if not any(r["running_gpus"] or r["waiting_gpus"] for r in records):
        return Drawing(None, f"No job of project {request.project.project_id} asked for GPUs in the last "
                             f"{request.time_range.label}: nothing ran and nothing waited.")
    traces: list[Any] = []
    for kind in sorted({r["gpu_type"] for r in records}, key=accelerator_label):
        series = [r for r in records if r["gpu_type"] == kind]
        times = [r["time"].isoformat() for r in series]
        style = {"mode": line_mode(len(series)), "line": {"width": 0.5, "color": type_color(kind)},
                 "legendgroup": kind, "name": accelerator_label(kind)}
        traces.append(trace("scatter", x=times, y=[r["running_gpus"] for r in series], stackgroup="running",
                            hovertemplate="%{y} GPUs running", **style))
        traces.append(trace("scatter", x=times, y=[r["waiting_gpus"] for r in series], yaxis="y2",
                            stackgroup="waiting", showlegend=False, hovertemplate="%{y} GPUs waiting", **style))
    first = min(r["time"] for r in records if r["running_gpus"] or r["waiting_gpus"])
    panels = _stacked(["GPUs running", "GPUs waiting"], gap=0.08)
    panels["xaxis"].update(time_axis(request, first))
    latest = max(r["time"] for r in records)
    totals = defaultdict(int)
    for r in records:
        if r["time"] == latest:
            totals["running"] += r["running_gpus"]
            totals["waiting"] += r["waiting_gpus"]
    for axis, key, title in (("yaxis", "running_gpus", "GPUs running"), ("yaxis2", "waiting_gpus", "GPUs waiting")):
        by_time: dict[dt.datetime, int] = defaultdict(int)
        for r in records:
            by_time[r["time"]] += r[key]
        panels[axis].update(count_axis(list(by_time.values()), title))
    drawn = _figure(traces, request, height=420, panels=panels)
    return Drawing(drawn, f"Now {totals['running']} GPUs running and {totals['waiting']} waiting for "
                          f"project {request.project.project_id}." + history_note(request, first))


def month_start(now: dt.datetime) -> dt.datetime:
    return now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)


def read_month_cost(request: ChartRequest) -> Table:
    """What every job of the project cost from the first of this month (UTC) until now or its
    end, per GPU type and strategy: its CustomJobs at their strategy's price (those on a
    persistent resource are billed with it), and the job sources' (Slurm's) as SLURM, at the
    on-demand price (catalog.pricing.SLURM)."""
    start = month_start(request.now)
    table = prices()
    totals: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0, 0.0, 0.0])

    def add(kind: str, gpus: int, began: dt.datetime, ended: dt.datetime | None, strategy: str) -> None:
        cost = cost_of({kind: gpus}, ((ended or request.now) - max(began, start)).total_seconds(), strategy, table)
        row = totals[(kind, strategy)]
        row[0] += 1
        row[1] += sum(cost.gpu_hours.values())
        row[2] += cost.total

    jobs = (CustomJob.objects.filter(project=request.project, start_time__isnull=False, start_time__lt=request.now)
            .filter(Q(end_time__isnull=True) | Q(end_time__gte=start)).only("spec", "strategy", "start_time",
                                                                          "end_time"))
    for job in jobs:
        for kind, gpus in gpus_by_type(job.spec).items():
            add(kind, gpus, job.start_time, job.end_time, job.strategy)
    for span in (span for source in job_sources() for span in source.spans(request.project, start, request.now)):
        if span.started is not None and span.gpus and span.started < request.now:
            add(span.gpu_type, span.gpus, span.started, span.ended, SLURM)
    return Table(("gpu_type", "strategy", "jobs", "gpu_hours", "cost_usd"),
                 [(kind, strategy, int(jobs), round(hours, 2), round(usd, 2))
                  for (kind, strategy), (jobs, hours, usd) in sorted(totals.items())])


#: How the cost chart's legend names a price, where its strategy's own word does not say it.
PRICE_NAMES = {"STANDARD": "on-demand price", SLURM: "Slurm jobs, at the on-demand price"}


def price_name(strategy: str) -> str:
    """"FLEX_START" -> "flex-start price"; see PRICE_NAMES."""
    return PRICE_NAMES.get(strategy, f"{strategy.replace('_', '-').lower()} price")


def draw_month_cost(table: Table, request: ChartRequest) -> Drawing:
    records = table.records()
    month = f"{month_start(request.now):%B %Y}"
    if not records:
        return Drawing(None, f"Nothing billed in {month} so far: no GPU job of project "
                             f"{request.project.project_id} has run since the 1st.")
    strategies = sorted({r["strategy"] for r in records})
    kinds = sorted({r["gpu_type"] for r in records}, key=accelerator_label)
    traces = [trace("bar", x=[accelerator_label(kind) for kind in kinds],
                    y=[sum(r["cost_usd"] for r in records if r["gpu_type"] == kind and r["strategy"] == strategy)
                       for kind in kinds], name=price_name(strategy),
                    hovertemplate=f"{price_name(strategy)}: $%{{y:,.2f}}<extra></extra>")
              for strategy in strategies]
    drawn = _figure(traces, request, height=300, barmode="stack", hovermode="closest", showlegend=True,
                    panels={"yaxis": {"title": {"text": "US dollars"}, "tickprefix": "$"},
                            "xaxis": {"title": {"text": "GPU type"}}})
    total = sum(r["cost_usd"] for r in records)
    hours = sum(r["gpu_hours"] for r in records)
    return Drawing(drawn, f"${total:,.2f} so far in {month}, {hours:,.2f} GPU-hours "
                          f"({compact_duration(hours * 3600)} of GPU time).")


TEAM_CHARTS: dict[str, Chart] = {chart.key: chart for chart in (
    Chart("team-gpus", "GPUs running and waiting, by GPU type", read_team_gpus, draw_team_gpus, wide=True),
    Chart("team-waiting", "Why our jobs wait", read_waiting_jobs, draw_waiting_jobs, over_time=False, wide=True,
          extra_template="dashboards/_waiting_jobs.html"),
    Chart("team-quota", "Quota use", read_quotas, draw_quotas, over_time=False),
    Chart("team-cost", "Cost so far this month", read_month_cost, draw_month_cost, over_time=False),
)}
