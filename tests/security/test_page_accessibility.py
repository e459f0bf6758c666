"""Every page of the URL conf, rendered for an admin: each form control has a label a screen reader
can announce, every image a text alternative, every button a name, and the page a language, a title
and one main landmark. New pages are checked by themselves (the walk of tests/security/urlconf.py)."""

from __future__ import annotations

from html.parser import HTMLParser

from tests.security.urlconf import PUBLIC, routes

UNLABELLED_INPUT_TYPES = {"hidden", "submit", "button", "reset", "image"}


class _Page(HTMLParser):
    """Collects what the checks need in one pass over a page."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.html_lang = ""
        self.title = ""
        self.mains = 0
        self.label_targets: set[str] = set()
        self.controls: list[tuple[str, dict[str, str | None], bool]] = []  # (tag, attrs, inside a <label>)
        self.images: list[dict[str, str | None]] = []
        self.buttons: list[tuple[dict[str, str | None], str]] = []
        self._labels_open = 0
        self._in_title = False
        self._button: tuple[dict[str, str | None], list[str]] | None = None

    def handle_starttag(self, tag: str, attrs_list: list[tuple[str, str | None]]) -> None:
        attrs = dict(attrs_list)
        if tag == "html":
            self.html_lang = attrs.get("lang") or ""
        elif tag == "title":
            self._in_title = True
        elif tag == "main":
            self.mains += 1
        elif tag == "label":
            self._labels_open += 1
            if attrs.get("for"):
                self.label_targets.add(attrs["for"])
        elif tag in ("input", "select", "textarea"):
            if not (tag == "input" and (attrs.get("type") or "text") in UNLABELLED_INPUT_TYPES):
                self.controls.append((tag, attrs, self._labels_open > 0))
        elif tag == "img":
            self.images.append(attrs)
        elif tag == "button":
            self._button = (attrs, [])

    def handle_endtag(self, tag: str) -> None:
        if tag == "label":
            self._labels_open = max(0, self._labels_open - 1)
        elif tag == "title":
            self._in_title = False
        elif tag == "button" and self._button is not None:
            attrs, texts = self._button
            self.buttons.append((attrs, " ".join("".join(texts).split())))
            self._button = None

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.title += data
        if self._button is not None:
            self._button[1].append(data)


def _problems(page: _Page) -> list[str]:
    problems = []
    if not page.html_lang:
        problems.append("<html> has no lang")
    if not page.title.strip():
        problems.append("no <title>")
    if page.mains != 1:
        problems.append(f"{page.mains} <main> landmarks")
    for tag, attrs, wrapped in page.controls:
        named = wrapped or attrs.get("aria-label") or attrs.get("aria-labelledby") or attrs.get("title")
        if not named and attrs.get("id") not in page.label_targets:
            problems.append(f"<{tag} name={attrs.get('name')!r} id={attrs.get('id')!r}> has no label")
    problems += [f"<img src={img.get('src')!r}> has no alt" for img in page.images if img.get("alt") is None]
    problems += [f"<button {attrs}> has no name" for attrs, text in page.buttons
                 if not text and not attrs.get("aria-label") and not attrs.get("title")]
    return problems


def test_every_page_labels_its_controls_and_names_its_landmarks(client, cast, alpha_values):
    client.force_login(cast["alice"])  # alpha's admin and a platform admin: every form is shown
    checked, problems = 0, {}
    for route in routes():
        if route.is_api or route.name in PUBLIC and route.name != "login":
            continue
        response = client.get(route.path(alpha_values))
        content_type = response.get("Content-Type", "")
        if response.status_code != 200 or not content_type.startswith("text/html"):
            continue
        html = response.content.decode()
        if "<html" not in html[:200].lower():
            continue  # a live fragment: checked as part of the page that includes it
        page = _Page()
        page.feed(html)
        checked += 1
        found = _problems(page)
        if found:
            problems[route.route] = found
    assert not problems, problems
    assert checked >= 30, checked


def test_the_check_finds_what_it_looks_for():
    page = _Page()
    page.feed('<html><head><title> </title></head><body><main></main><main>'
              '<label for="a">A</label><input id="a" name="a"><label>B <input name="b"></label>'
              '<input name="c"><select name="d"></select><input type="hidden" name="e">'
              '<img src="x.png"><img src="y.png" alt=""><button></button><button aria-label="Close"></button>'
              '</main></body></html>')
    assert _problems(page) == [
        "<html> has no lang", "no <title>", "2 <main> landmarks",
        "<input name='c' id=None> has no label", "<select name='d' id=None> has no label",
        "<img src='x.png'> has no alt", "<button {}> has no name",
    ]
