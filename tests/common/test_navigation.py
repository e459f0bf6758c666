"""The main navigation: sections appear once their URLs exist, and the current one is marked."""

import re

import pytest
from django.urls import reverse

from tests.jobs.test_views import job_url, submit

pytestmark = pytest.mark.django_db


def nav(content: str) -> list[tuple[str, str | None]]:
    """(label, aria-current) of each main navigation link."""
    block = re.search(r'<nav class="mainnav".*?</nav>', content, re.S).group(0)
    return [(label, current or None) for current, label in
            re.findall(r'<a href="[^"]*"(?: aria-current="(\w+)")?>([^<]+)</a>', block)]


def test_it_links_only_sections_whose_pages_exist(client, cast):
    client.force_login(cast["uma"])
    labels = [label for label, _ in nav(client.get(reverse("inventory:list")).content.decode())]
    assert labels == ["Jobs", "Tuning", "Pipelines", "Persistent resources", "Slurm clusters", "Quotas", "Nodes",
                      "Dashboards"]


def test_admin_is_linked_for_staff_only(client, cast):
    cast["alice"].is_staff = True
    cast["alice"].save()
    client.force_login(cast["alice"])
    assert nav(client.get(reverse("jobs:list")).content.decode())[-1] == ("Admin", None)


def test_the_current_section_is_marked_on_its_pages_and_their_sub_pages(client, cast):
    job = submit(cast["alpha"], cast["uma"])
    client.force_login(cast["uma"])
    assert ("Jobs", "page") in nav(client.get(reverse("jobs:list")).content.decode())
    assert ("Jobs", "true") in nav(client.get(job_url(job)).content.decode())
    links = nav(client.get(reverse("scheduling:quotas")).content.decode())
    assert ("Quotas", "page") in links and ("Jobs", None) in links


def test_anonymous_visitors_get_no_navigation(client):
    assert 'class="mainnav"' not in client.get(reverse("login")).content.decode()


@pytest.mark.urls("tests.common.nav_urls")
@pytest.mark.parametrize("path, current", [("/tuning/", "Tuning"), ("/tuning/studies/3/", "Tuning"),
                                           ("/pipelines/", "Pipelines"), ("/pipelines/7/", "Pipelines")])
def test_a_new_apps_sections_appear_each_current_in_its_own_namespace(rf, cast, path, current):
    from django.urls import resolve

    from trainhub.common.navigation import navigation

    request = rf.get(path)
    request.user = cast["uma"]
    request.resolver_match = resolve(path)
    links = navigation(request)["nav_links"]
    assert [link.label for link in links] == ["Jobs", "Tuning", "Pipelines", "Quotas", "Nodes", "Dashboards"]
    assert [link.label for link in links if link.current] == [current]
