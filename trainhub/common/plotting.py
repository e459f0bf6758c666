"""Plotly figures as plain dicts, drawn in the browser by the vendored plotly.js (never a CDN).

``plotly.graph_objects`` validates every property it is given and deep-copies the default template
into every figure it serialises: on a study's page, two small figures took about half of the
request's CPU. A figure here is the dict plotly.js reads - ``data`` (traces, each with its
``type``) and ``layout`` in plotly's nested form - with plotly's default template, read once per
process, so it looks as a graph_objects figure does. Tests pass each builder's output through
``go.Figure`` to check it is valid and already in that form.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import plotly.io as pio

CONFIG = {"displaylogo": False, "responsive": True}


@cache
def _default_template() -> dict[str, Any]:
    # Shared by every figure of the process: serialised, never modified.
    return pio.templates[pio.templates.default].to_plotly_json()


def figure(data: list[dict[str, Any]], layout: dict[str, Any]) -> dict[str, Any]:
    """A figure of these traces and this layout, with plotly's default template."""
    return {"data": data, "layout": {"template": _default_template(), **layout}}


def figure_html(drawn: Any, div_id: str) -> str:
    """A figure (a dict from ``figure`` or a graph_objects Figure) as a <div> and the script that
    draws it with the plotly.js of our static files."""
    return pio.to_html(drawn, validate=False, full_html=False, include_plotlyjs=False, div_id=div_id, config=CONFIG)
