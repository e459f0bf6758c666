"""Pages made of live sections: the whole page, or one section alone for an htmx refresh."""

from __future__ import annotations

from typing import Callable

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

#: A fragment of a page: its template and a function building only the context it needs.
Section = tuple[str, Callable[[], dict]]


def render_page_or_fragment(request: HttpRequest, page_template: str, sections: dict[str, Section],
                            fragment: str | None) -> HttpResponse:
    """The whole page (every section), or only the section an htmx poll asked for: built alone,
    so a poll runs just that section's queries."""
    if fragment:
        template, build_context = sections[fragment]
        return render(request, template, build_context())
    context: dict = {}
    for _, build_context in sections.values():
        context.update(build_context())
    return render(request, page_template, context)
