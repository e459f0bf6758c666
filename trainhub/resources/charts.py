"""The pool view's utilisation chart: a Plotly figure built server-side from the samples the
services record (machines provisioned and in use per pool), drawn by the vendored plotly.js."""

from __future__ import annotations

import datetime as dt

import plotly.graph_objects as go

from trainhub.resources.models import ResourcePool, UtilisationSample
from trainhub.resources.selectors import NO_USAGE, PoolUsage


def utilisation_figure(pools: list[ResourcePool], series: dict[int, list[UtilisationSample]],
                       current: dict[int, PoolUsage], now: dt.datetime) -> go.Figure:
    """Per pool: machines provisioned (a dotted line) and in use by jobs (filled), as step lines
    from the samples up to ``now``, where the ``current`` usage closes each line."""
    figure = go.Figure()
    for pool in pools:
        samples = series.get(pool.pk, [])
        usage = current.get(pool.pk, NO_USAGE)
        times = [sample.time for sample in samples] + [now]
        figure.add_trace(go.Scatter(x=times, y=[s.provisioned for s in samples] + [usage.provisioned],
                                    name=f"{pool.pool_id}: provisioned", mode="lines",
                                    line={"shape": "hv", "dash": "dot"}))
        figure.add_trace(go.Scatter(x=times, y=[s.used for s in samples] + [usage.used], name=f"{pool.pool_id}: in use",
                                    mode="lines", line={"shape": "hv"}, fill="tozeroy"))
    figure.update_layout(
        height=320, margin={"l": 48, "r": 16, "t": 16, "b": 40}, hovermode="x unified",
        legend={"orientation": "h", "y": -0.2}, yaxis={"title": "machines", "rangemode": "tozero", "dtick": 1},
        paper_bgcolor="rgba(0,0,0,0)", plot_bgcolor="rgba(0,0,0,0)",
    )
    return figure
