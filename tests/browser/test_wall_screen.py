"""The wall screen (dashboards' TV view) on the screens it hangs on: at 1,440 and 1,920 px wide
every figure stays inside its card and no text of a figure (axis titles, tick labels, legend)
overlaps another; at 390 px the page does not scroll sideways."""

import pytest

from tests.browser.test_dashboards import wait_for_charts

pytestmark = pytest.mark.django_db(transaction=True)


def wait_for_all_charts(page):
    page.wait_for_function("document.querySelectorAll('.chart[aria-busy=true]').length === 0", timeout=30_000)
    wait_for_charts(page)

#: Per chart card: its figure's parts that stick out of the card, and the pairs of its texts that
#: overlap (each as "text / text").
LAYOUT_PROBLEMS = r"""() => {
  const inside = (box, outer) => box.left >= outer.left - 1 && box.right <= outer.right + 1
      && box.top >= outer.top - 1 && box.bottom <= outer.bottom + 1;
  // A text's box holds its line's whole height: neighbouring lines' boxes may touch by a pixel or two.
  const overlap = (a, b) => Math.min(a.right, b.right) - Math.max(a.left, b.left) > 3
      && Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top) > 3;
  const problems = [];
  document.querySelectorAll('.chart').forEach((card) => {
    const outer = card.getBoundingClientRect();
    // Tick labels Plotly turned aslant (to keep them apart) have boxes wider than their letters.
    const aslant = (t) => /rotate\((-?[0-9.]+)/.test(t.getAttribute('transform') || '')
        && Number(RegExp.$1) % 90 !== 0;
    const texts = [...card.querySelectorAll('.chart__plot svg text')].filter((t) => t.textContent.trim() && !aslant(t))
      .map((t) => ({text: t.textContent.trim(), box: t.getBoundingClientRect()}))
      .filter((t) => t.box.width > 0);
    card.querySelectorAll('.chart__plot svg.main-svg').forEach((svg) => {
      if (!inside(svg.getBoundingClientRect(), outer)) problems.push(`${card.id}: the figure overflows its card`);
    });
    texts.forEach((t) => {
      if (!inside(t.box, outer)) problems.push(`${card.id}: "${t.text}" sticks out of its card`);
    });
    texts.forEach((a, i) => texts.slice(i + 1).forEach((b) => {
      if (overlap(a.box, b.box)) problems.push(`${card.id}: "${a.text}" overlaps "${b.text}"`);
    }));
  });
  return problems;
}"""


@pytest.mark.parametrize("width, height", [(1440, 900), (1920, 1080)])
def test_the_wall_screen_keeps_every_figure_in_its_card_with_no_overlapping_text(
        page, live_server, login, busy_cluster, screenshot, width, height):
    login("uma")
    page.set_viewport_size({"width": width, "height": height})
    page.goto(f"{live_server.url}/dashboards/?wall=1")
    wait_for_all_charts(page)
    page.wait_for_timeout(500)  # Plotly's responsive relayout to the grid cells
    screenshot(f"dashboard-wall-{width}")
    problems = page.evaluate(LAYOUT_PROBLEMS)
    assert not problems, "\n".join(problems)
    assert page.evaluate("document.documentElement.scrollWidth") <= width


def test_the_wall_screen_on_a_phone_stacks_the_charts_without_sideways_scroll(page, live_server, login, busy_cluster,
                                                                             screenshot):
    login("uma")
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(f"{live_server.url}/dashboards/?wall=1")
    wait_for_all_charts(page)
    screenshot("dashboard-wall-390")
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    problems = page.evaluate(LAYOUT_PROBLEMS)
    assert not problems, "\n".join(problems)
