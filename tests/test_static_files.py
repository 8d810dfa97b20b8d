"""The admin's assets are served from the installed apps; anything else is a 404, never a
500 (a directory used to raise IsADirectoryError)."""

from django.test import Client


def test_an_asset_is_served_with_its_type_and_cache_lifetime(client: Client) -> None:
    response = client.get("/static/admin/css/base.css")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/css")
    assert response["Cache-Control"] == "public, max-age=3600"


def test_directories_escapes_and_unknown_paths_are_not_found(client: Client) -> None:
    for path in ("admin/css", "admin/css/", "../settings.py", "admin/../../x", "nope.css"):
        assert client.get(f"/static/{path}").status_code == 404, path
