"""Plotly figures of a study, built server-side as plain dicts (trainhub.common.plotting); the
study page draws them with the plotly.js served from static/vendor."""

from __future__ import annotations

from typing import Any

from plotly.colors import sequential

from trainhub.common.plotting import figure, trace
from trainhub.tuning.models import SUCCEEDED, Trial

_LAYOUT = {"margin": {"l": 60, "r": 30, "t": 40, "b": 50}, "height": 360, "paper_bgcolor": "rgba(0,0,0,0)",
           "font": {"family": "system-ui, sans-serif", "size": 12}}
#: Viridis as graph_objects spells out the name "Viridis": its colours evenly spaced from 0 to 1.
_VIRIDIS = [[index / (len(sequential.Viridis) - 1), colour] for index, colour in enumerate(sequential.Viridis)]


def _scored(trials: list[Trial]) -> list[Trial]:
    return [t for t in trials if t.state == SUCCEEDED and t.objective is not None]


def parallel_coordinates(trials: list[Trial], metric_id: str, parameter_ids: list[str]) -> dict[str, Any] | None:
    """One line per succeeded trial across every parameter axis and the metric, coloured by the
    metric; a categorical axis gets its values as ticks. None until a trial has a value."""
    scored = _scored(trials)
    if not scored:
        return None
    dimensions = []
    for parameter_id in parameter_ids:
        values = [{p["parameterId"]: p["value"] for p in t.parameters}.get(parameter_id) for t in scored]
        if all(isinstance(v, (int, float)) for v in values):
            dimensions.append({"label": parameter_id, "values": values})
        else:  # categorical (or absent when conditional): ticks at positions
            labels = sorted({str(v) for v in values})
            dimensions.append({"label": parameter_id, "values": [labels.index(str(v)) for v in values],
                               "tickvals": list(range(len(labels))), "ticktext": labels})
    objectives = [t.objective for t in scored]
    dimensions.append({"label": metric_id, "values": objectives})
    return figure([trace("parcoords", line={"color": objectives, "colorscale": _VIRIDIS, "showscale": True},
                         dimensions=dimensions)],
                  {"title": {"text": f"Parameters vs {metric_id}", "x": 0}, **_LAYOUT})


def metric_by_trial(trials: list[Trial], metric_id: str, maximize: bool,
                    best_number: int | None) -> dict[str, Any] | None:
    """The metric of every succeeded trial by trial number, the best so far as a step line, and
    the best trial marked. None until a trial has a value."""
    scored = _scored(trials)
    if not scored:
        return None
    numbers = [t.number for t in scored]
    objectives = [t.objective for t in scored]
    running, best_so_far = [], None
    for value in objectives:
        best_so_far = value if best_so_far is None else (max if maximize else min)(best_so_far, value)
        running.append(best_so_far)
    data = [
        trace("scatter", x=numbers, y=objectives, mode="markers", name=metric_id,
              marker={"size": 9, "color": "#2456c7"}),
        trace("scatter", x=numbers, y=running, mode="lines", name="best so far",
              line={"shape": "hv", "color": "#176434"}),
    ]
    if best_number is not None:
        best = next(t for t in scored if t.number == best_number)
        data.append(trace("scatter", x=[best.number], y=[best.objective], mode="markers",
                          name=f"best: trial {best.number}", marker={"size": 16, "symbol": "star", "color": "#f59e0b"}))
    return figure(data, {"title": {"text": f"{metric_id} by trial", "x": 0},
                         "xaxis": {"title": {"text": "trial"}, "dtick": 1}, "yaxis": {"title": {"text": metric_id}},
                         **_LAYOUT})
