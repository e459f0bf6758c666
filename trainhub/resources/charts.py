"""The pool view's utilisation chart: a Plotly figure built server-side from the samples the
services record (machines provisioned and in use per pool), drawn by the vendored plotly.js."""

from __future__ import annotations

import datetime as dt
from typing import Any

from trainhub.common.plotting import figure, trace
from trainhub.resources.models import ResourcePool, UtilisationSample
from trainhub.resources.selectors import NO_USAGE, PoolUsage


def utilisation_figure(pools: list[ResourcePool], series: dict[int, list[UtilisationSample]],
                       current: dict[int, PoolUsage], now: dt.datetime) -> dict[str, Any]:
    """Per pool: machines provisioned (a dotted line) and in use by jobs (filled), as step lines
    from the samples up to ``now``, where the ``current`` usage closes each line."""
    traces = []
    for pool in pools:
        samples = series.get(pool.pk, [])
        usage = current.get(pool.pk, NO_USAGE)
        times = [sample.time for sample in samples] + [now]
        traces.append(trace("scatter", x=times, y=[s.provisioned for s in samples] + [usage.provisioned],
                            name=f"{pool.pool_id}: provisioned", mode="lines", line={"shape": "hv", "dash": "dot"}))
        traces.append(trace("scatter", x=times, y=[s.used for s in samples] + [usage.used],
                            name=f"{pool.pool_id}: in use", mode="lines", line={"shape": "hv"}, fill="tozeroy"))
    return figure(traces, {
        "height": 320, "margin": {"l": 48, "r": 16, "t": 16, "b": 40}, "hovermode": "x unified",
        "legend": {"orientation": "h", "y": -0.2}, "yaxis": {"title": {"text": "machines"}, "rangemode": "tozero", "dtick": 1},
        "paper_bgcolor": "rgba(0,0,0,0)", "plot_bgcolor": "rgba(0,0,0,0)",
    })
