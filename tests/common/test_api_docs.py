"""/api/docs/ works on an air-gapped cluster: Swagger UI's scripts and styles are our static files."""

import re

from django.contrib.staticfiles import finders
from django.test import Client


def test_the_api_docs_load_nothing_from_outside(db):
    page = Client().get("/api/docs/").content.decode()
    assets = re.findall(r'(?:src|href)="([^"]+\.(?:js|css|png))"', page)
    assert any("swagger-ui-bundle" in asset for asset in assets), page
    assert not re.search(r"https?://", page), "the docs page names an outside address"
    for asset in assets:
        assert asset.startswith("/static/"), asset
        assert finders.find(asset.removeprefix("/static/")), f"{asset} is not one of our static files"


def test_the_api_docs_link_back_to_trainhub(db):
    """Swagger UI's page has no trainhub header; the schema's description, which it shows at the top, links home."""
    schema = Client().get("/api/schema/", HTTP_ACCEPT="application/json").json()
    assert "[Open trainhub](/)" in schema["info"]["description"]
