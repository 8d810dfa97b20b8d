"""Static assets are served from STATIC_ROOT as collectstatic left them: under their
content-hashed names (what pages link to) cached for good, under their own names for an
hour; anything else is a 404, never a 500 (a directory used to raise IsADirectoryError)."""

import re

import pytest
from django.test import Client


def test_an_asset_is_served_with_its_type_and_cache_lifetime(client: Client) -> None:
    response = client.get("/static/admin/css/base.css")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/css")
    assert response["Cache-Control"] == "public, max-age=3600"


def test_directories_escapes_and_unknown_paths_are_not_found(client: Client) -> None:
    for path in ("admin/css", "admin/css/", "../settings.py", "admin/../../x", "nope.css"):
        assert client.get(f"/static/{path}").status_code == 404, path


def test_pages_name_assets_by_content_and_those_are_cached_for_good(client: Client) -> None:
    page = client.get("/").content.decode()
    # The shared sheet, then the page's own, each as it really is.
    for name, rule in (("base", b":focus-visible"), ("search", b"#preview")):
        stylesheet = re.search(rf'href="/static/(retrieval/{name}\.[0-9a-f]{{12}}\.css)"', page)
        assert stylesheet, f"the page names its {name} stylesheet by content"
        response = client.get(f"/static/{stylesheet.group(1)}")
        assert response.status_code == 200
        assert response["Cache-Control"] == "public, max-age=31536000, immutable"
        assert rule in response.getvalue()


@pytest.mark.django_db
def test_the_admin_names_its_assets_by_content_too(admin_client: Client) -> None:
    page = admin_client.get("/admin/").content.decode()
    assert re.search(r'href="/static/admin/css/base\.[0-9a-f]{12}\.css"', page)
