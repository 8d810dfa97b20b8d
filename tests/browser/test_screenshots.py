"""The README's screenshots of the search page (docs/img/search-*.png) and the API docs
page (docs/img/api-docs.png), taken by the same browser, app and events as the tests:
`SCREENSHOTS_DIR=docs/img pytest tests/browser/test_screenshots.py`. Skipped otherwise."""

import os
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.browser.conftest import DESKTOP, PHONE, embeddings_locked
from tests.browser.pages import open_search
from tests.live_app import LiveApp

if TYPE_CHECKING:
    from playwright.sync_api import Browser, ViewportSize

OUT = os.environ.get("SCREENSHOTS_DIR")
pytestmark = pytest.mark.skipif(not OUT, reason="SCREENSHOTS_DIR is not set")


def test_take_the_search_page_s_screenshots(
    browser: "Browser", app: LiveApp, test_database_url: str
) -> None:
    out = Path(OUT or ".")
    shots: list[tuple[str, ViewportSize, dict[str, str], bool]] = [
        ("search-results", DESKTOP, {"q": "jazz"}, False),
        (
            "search-filtered",
            DESKTOP,
            {"q": "music", "when": "next-7-days", "venue": "cellar"},
            False,
        ),
        ("search-degraded", DESKTOP, {"q": "organ recital"}, True),
        ("search-phone", PHONE, {"q": "jazz"}, False),
        ("search-empty", DESKTOP, {"q": "zxqv"}, True),  # only words can find nothing
    ]
    for name, viewport, params, stalled in shots:
        context = browser.new_context(viewport=viewport, device_scale_factor=1)
        try:
            page = context.new_page()
            if stalled:
                with embeddings_locked(test_database_url):
                    open_search(page, app.url, **params)
            else:
                # On a loaded machine a first search's vector stage can miss its budget;
                # the picture is of the usual answer, so it is asked again, a few times.
                for _ in range(5):
                    open_search(page, app.url, **params)
                    if page.locator("#final").get_attribute("data-mode") == "hybrid":
                        break
            page.screenshot(path=str(out / f"{name}.png"), full_page=True)
        finally:
            context.close()
    context = browser.new_context(viewport=DESKTOP, device_scale_factor=1)
    try:
        page = context.new_page()
        page.goto(f"{app.url}/api/docs")
        page.screenshot(path=str(out / "api-docs.png"))
    finally:
        context.close()
