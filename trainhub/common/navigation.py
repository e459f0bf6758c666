"""The main navigation: one list of sections, each shown only once its URL exists.

Apps land one at a time, so a section whose URL name does not reverse yet is left out instead of
linking to a 404: wiring a new app's pages into the menu is adding its ``include()`` to the URL
conf (and, if its landing page has another name, changing one line below).

A section is current when the request resolved inside its URL namespace (each section has its
own: Tuning and Pipelines live in one app but in two URL namespaces).
"""

from __future__ import annotations

from dataclasses import dataclass

from django.http import HttpRequest
from django.urls import NoReverseMatch, reverse


@dataclass(frozen=True)
class Section:
    label: str
    #: The section's landing page, "namespace:name".
    url_name: str
    staff_only: bool = False

    @property
    def namespace(self) -> str:
        return self.url_name.rpartition(":")[0]


@dataclass(frozen=True)
class NavLink:
    label: str
    url: str
    current: bool


SECTIONS: tuple[Section, ...] = (
    Section("Jobs", "jobs:list"),
    Section("Tuning", "tuning:list"),
    Section("Pipelines", "pipelines:list"),
    Section("Persistent resources", "resources:list"),
    Section("Slurm clusters", "slurm:list"),
    Section("Quotas", "scheduling:quotas"),
    Section("Nodes", "inventory:list"),
    Section("Dashboards", "dashboards:overview"),
    Section("Admin", "admin:index", staff_only=True),
)


def _url(section: Section) -> str | None:
    try:
        return reverse(section.url_name)
    except NoReverseMatch:
        return None


def _in_namespace(request_namespace: str, section: Section) -> bool:
    return request_namespace == section.namespace or request_namespace.startswith(section.namespace + ":")


def nav_links(*, sections: tuple[Section, ...], namespace: str, is_staff: bool) -> list[NavLink]:
    """The links to show, in order, with the current section marked."""
    shown = [(section, url) for section in sections if not section.staff_only or is_staff
             if (url := _url(section)) is not None]
    current = next((section for section, _ in shown if namespace and _in_namespace(namespace, section)), None)
    return [NavLink(section.label, url, section is current) for section, url in shown]


def navigation(request: HttpRequest) -> dict:
    """Context processor: ``nav_links`` for signed-in users."""
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {}
    match = request.resolver_match
    return {"nav_links": nav_links(sections=SECTIONS, namespace=match.namespace if match else "",
                                   is_staff=user.is_staff)}
