"""The README points into docs/ and docs/ is all in the site's navigation (mkdocs --strict, run in
.ci/run and by `make docs`, checks the links between the pages themselves)."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def test_the_readme_shows_the_two_commands():
    readme = (ROOT / "README.md").read_text()
    assert "make run" in readme
    assert "make test" in readme


def test_every_relative_link_of_the_readme_names_a_file_that_exists():
    readme = (ROOT / "README.md").read_text()
    targets = [link for link in LINK.findall(readme) if "://" not in link]
    assert any(target.startswith("docs/") for target in targets)
    assert [target for target in targets if not (ROOT / target).exists()] == []


def test_every_page_in_docs_is_in_the_site_navigation():
    config = (ROOT / "mkdocs.yml").read_text()
    pages = sorted(path.name for path in (ROOT / "docs").glob("*.md"))
    assert [page for page in pages if f": {page}" not in config] == []
