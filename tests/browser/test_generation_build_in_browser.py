"""Building an index generation from the admin in real Chromium, against the live app: a
superuser clicks Build, confirms, and watches the progress bar go from part-way to full
and ready while the page stays loaded (a mark set on its window survives); the test
embeds between polls, as the workers would. The admin sends no Content-Security-Policy of
its own, so the generation pages are served to the browser under the site's, to prove
they need nothing it refuses; axe-core finds nothing. With SCREENSHOTS_DIR set, also
docs/img/admin-generation-build.png and admin-generation-build-phone.png, the bar
part-way."""

import os
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlparse

import pytest

from ingestion import tasks
from ingestion.indexing import embed_pending_batch
from ingestion.models import IndexGeneration
from searchsite.content_security import POLICY
from tests import ops_personas
from tests.browser.conftest import DESKTOP, PHONE
from tests.browser.pages import log_in_to, scrolls_sideways
from tests.browser.test_content_security_in_browser import RECORD_VIOLATIONS
from tests.browser.test_ops_page_in_browser import VIOLATIONS
from tests.live_app import LiveApp

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page, Route

GENERATIONS = "/admin/ingestion/indexgeneration/"
PART_WAY = 3  # of the events' 8 listings, embedded before the first look
LABEL = ".generation-progress-label"


def _generation_page(url: str) -> bool:
    return urlparse(url).path.startswith(GENERATIONS)


def _under_the_site_policy(route: "Route") -> None:
    response = route.fetch(max_redirects=0)  # a redirect is the browser's to follow
    route.fulfill(
        response=response, headers={**response.headers, "content-security-policy": POLICY}
    )


def _log_in(page: "Page", app: LiveApp) -> None:
    user = ops_personas.superuser()
    log_in_to(page, f"{app.url}{GENERATIONS}", user.username, ops_personas.PASSWORD)


def _build(page: "Page") -> IndexGeneration:
    """Build clicked and confirmed; the new generation, its change page open."""
    page.click("text=Build a new generation")
    page.click("input[value='Yes, build it']")
    page.wait_for_url("**/change/")
    return IndexGeneration.objects.latest("pk")


def _shows(page: "Page", label: str) -> None:
    """Waits, within Playwright's bound, for the bar's label to read `label`."""
    page.wait_for_function(
        "label => document.querySelector('.generation-progress-label').textContent === label",
        arg=label,
    )


def test_the_bar_fills_up_to_ready_without_a_reload(page: "Page", app: LiveApp) -> None:
    page.add_init_script(RECORD_VIOLATIONS)
    page.route(_generation_page, _under_the_site_policy)
    _log_in(page, app)
    generation = _build(page)
    assert generation.state == IndexGeneration.State.BUILDING
    assert page.locator(LABEL).inner_text() == "0.0% (0/8) embedded, building"
    page.evaluate("window.__stillTheSamePage = true")

    embed_pending_batch(batch_size=PART_WAY)
    _shows(page, "37.5% (3/8) embedded, building")
    assert page.locator("progress").evaluate("bar => [bar.value, bar.max]") == [3, 8]
    tasks.embed_pending()  # the rest, and the sweep's end: the generation is ready
    _shows(page, "100.0% (8/8) embedded, ready")

    assert page.evaluate("window.__stillTheSamePage") is True
    assert page.locator(".generation-progress-reload").is_hidden()
    generation.refresh_from_db()
    assert generation.state == IndexGeneration.State.READY
    assert page.evaluate("window.__violations") == []


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_axe_finds_nothing_on_a_generation_being_built(
    axe: Path, browser: "Browser", app: LiveApp, viewport: dict[str, int]
) -> None:
    # axe-core goes in as a script tag of the test's own.
    context = browser.new_context(viewport=viewport, bypass_csp=True)  # type: ignore[arg-type]  # a ViewportSize
    try:
        page = context.new_page()
        _log_in(page, app)
        _build(page)
        embed_pending_batch(batch_size=PART_WAY)
        _shows(page, "37.5% (3/8) embedded, building")
        page.add_script_tag(path=str(axe))
        assert page.evaluate(VIOLATIONS) == []
        assert not scrolls_sideways(page)
        out = os.environ.get("SCREENSHOTS_DIR")
        if out:
            name = "admin-generation-build" + ("-phone" if viewport is PHONE else "")
            page.screenshot(path=str(Path(out) / f"{name}.png"), full_page=True)
    finally:
        context.close()
