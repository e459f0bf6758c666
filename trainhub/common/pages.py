"""Pages made of live sections: the whole page, or one section alone for an htmx refresh."""

from __future__ import annotations

from functools import wraps
from typing import Callable

from django.contrib.auth.decorators import login_required
from django.core.exceptions import BadRequest, PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.views import defaults
from django.shortcuts import redirect, render
from django.urls import reverse

from trainhub.common.errors import ApiError
from trainhub.iam.selectors import projects_with_permission

#: A fragment of a page: its template and a function building only the context it needs.
Section = tuple[str, Callable[[], dict]]


def merge_section_contexts(contexts: list[dict]) -> dict:
    """One page context from its sections' contexts. A key two sections both define as a dict
    (``urls``) is merged, never replaced: a section that lost its polling URL would poll the
    whole page and nest a copy of it inside itself every few seconds."""
    merged: dict = {}
    for context in contexts:
        for key, value in context.items():
            if isinstance(value, dict) and isinstance(merged.get(key), dict):
                merged[key] = {**merged[key], **value}
            else:
                merged[key] = value
    return merged


def render_page_or_fragment(request: HttpRequest, page_template: str, sections: dict[str, Section],
                            fragment: str | None, page_context: Callable[[], dict] | None = None) -> HttpResponse:
    """The whole page (every section, plus ``page_context()`` when given), or only the section an
    htmx poll asked for: built alone, so a poll runs just that section's queries."""
    if fragment:
        template, build_context = sections[fragment]
        return render(request, template, build_context())
    builders = ([page_context] if page_context else []) + [build for _, build in sections.values()]
    return render(request, page_template, merge_section_contexts([build() for build in builders]))


def html_page(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """Require login, and show an ApiError from a selector or service as the HTML error page
    of its status (templates/404.html, 403.html and, for the rest, bad_request.html with the message)."""

    @wraps(view)
    def wrapper(request: HttpRequest, *args, **kwargs) -> HttpResponse:
        try:
            return view(request, *args, **kwargs)
        except ApiError as error:
            if error.http_status == 404:
                raise Http404(error.message) from error
            if error.http_status == 403:
                raise PermissionDenied(error.message) from error
            raise BadRequest(error.message) from error

    return login_required(wrapper)


def bad_request(request: HttpRequest, exception: Exception) -> HttpResponse:
    """The 400 page (``handler400``). A ``BadRequest`` carries a service's message written for the
    user, so the page shows it; any other ``SuspiciousOperation`` (a forged host, too many fields)
    keeps Django's bare page, whose text says nothing about the server (the template is not named
    400.html, which Django's own handler would render without the request)."""
    if type(exception) is not BadRequest:
        return defaults.bad_request(request, exception)
    return render(request, "bad_request.html", {"message": str(exception)}, status=400)


def redirect_to_first_project_form(request: HttpRequest, *, permission: str, url_name: str, location: str,
                                   refusal: str) -> HttpResponse:
    """A "New ..." link without a project: the create form ``url_name`` of the first project where
    the user holds ``permission``; 403 with ``refusal`` when there is none. The query string goes
    along: it carries the form's choices (``?catalog=1``: the whole machine catalog)."""
    projects = projects_with_permission(user=request.user, permission=permission)
    if not projects:
        raise PermissionDenied(refusal)
    form_url = reverse(url_name, kwargs={"project": projects[0].project_id, "location": location})
    query = request.GET.urlencode()
    return redirect(f"{form_url}?{query}" if query else form_url)
