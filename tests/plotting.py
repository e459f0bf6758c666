"""Checks of the Plotly figures the app builds as plain dicts (trainhub.common.plotting)."""

import json
import re

import plotly.graph_objects as go

_ARGUMENT_SEPARATOR = re.compile(r"\s*,\s*")


def assert_drawn_as_graph_objects_would(figure: dict) -> None:
    """graph_objects accepts the figure and gives it back unchanged: every property is valid and
    already in plotly's nested form (a shorthand such as "marker_color" would come back nested)."""
    assert go.Figure(figure).to_plotly_json() == figure


def figure_in_html(html: str, div_id: str) -> dict:
    """The data and layout of the Plotly.newPlot call drawing ``div_id`` in a page."""
    match = re.search(rf'Plotly\.newPlot\(\s*"{re.escape(div_id)}",\s*', html)
    assert match, f"no figure {div_id!r} in the page"
    decoder = json.JSONDecoder()
    data, end = decoder.raw_decode(html, match.end())
    layout, _ = decoder.raw_decode(html, _ARGUMENT_SEPARATOR.match(html, end).end())
    return {"data": data, "layout": layout}
