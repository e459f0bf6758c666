"""The dashboard's charts. Each one reads its data as a ``Table`` (what its CSV download holds)
and draws a Plotly figure from that table alone, so the chart and its CSV never disagree.

Figures are plain dicts (trainhub.common.plotting) drawn by the vendored plotly.js.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Callable

from django.contrib.auth.models import AbstractBaseUser
from django.urls import reverse

from trainhub.catalog.machines import NO_ACCELERATOR, accelerator_label, accelerator_types
from trainhub.common.plotting import figure, trace
from trainhub.common.wire import format_timestamp
from trainhub.dashboards import selectors
from trainhub.dashboards.sources import capacity_visibility, fairshare_rows, job_sources
from trainhub.dashboards.timeseries import WAIT_BUCKETS, TimeRange, axis_start, nice_scale
from trainhub.iam.models import Project
from trainhub.iam.selectors import projects_with_permission
from trainhub.jobs import states
from trainhub.jobs.templatetags.trainhub_format import compact_duration
from trainhub.scheduling.quota import metric_accelerator
from trainhub.scheduling.selectors import quota_rows_for_user

WAITING_JOBS_SHOWN = 12
JOBS_LIST = "aiplatform.customJobs.list"


@dataclass(frozen=True)
class ChartRequest:
    user: AbstractBaseUser
    time_range: TimeRange
    now: dt.datetime
    #: The wall-screen mode draws on a dark background (where the screen is wide enough, the page
    #: sizes each figure to its grid cell).
    wall: bool = False
    #: A team page's project: the charts then show only its jobs and quotas.
    project: Project | None = None


@dataclass
class Table:
    """A chart's data: column names and rows of plain values (numbers, text, times)."""

    columns: tuple[str, ...]
    rows: list[tuple[Any, ...]] = field(default_factory=list)

    def records(self) -> list[dict[str, Any]]:
        return [dict(zip(self.columns, row)) for row in self.rows]


@dataclass(frozen=True)
class Drawing:
    figure: dict[str, Any] | None
    #: One sentence saying what the chart shows now (caption, and the text alternative).
    summary: str


@dataclass(frozen=True)
class Chart:
    key: str
    title: str
    read: Callable[[ChartRequest], Table]
    draw: Callable[[Table, ChartRequest], Drawing]
    #: Whether the time range selector changes this chart.
    over_time: bool = True
    wide: bool = False
    #: Shown under the figure, with the table's ``records``.
    extra_template: str = ""


# --- Look ----------------------------------------------------------------------------------

_PALETTE = ("#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7",
            "#9c755f", "#86bcb6", "#d37295", "#a0cbe8")
_TYPE_COLORS = {kind: _PALETTE[index % len(_PALETTE)] for index, kind in enumerate(accelerator_types())}
_TYPE_COLORS[NO_ACCELERATOR] = "#9aa5b1"
STATE_COLORS = {states.QUEUED: "#8792a2", states.PENDING: "#e0a030", states.RUNNING: "#3b6fd8",
                states.SUCCEEDED: "#2f9e5b", states.FAILED: "#d64541", states.CANCELLING: "#8b74b8",
                states.CANCELLED: "#8b74b8"}
_WAIT_COLORS = ("#2f9e5b", "#8cc265", "#edc948", "#f28e2b", "#d64541")


def type_color(kind: str) -> str:
    return _TYPE_COLORS.get(kind, _PALETTE[hash(kind) % len(_PALETTE)])


_MARGIN = {"l": 8, "r": 8, "t": 8, "b": 8}


def _layout(request: ChartRequest, *, height: int, panels: dict[str, dict] | None = None,
            **extra: Any) -> dict[str, Any]:
    """The look every figure shares: the legend above the plot, panels named by their axis titles.

    ``panels`` adds axes ("xaxis2", "yaxis2"...) with the same look, for figures of several
    panels (see _stacked and _side_by_side).
    """
    text = "#e8edf3" if request.wall else "#1d2733"
    grid = "rgba(232,237,243,.14)" if request.wall else "#e3e8ee"
    axis = {"gridcolor": grid, "zerolinecolor": grid, "linecolor": grid, "automargin": True}
    layout = {
        "template": "none", "margin": dict(_MARGIN),
        "paper_bgcolor": "rgba(0,0,0,0)", "plot_bgcolor": "rgba(0,0,0,0)",
        "font": {"family": "system-ui, -apple-system, 'Segoe UI', Roboto, Arial, sans-serif", "size": 13,
                 "color": text},
        "legend": {"orientation": "h", "x": 0, "y": 1.02, "yanchor": "bottom", "bgcolor": "rgba(0,0,0,0)"},
        "hovermode": "x unified", "xaxis": dict(axis), "yaxis": {**axis, "rangemode": "tozero"},
    }
    for name, settings in (panels or {}).items():
        layout[name] = {**layout.get(name, {**axis, "rangemode": "tozero"} if name.startswith("y") else axis),
                        **settings}
    layout["height"] = height
    layout.update(extra)
    return layout


def _figure(traces: list[dict[str, Any]], request: ChartRequest, *, height: int = 320, **layout: Any) -> dict[str, Any]:
    return figure(traces, _layout(request, height=height, **layout))


def _axis(letter: str, index: int) -> tuple[str, str]:
    """(layout key, trace reference) of the index-th (0-based) x or y axis: ("yaxis2", "y2")."""
    suffix = str(index + 1) if index else ""
    return f"{letter}axis{suffix}", f"{letter}{suffix}"


def _stacked(titles: list[str], gap: float = 0.06) -> dict[str, dict]:
    """Panels stacked top to bottom on one shared x axis (drawn under the last), each titled on
    its y axis; the panel of titles[i] is drawn on _axis("y", i)."""
    height = (1 - gap * (len(titles) - 1)) / len(titles)
    panels = {"xaxis": {"anchor": _axis("y", len(titles) - 1)[1]}}
    for index, title in enumerate(titles):
        top = 1 - index * (height + gap)
        panels[_axis("y", index)[0]] = {"domain": [max(0.0, top - height), top], "title": {"text": title}}
    return panels


def _side_by_side(titles: list[str], widths: list[float], gap: float = 0.1) -> dict[str, dict]:
    """Panels left to right, each with its own axes and titled on its x axis; the panel of
    titles[i] is drawn on _axis("x", i) and _axis("y", i)."""
    scale = (1 - gap * (len(titles) - 1)) / sum(widths)
    panels, left = {}, 0.0
    for index, (title, width) in enumerate(zip(titles, widths)):
        (x_key, x_ref), (y_key, y_ref) = _axis("x", index), _axis("y", index)
        panels[x_key] = {"domain": [left, min(1.0, left + width * scale)], "anchor": y_ref, "title": {"text": title}}
        panels[y_key] = {"anchor": x_ref}
        left += width * scale + gap
    return panels


def _times(records: list[dict[str, Any]]) -> list[str]:
    """The records' times as ISO strings: Plotly reads them as dates, and copies strings far faster
    than datetime objects."""
    return [record["time"].isoformat() for record in records]


def time_axis(request: ChartRequest, first: dt.datetime | None) -> dict[str, Any]:
    """The x axis of a chart over time, ending now: the whole range, or from the ``first`` sample
    when the history is shorter (see axis_start); never Plotly's own range around one sample,
    a millisecond wide."""
    start = axis_start(request.time_range, first, request.now)
    return {"type": "date", "range": [start.isoformat(), request.now.isoformat()]}


def history_note(request: ChartRequest, first: dt.datetime | None) -> str:
    """What a chart over time says when its axis starts after the range does (time_axis)."""
    start = axis_start(request.time_range, first, request.now)
    if first is None or start <= request.now - dt.timedelta(minutes=request.time_range.minutes):
        return ""
    return (f" The history starts at {first:%H:%M} UTC, {compact_duration((request.now - first).total_seconds())} "
            f"ago: the time axis starts there, not {request.time_range.label} ago.")


def count_axis(values: list[float], title: str) -> dict[str, Any]:
    """A y axis of whole things (jobs, GPUs): whole-number ticks, at least 0 to 4 shown."""
    axis: dict[str, Any] = {"title": {"text": title}, "rangemode": "tozero", "tickformat": ",~r"}
    if max(values, default=0) < 4:
        axis.update(range=[0, 4], dtick=1, autorange=False)
    return axis


def line_mode(points: int) -> str:
    """Lines, with markers while there are too few points for a line to show."""
    return "lines" if points > 2 else "lines+markers"


def duration_unit(seconds: list[float]) -> tuple[str, float]:
    """("seconds" | "minutes" | "hours", divisor) that reads best for durations up to max(seconds)."""
    longest = max(seconds, default=0)
    if longest < 120:
        return "seconds", 1.0
    if longest < 2 * 3600:
        return "minutes", 60.0
    return "hours", 3600.0


def duration_axis(seconds: list[float], title: str) -> tuple[str, float, dict[str, Any]]:
    """(unit, divisor, axis) for durations: the unit that reads best (duration_unit), named in
    the axis title ("mean wait (minutes)" from "mean wait ({unit})"), and round ticks from 0 to
    past the longest (nice_scale) whatever the number of samples."""
    unit, per_unit = duration_unit(seconds)
    top, step = nice_scale(max(seconds, default=0) / per_unit)
    return unit, per_unit, {"title": {"text": title.format(unit=unit)}, "range": [0, top], "dtick": step,
                            "autorange": False, "rangemode": "tozero"}


def _pct(part: float, whole: float) -> str:
    return f"{round(100 * part / whole)}%" if whole else "–"


def _since(request: ChartRequest) -> str:
    return f"in the last {request.time_range.label}"


# --- GPU allocation by GPU type, per pool and per cluster ------------------------------------

def read_allocation(request: ChartRequest) -> Table:
    visible = capacity_visibility(request.user)
    points = [p for p in selectors.capacity_series(time_range=request.time_range, now=request.now)
              if visible(p.source, p.scope)]
    return Table(("time", "source", "scope", "gpu_type", "allocated_gpus", "dedicated_gpus", "total_gpus"),
                 [(p.time, p.source, p.scope, p.accelerator_type, round(p.gpus_allocated, 2),
                   round(p.gpus_dedicated, 2), round(p.gpus_total, 2)) for p in points])


def draw_allocation(table: Table, request: ChartRequest) -> Drawing:
    """One panel per GPU type: GPUs allocated to jobs, stacked per pool (and cluster), GPUs held by
    dedicated owners, and the capacity of the nodes that are up."""
    records = table.records()
    if not records:
        return Drawing(None, "No samples yet: the first appears within a minute of the sampler starting.")
    kinds = sorted({r["gpu_type"] for r in records}, key=accelerator_label)
    traces: list[Any] = []
    latest = max(r["time"] for r in records)
    now_allocated = now_total = 0.0
    for index, kind in enumerate(kinds):
        rows = [r for r in records if r["gpu_type"] == kind]
        y_ref = _axis("y", index)[1]
        for shade, (source, scope) in enumerate(sorted({(r["source"], r["scope"]) for r in rows})):
            series = [r for r in rows if (r["source"], r["scope"]) == (source, scope)]
            traces.append(trace("scatter",
                x=_times(series), y=[r["allocated_gpus"] for r in series], yaxis=y_ref, mode=line_mode(len(series)),
                stackgroup=f"allocated-{kind}", name=scope if source == "pool" else f"{scope} ({source})",
                legendgroup=kind, line={"width": 0.5, "color": type_color(kind)}, opacity=1 - 0.2 * (shade % 3),
                hovertemplate="%{y:.0f} GPUs"))
        totals: dict[dt.datetime, list[float]] = defaultdict(lambda: [0.0, 0.0])
        for r in rows:
            if r["source"] == "pool":  # other sources break down GPUs the pools already count
                totals[r["time"]][0] += r["total_gpus"]
                totals[r["time"]][1] += r["dedicated_gpus"]
        times = sorted(totals)
        x = [time.isoformat() for time in times]
        if any(totals[t][1] for t in times):
            traces.append(trace("scatter", x=x, y=[totals[t][1] for t in times], yaxis=y_ref, mode="lines",
                                name="dedicated", line={"color": "#8792a2", "dash": "dot", "width": 2},
                                legendgroup="dedicated", showlegend=index == 0, hovertemplate="%{y:.0f} dedicated"))
        traces.append(trace("scatter", x=x, y=[totals[t][0] for t in times], yaxis=y_ref, mode="lines", name="capacity",
                            line={"color": "#c2410c", "dash": "dash", "width": 2}, legendgroup="capacity",
                            showlegend=index == 0, hovertemplate="%{y:.0f} capacity"))
        now_allocated += sum(r["allocated_gpus"] for r in rows if r["time"] == latest)
        now_total += totals[latest][0]
    first = min(r["time"] for r in records)
    panels = _stacked([f"{accelerator_label(kind)} GPUs" for kind in kinds], gap=0.04)
    panels["xaxis"].update(time_axis(request, first))
    for index, kind in enumerate(kinds):
        panels[_axis("y", index)[0]].update(count_axis([r["total_gpus"] for r in records if r["gpu_type"] == kind],
                                                       f"{accelerator_label(kind)} GPUs"))
    drawn = _figure(traces, request, height=120 + 170 * len(kinds), panels=panels)
    summary = (f"Now {now_allocated:.0f} of {now_total:.0f} GPUs allocated to jobs "
               f"({_pct(now_allocated, now_total)}), over {len(kinds)} GPU type{'s' if len(kinds) != 1 else ''}."
               + history_note(request, first))
    return Drawing(drawn, summary)


# --- Queue depth ---------------------------------------------------------------------------

def read_queue(request: ChartRequest) -> Table:
    points = selectors.queue_series(time_range=request.time_range, now=request.now)
    return Table(("time", "gpu_type", "queued_jobs", "pending_jobs", "running_jobs", "waiting_gpus",
                  "oldest_wait_seconds"),
                 [(p.time, p.accelerator_type, round(p.levels["queued_jobs"], 2), round(p.levels["pending_jobs"], 2),
                   round(p.levels["running_jobs"], 2), round(p.levels["waiting_gpus"], 2), p.oldest_wait_seconds)
                  for p in points])


def draw_queue(table: Table, request: ChartRequest) -> Drawing:
    """Jobs waiting (queued + pending) stacked per GPU type, and the GPUs they ask for."""
    records = table.records()
    if not records:
        return Drawing(None, "No samples yet: the first appears within a minute of the sampler starting.")
    kinds = sorted({r["gpu_type"] for r in records if r["queued_jobs"] + r["pending_jobs"] or r["waiting_gpus"]},
                   key=accelerator_label)
    if not kinds:  # axes without a trace would draw one empty panel of the two, under the sentence
        return Drawing(None, f"No job waited {_since(request)}: every sample found the queue empty.")
    traces: list[Any] = []
    for kind in kinds:
        series = [r for r in records if r["gpu_type"] == kind]
        times = _times(series)
        style = {"mode": line_mode(len(series)), "line": {"width": 0.5, "color": type_color(kind)},
                 "legendgroup": kind, "name": accelerator_label(kind)}
        traces.append(trace("scatter", x=times, y=[r["queued_jobs"] + r["pending_jobs"] for r in series],
                            stackgroup="jobs", hovertemplate="%{y:.0f} jobs waiting", **style))
        traces.append(trace("scatter", x=times, y=[r["waiting_gpus"] for r in series], yaxis="y2", stackgroup="gpus",
                            showlegend=False, hovertemplate="%{y:.0f} GPUs asked", **style))
    # Short panel titles: on the wall screen each panel is a few lines of text tall.
    first = min(r["time"] for r in records)
    panels = _stacked(["jobs", "GPUs"], gap=0.08)
    panels["xaxis"].update(time_axis(request, first))
    panels["yaxis"].update(count_axis([r["queued_jobs"] + r["pending_jobs"] for r in records], "jobs"))
    panels["yaxis2"].update(count_axis([r["waiting_gpus"] for r in records], "GPUs"))
    drawn = _figure(traces, request, height=420, panels=panels)
    latest = max(r["time"] for r in records)
    jobs = sum(r["queued_jobs"] + r["pending_jobs"] for r in records if r["time"] == latest)
    gpus = sum(r["waiting_gpus"] for r in records if r["time"] == latest)
    oldest = max((r["oldest_wait_seconds"] for r in records if r["time"] == latest), default=0)
    summary = f"Now {jobs:.0f} jobs waiting for {gpus:.0f} GPUs"
    summary += f"; the oldest has waited {compact_duration(oldest)}." if jobs else "."
    return Drawing(drawn, summary + history_note(request, first))


# --- Wait-time distribution ----------------------------------------------------------------

def read_waits(request: ChartRequest) -> Table:
    buckets: dict[dt.datetime, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for point in selectors.queue_series(time_range=request.time_range, now=request.now):
        row = buckets[point.time]
        for name, value in point.flows.items():
            row[name] += value
        row["worst_p90_seconds"] = max(row["worst_p90_seconds"], point.worst_p90_seconds)
    columns = ("time", "started_jobs", "mean_wait_seconds", "worst_minute_p90_seconds",
               *(bucket.column for bucket in WAIT_BUCKETS))
    rows = []
    for time in sorted(buckets):
        row = buckets[time]
        mean = row["started_wait_seconds"] / row["started_jobs"] if row["started_jobs"] else None
        rows.append((time, int(row["started_jobs"]), None if mean is None else round(mean),
                     int(row["worst_p90_seconds"]), *(int(row[bucket.column]) for bucket in WAIT_BUCKETS)))
    return Table(columns, rows)


def draw_waits(table: Table, request: ChartRequest) -> Drawing:
    """Jobs that started in each bucket, stacked by how long they waited, and their mean wait."""
    records = table.records()
    started = sum(r["started_jobs"] for r in records)
    if not started:
        return Drawing(None, f"No job started {_since(request)}.")
    times = _times(records)
    traces: list[Any] = [
        trace("bar", x=times, y=[r[bucket.column] for r in records], name=bucket.label,
              marker={"color": color, "line": {"width": 0}}, hovertemplate=f"%{{y}} waited {bucket.label}")
        for bucket, color in zip(WAIT_BUCKETS, _WAIT_COLORS)
    ]
    unit, per_unit, mean_axis = duration_axis(
        [r["mean_wait_seconds"] for r in records if r["mean_wait_seconds"] is not None], "mean wait ({unit})")
    # Named without its unit (which its axis says) to keep the legend short.
    traces.append(trace("scatter", x=times, y=[None if r["mean_wait_seconds"] is None
                                               else round(r["mean_wait_seconds"] / per_unit, 2) for r in records],
                        name="mean wait", yaxis="y2", mode="lines+markers", connectgaps=True,
                        line={"color": "#1d2733" if not request.wall else "#e8edf3", "width": 2},
                        marker={"size": 4}, hovertemplate=f"mean wait %{{y:.1f}} {unit}"))
    first = min(r["time"] for r in records)
    # The legend in reading order, three to a line: Plotly lists stacked bars reversed and, beside
    # a second y axis, one to a line, which leaves a wall screen's cell no room for the bars.
    layout = _layout(request, height=340, barmode="stack", bargap=0.15)
    layout["legend"].update(traceorder="normal", entrywidth=1 / 3, entrywidthmode="fraction")
    layout["xaxis"].update(time_axis(request, first))
    layout["yaxis2"] = {**layout["yaxis"], **mean_axis, "overlaying": "y", "side": "right", "showgrid": False}
    layout["yaxis"].update(count_axis([sum(r[b.column] for b in WAIT_BUCKETS) for r in records], "jobs started"))
    drawn = figure(traces, layout)
    waited = sum((r["mean_wait_seconds"] or 0) * r["started_jobs"] for r in records)
    return Drawing(drawn, f"{started} jobs started {_since(request)}; they waited "
                           f"{compact_duration(waited / started)} on average." + history_note(request, first))


# --- Jobs by state -------------------------------------------------------------------------

def read_states(request: ChartRequest) -> Table:
    active: dict[tuple[str, str], tuple[int, int]] = defaultdict(lambda: (0, 0))
    for group in selectors.active_jobs():
        jobs, gpus = active[(group.state, group.accelerator_type)]
        active[(group.state, group.accelerator_type)] = (jobs + group.jobs, gpus + group.gpus)
    ended: dict[tuple[str, str], int] = defaultdict(int)
    for point in selectors.queue_series(time_range=request.time_range, now=request.now):
        for state, column in ((states.SUCCEEDED, "ended_succeeded"), (states.FAILED, "ended_failed"),
                              (states.CANCELLED, "ended_cancelled")):
            ended[(state, point.accelerator_type)] += point.flows[column]
    keys = sorted(set(active) | {key for key, jobs in ended.items() if jobs})
    return Table(("state", "gpu_type", "active_jobs", "active_gpus", "ended_in_range"),
                 [(state, kind, active.get((state, kind), (0, 0))[0], active.get((state, kind), (0, 0))[1],
                   ended.get((state, kind), 0)) for state, kind in keys])


_ACTIVE_STATES = (states.QUEUED, states.PENDING, states.RUNNING, states.CANCELLING)
_ENDED_STATES = (states.SUCCEEDED, states.FAILED, states.CANCELLED)


def draw_states(table: Table, request: ChartRequest) -> Drawing:
    """Active jobs by state now, and jobs that ended in the range by final state, per GPU type."""
    records = table.records()
    if not records:
        return Drawing(None, f"No job is active and none ended {_since(request)}.")
    traces: list[Any] = []
    for kind in sorted({r["gpu_type"] for r in records}, key=accelerator_label):
        rows = {r["state"]: r for r in records if r["gpu_type"] == kind}
        style = {"marker": {"color": type_color(kind)}, "legendgroup": kind, "name": accelerator_label(kind),
                 "hovertemplate": "%{y} jobs"}
        traces.append(trace("bar", x=[s.removeprefix("JOB_STATE_").capitalize() for s in _ACTIVE_STATES],
                            y=[rows[s]["active_jobs"] if s in rows else 0 for s in _ACTIVE_STATES], **style))
        traces.append(trace("bar", x=[s.removeprefix("JOB_STATE_").capitalize() for s in _ENDED_STATES],
                            y=[rows[s]["ended_in_range"] if s in rows else 0 for s in _ENDED_STATES],
                            xaxis="x2", yaxis="y2", showlegend=False, **style))
    # "ended" under the right panel: the title says over which range, and a wall screen's cell is narrow.
    panels = _side_by_side(["active now", "ended"], [0.58, 0.42])
    for axis, states_shown, column in (("yaxis", _ACTIVE_STATES, "active_jobs"),
                                       ("yaxis2", _ENDED_STATES, "ended_in_range")):
        stacked = [sum(r[column] for r in records if r["state"] == state) for state in states_shown]
        panels[axis].update(count_axis(stacked, "jobs"))
    drawn = _figure(traces, request, height=340, barmode="stack", hovermode="closest", panels=panels)
    active = sum(r["active_jobs"] for r in records)
    ended = {s: sum(r["ended_in_range"] for r in records if r["state"] == s) for s in _ENDED_STATES}
    total_ended = sum(ended.values())
    return Drawing(drawn, f"{active} active jobs now; {total_ended} ended {_since(request)}, "
                           f"{_pct(ended[states.SUCCEEDED], total_ended)} of them successfully.")


# --- Quota usage vs limit ------------------------------------------------------------------

def read_quotas(request: ChartRequest) -> Table:
    rows = [row for row in quota_rows_for_user(user=request.user)
            if request.project is None or row.quota.project_id == request.project.pk]
    return Table(("project", "region", "metric", "in_use_gpus", "limit_gpus"),
                 [(r.quota.project.project_id, r.quota.location, r.quota.metric, r.in_use, r.quota.limit)
                  for r in rows])


def _metric_label(metric: str) -> str:
    """custom_model_training_preemptible_nvidia_h100_gpus -> "H100 80GB preemptible"."""
    accelerator = metric_accelerator(metric)
    name = accelerator_label(accelerator) if accelerator else metric
    return f"{name} preemptible" if "_preemptible_" in metric else name


def draw_quotas(table: Table, request: ChartRequest) -> Drawing:
    """Per project and quota metric: the limit as a light bar, GPUs in use as a dark one."""
    records = table.records()
    if not records:
        whose = f"project {request.project.project_id}" if request.project else "your projects"
        return Drawing(None, f"No quota limit is set for {whose}: every GPU type is unlimited.")
    # The project and region only where they tell rows apart: a phone's labels share its width with the bars.
    regions, projects = {r["region"] for r in records}, {r["project"] for r in records}
    labels = [(f"{r['project']} · " if len(projects) > 1 else "") + _metric_label(r["metric"])
              + (f" · {r['region']}" if len(regions) > 1 else "") for r in records]
    used_color = ["#d64541" if r["limit_gpus"] and r["in_use_gpus"] >= r["limit_gpus"] else "#3b6fd8"
                  for r in records]
    traces = [
        trace("bar", y=labels, x=[r["limit_gpus"] for r in records], orientation="h", name="limit",
              marker={"color": "rgba(135,146,162,.35)"}, hovertemplate="limit %{x}"),
        trace("bar", y=labels, x=[r["in_use_gpus"] for r in records], orientation="h", name="in use",
              marker={"color": used_color}, width=0.45, hovertemplate="in use %{x}", cliponaxis=False,
              text=[_pct(r["in_use_gpus"], r["limit_gpus"]) for r in records], textposition="outside"),
    ]
    # The right margin leaves room for the percentage beside a full bar.
    drawn = _figure(traces, request, height=90 + 34 * len(records), barmode="overlay", hovermode="y unified",
                    margin={**_MARGIN, "r": 48}, panels={"yaxis": {"autorange": "reversed"}})
    full = sum(1 for r in records if r["limit_gpus"] and r["in_use_gpus"] >= 0.8 * r["limit_gpus"])
    return Drawing(drawn, f"{full} of {len(records)} quota limits are at least 80% used.")


# --- Fair-share ----------------------------------------------------------------------------

def read_fairshare(request: ChartRequest) -> Table:
    return Table(("cluster", "account", "user", "raw_shares", "norm_shares", "effective_usage", "fairshare"),
                 [(r.cluster, r.account, r.user, r.raw_shares, r.norm_shares, r.effective_usage, r.fairshare)
                  for r in fairshare_rows(request.user)])


def draw_fairshare(table: Table, request: ChartRequest) -> Drawing:
    """Per Slurm account (and the user's own associations): normalized shares against effective
    usage (as sshare shows)."""
    records = table.records()
    if not records:
        return Drawing(None, "No Slurm clusters: fair-share appears here once a cluster is defined.")
    clusters = sorted({r["cluster"] for r in records})
    traces: list[Any] = []
    for index, cluster in enumerate(clusters):
        rows = [r for r in records if r["cluster"] == cluster]
        axes = {"xaxis": _axis("x", index)[1], "yaxis": _axis("y", index)[1]}
        labels = [f"{r['account']} / {r['user']}" if r["user"] else r["account"] for r in rows]
        for name, key, color in (("shares", "norm_shares", "#4e79a7"), ("effective usage", "effective_usage", "#f28e2b")):
            traces.append(trace("bar", y=labels, x=[r[key] for r in rows], orientation="h", name=name,
                                marker={"color": color}, legendgroup=name, showlegend=index == 0,
                                hovertemplate=f"{name} %{{x:.3f}}", **axes))
    most_accounts = max(sum(1 for r in records if r["cluster"] == cluster) for cluster in clusters)
    drawn = _figure(traces, request, height=120 + 40 * most_accounts, barmode="group", hovermode="y unified",
                    panels=_side_by_side(clusters, [1.0] * len(clusters)))
    over = sum(1 for r in records if r["effective_usage"] > r["norm_shares"])
    return Drawing(drawn, f"{over} of {len(records)} accounts use more than their share.")


# --- Per-job wait explanation --------------------------------------------------------------

def read_waiting_jobs(request: ChartRequest) -> Table:
    """The longest-waiting jobs of the user's projects: CustomJobs with the scheduler's reasons,
    and the job sources' (Slurm's pending jobs with Slurm's reason), oldest first."""
    projects = ([request.project] if request.project else
                projects_with_permission(user=request.user, permission=JOBS_LIST))
    waiting = selectors.waiting_jobs_explained(projects=projects, limit=WAITING_JOBS_SHOWN)
    rows = [(w.job.job_id, w.job.display_name, w.job.project.project_id, w.job.location, w.job.strategy,
             w.job.accelerator_type, w.job.gpu_count, int(w.waited_seconds(request.now)), w.explanation.position,
             w.explanation.estimated_start or "", " ".join(w.explanation.reasons),
             reverse("jobs:detail", kwargs={"project": w.job.project.project_id, "location": w.job.location,
                                            "job_id": w.job.job_id}))
            for w in waiting]
    rows += [(r.job_id, r.name, r.project, r.location, r.kind, r.gpu_type, r.gpus,
              int((request.now - r.submitted).total_seconds()), r.position,
              format_timestamp(r.estimated_start) if r.estimated_start else "", r.reasons, r.url)
             for source in job_sources()
             for r in source.waiting(request.user, WAITING_JOBS_SHOWN, request.project)]
    rows.sort(key=lambda row: -row[7])
    return Table(("job_id", "name", "project", "location", "kind", "gpu_type", "gpus", "waited_seconds",
                  "queue_position", "estimated_start", "reasons", "url"), rows[:WAITING_JOBS_SHOWN])


#: A job's name on a bar label, at most this long: the labels share a phone's width with the bars.
LABEL_CHARACTERS = 24


def _job_labels(records: list[dict[str, Any]]) -> list[str]:
    """Each job's name (shortened past LABEL_CHARACTERS), and the end of its id where two jobs
    shown share a name (Plotly draws one bar for equal labels)."""
    names = [r["name"] if len(r["name"]) <= LABEL_CHARACTERS else r["name"][:LABEL_CHARACTERS - 1] + "…"
             for r in records]
    return [f"{name} · …{r['job_id'][-5:]}" if names.count(name) > 1 else name for name, r in zip(names, records)]


def draw_waiting_jobs(table: Table, request: ChartRequest) -> Drawing:
    """Each waiting job as a bar of how long it has waited, coloured by GPU type; hovering shows
    why it waits (the table below says it in full, with the estimated start)."""
    records = table.records()
    if not records:
        whose = f"project {request.project.project_id}" if request.project else "your projects"
        return Drawing(None, f"No job of {whose} is waiting: every one has started or ended.")
    labels = _job_labels(records)
    reasons = [r["reasons"] or "No explanation yet: the next scheduler pass writes one." for r in records]
    unit, per_unit, waited_axis = duration_axis([r["waited_seconds"] for r in records], "{unit} waited")
    bars = trace("bar", y=labels, x=[round(r["waited_seconds"] / per_unit, 2) for r in records], orientation="h",
                 customdata=reasons, marker={"color": [type_color(r["gpu_type"]) for r in records]}, cliponaxis=False,
                 text=[compact_duration(r["waited_seconds"]) for r in records], textposition="outside",
                 hovertemplate=f"waited %{{x:.1f}} {unit}<br>%{{customdata}}<extra></extra>")
    drawn = _figure([bars], request, height=90 + 26 * len(records), hovermode="closest", showlegend=False,
                    margin={**_MARGIN, "r": 56},
                    panels={"yaxis": {"autorange": "reversed"}, "xaxis": waited_axis})
    whose = f"project {request.project.project_id}" if request.project else "your projects"
    return Drawing(drawn, f"The {len(records)} longest-waiting jobs of {whose}; the oldest has waited "
                           f"{compact_duration(records[0]['waited_seconds'])}.")


CHARTS: dict[str, Chart] = {chart.key: chart for chart in (
    Chart("gpu-allocation", "GPU allocation by GPU type", read_allocation, draw_allocation, wide=True),
    Chart("queue-depth", "Queue depth", read_queue, draw_queue),
    Chart("wait-times", "Wait before start", read_waits, draw_waits),
    Chart("jobs-by-state", "Jobs by state", read_states, draw_states),
    Chart("quota-usage", "Quota usage vs limit", read_quotas, draw_quotas, over_time=False),
    Chart("fair-share", "Fair-share", read_fairshare, draw_fairshare, over_time=False, wide=True),
    Chart("waiting-jobs", "Why jobs wait", read_waiting_jobs, draw_waiting_jobs, over_time=False, wide=True,
          extra_template="dashboards/_waiting_jobs.html"),
)}
