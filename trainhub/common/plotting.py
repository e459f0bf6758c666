"""Plotly figures as plain dicts, drawn in the browser by the vendored plotly.js (never a CDN).

``plotly.graph_objects`` validates every property it is given and deep-copies the template into
every figure it serialises: on a study's page two small figures took about half of the request's
CPU, and on a dashboard chart building the figure cost more than reading its data. A figure here
is the dict plotly.js reads - ``data`` (traces, each with its ``type``) and ``layout`` in plotly's
nested form - with its template resolved as graph_objects resolves it (the layout's ``template``
by name, else plotly's default), read once per process, so it draws exactly as a graph_objects
figure does. Tests pass every figure the app builds through ``go.Figure`` and require it back
unchanged: an invalid property, or a shorthand such as ``marker_color``, fails there.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import plotly.io as pio

CONFIG = {"displaylogo": False, "responsive": True}


@cache
def _template(name: str) -> dict[str, Any]:
    # Shared by every figure of the process: serialised, never modified.
    return pio.templates[name].to_plotly_json()


def trace(kind: str, **properties: Any) -> dict[str, Any]:
    """A trace of this ``kind`` ("scatter", "bar"...), written as graph_objects' constructors are."""
    return {"type": kind, **properties}


def figure(data: list[dict[str, Any]], layout: dict[str, Any]) -> dict[str, Any]:
    """A figure of these traces and this layout, its template named in the layout or plotly's default."""
    return {"data": data, "layout": {**layout, "template": _template(layout.get("template", pio.templates.default))}}


def figure_html(drawn: dict[str, Any], div_id: str) -> str:
    """A figure as a <div> and the script that draws it with the plotly.js of our static files."""
    return pio.to_html(drawn, validate=False, full_html=False, include_plotlyjs=False, div_id=div_id, config=CONFIG)


def figure_json(drawn: dict[str, Any]) -> str:
    """A figure as the JSON plotly.js reads (times as ISO 8601 text, as graph_objects writes them)."""
    return pio.to_json(drawn, validate=False)
