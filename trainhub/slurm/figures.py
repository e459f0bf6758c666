"""Plotly figures of the Slurm pages, built server-side as plain dicts (trainhub.common.plotting);
plotly.js is served from static/vendor."""

from __future__ import annotations

from trainhub.common.plotting import figure, trace
from trainhub.slurm.priority import FACTOR_NAMES, PriorityBreakdown

_COLORS = {"age": "#4e79a7", "assoc": "#76b7b2", "fairshare": "#f28e2b", "jobsize": "#59a14f",
           "partition": "#edc948", "qos": "#b07aa1", "tres": "#ff9da7", "site": "#9c755f", "nice": "#bab0ac"}


def priority_stack(breakdowns: list[PriorityBreakdown], highlight: int) -> dict:
    """Stacked bars of each job's weighted factors (nice below zero), highest priority first; the
    highlighted job's label is bold."""
    jobs = sorted(breakdowns, key=lambda b: (-b.priority, b.job_id))
    labels = [f"<b>{b.job_id}</b>" if b.job_id == highlight else str(b.job_id) for b in jobs]
    series = {name: [b.factors[name].weighted for b in jobs] for name in FACTOR_NAMES}
    series["tres"] = [b.tres_weighted for b in jobs]
    series["site"] = [float(b.site) for b in jobs]
    series["nice"] = [-float(b.nice) for b in jobs]
    return figure([trace("bar", name=name, x=labels, y=values, marker={"color": _COLORS[name]},
                         hovertemplate=f"job %{{x}}<br>{name}: %{{y:.1f}}<extra></extra>")
                   for name, values in series.items() if any(values)],
                  {"barmode": "relative", "title": {"text": "Priority contributions across the queue"},
                   "xaxis": {"title": {"text": "job (highest priority first)"}, "type": "category"},
                   "yaxis": {"title": {"text": "contribution to priority"}}, "legend": {"orientation": "h", "y": -0.25},
                   "margin": {"l": 60, "r": 20, "t": 50, "b": 80}, "height": 420})
