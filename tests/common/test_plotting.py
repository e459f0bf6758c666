"""Figures built as plain dicts are what plotly.js draws from a graph_objects figure: valid, in
plotly's nested form, with its default template."""

import plotly.io as pio
import pytest

from tests.plotting import assert_drawn_as_graph_objects_would, figure_in_html
from trainhub.common.plotting import figure, figure_html, figure_json, trace
from trainhub.tuning import figures
from trainhub.tuning.models import SUCCEEDED, Trial


def trials() -> list[Trial]:
    def trial(number, objective, x, kind, state=SUCCEEDED):
        return Trial(number=number, state=state, objective=objective,
                     parameters=[{"parameterId": "x", "value": x}, {"parameterId": "kind", "value": kind}])
    return [trial(1, 0.2, 0.5, "a"), trial(2, 0.9, 0.1, "b"), trial(3, 0.4, 0.7, "a"), trial(4, None, 0.3, "b", "FAILED")]


@pytest.mark.parametrize("drawn", [
    figures.parallel_coordinates(trials(), "score", ["x", "kind"]),
    figures.metric_by_trial(trials(), "score", maximize=True, best_number=2),
    figures.metric_by_trial(trials(), "score", maximize=False, best_number=None),
], ids=["parallel coordinates", "metric by trial", "metric by trial, no best"])
def test_each_study_figure_is_valid_and_already_in_plotlys_form(drawn):
    assert_drawn_as_graph_objects_would(drawn)
    assert drawn["layout"]["template"] == pio.templates[pio.templates.default].to_plotly_json()


def test_the_study_figures_show_the_succeeded_trials_and_the_best_so_far():
    by_trial = figures.metric_by_trial(trials(), "score", maximize=True, best_number=2)
    points, best_so_far, best = by_trial["data"]
    assert (points["x"], points["y"]) == ([1, 2, 3], [0.2, 0.9, 0.4])
    assert best_so_far["y"] == [0.2, 0.9, 0.9] and (best["x"], best["y"]) == ([2], [0.9])
    parallel = figures.parallel_coordinates(trials(), "score", ["x", "kind"])["data"][0]["dimensions"]
    assert parallel[1] == {"label": "kind", "values": [0, 1, 0], "tickvals": [0, 1], "ticktext": ["a", "b"]}
    assert figures.metric_by_trial(trials()[3:], "score", maximize=True, best_number=None) is None


def test_a_template_named_in_the_layout_is_resolved_as_graph_objects_resolves_it():
    plain = figure([trace("bar", x=[1], y=[2])], {"template": "none", "height": 200})
    assert plain["layout"]["template"] == pio.templates["none"].to_plotly_json()
    assert_drawn_as_graph_objects_would(plain)


def test_figure_html_and_json_carry_the_figure_and_our_config():
    drawn = figure([trace("bar", x=[1], y=[2])], {"height": 200})
    html = figure_html(drawn, "chart-1")
    assert figure_in_html(html, "chart-1") == drawn
    assert '"displaylogo": false' in html and "<script src=" not in html  # plotly.js comes from our static files
    assert '"type":"bar"' in figure_json(drawn)
