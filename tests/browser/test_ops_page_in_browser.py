"""The ops page in real Chromium, against the live app (its own process, which writes its
roll-ups as `make run`'s web processes do): an ops member logs in through the admin's
form, opens the page and finds the searches just made, a degraded one among them, in its
charts; under the site's Content-Security-Policy nothing is refused, and axe-core finds
nothing. With SCREENSHOTS_DIR set, also docs/img/ops-page.png and ops-page-phone.png."""

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from retrieval.types import Reason
from tests import ops_personas
from tests.browser.conftest import DESKTOP, PHONE, embeddings_locked
from tests.browser.pages import log_in_to, open_search, scrolls_sideways
from tests.browser.test_content_security_in_browser import RECORD_VIOLATIONS
from tests.live_app import LiveApp

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

# All of axe-core's findings, whatever their impact.
VIOLATIONS = """async () => {
    const results = await axe.run(document);
    return results.violations.map(
        v => `${v.id} (${v.impact}): ${v.nodes.map(n => n.target).join(" | ")}`);
}"""


def searches_made(page: "Page", app: LiveApp, database_url: str) -> str:
    """A search with the vector stage free, then one stalled behind a lock on the
    embeddings; the second's mode (a fallback)."""
    open_search(page, app.url, q="jazz")
    with embeddings_locked(database_url):
        open_search(page, app.url, q="organ recital")
    degraded = page.locator("#final").get_attribute("data-mode")
    assert degraded in {"lexical_fallback", "cache_fallback"}
    return degraded


def log_in_to_the_ops_page(page: "Page", app: LiveApp) -> None:
    member = ops_personas.ops_member()
    log_in_to(page, f"{app.url}/ops/", member.username, ops_personas.PASSWORD)


@contextmanager
def ops_page_after_searches(
    browser: "Browser",
    app: LiveApp,
    database_url: str,
    viewport: dict[str, int],
    *,
    rounds: int = 1,
    for_axe: bool = False,
) -> Iterator["Page"]:
    """The ops page as an ops member sees it after `rounds` of `searches_made`, in a
    browser context of its own at `viewport`. For axe, the site's policy is bypassed:
    axe-core goes in as a script tag of the test's own, which the policy would refuse."""
    options = {"bypass_csp": True} if for_axe else {"device_scale_factor": 1}
    context = browser.new_context(viewport=viewport, **options)  # type: ignore[arg-type]  # a ViewportSize
    try:
        page = context.new_page()
        for _ in range(rounds):
            searches_made(page, app, database_url)
        log_in_to_the_ops_page(page, app)
        yield page
    finally:
        context.close()


def axe_finds_nothing(page: "Page", axe: Path) -> None:
    page.add_script_tag(path=str(axe))
    assert page.evaluate(VIOLATIONS) == []
    assert not scrolls_sideways(page)


def legend(page: "Page", chart: str) -> dict[str, str]:
    items = page.locator(f"#{chart} .legend li").all_inner_texts()
    return dict(item.split(": ", 1) for item in items)


def count_of(told: str) -> int:
    return int(told.removesuffix(" in all"))


def test_an_ops_member_sees_the_searches_just_made_a_degraded_one_included(
    page: "Page", app: LiveApp, test_database_url: str
) -> None:
    page.add_init_script(RECORD_VIOLATIONS)
    degraded = searches_made(page, app, test_database_url)
    log_in_to_the_ops_page(page, app)

    assert page.locator("h1").inner_text() == "How search is doing"
    answers = legend(page, "answers-last-hour")
    assert count_of(answers[degraded]) >= 1
    # Both searches, whatever the first's mode (on a loaded machine its vector stage too
    # can miss the live app's budget).
    assert sum(count_of(told) for told in answers.values()) >= 2
    # Why it was degraded (vector_timeout, usually; embed_timeout when the query's
    # embedding was not yet cached and the lock outlasted it).
    reasons = legend(page, "reasons-last-hour")
    assert set(reasons) <= set(Reason)
    assert sum(count_of(told) for told in reasons.values()) >= 1
    # Drawn: a line for each mode, and the latency chart's objective.
    assert page.locator("#answers-last-hour svg polyline").count() >= 2
    assert page.locator("#latency-last-hour svg line.objective").count() == 1
    title = page.locator("#answers-last-hour svg title").text_content()
    assert title == "Answers by mode, and 503s"
    assert page.evaluate("window.__violations") == []


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_axe_finds_nothing_on_the_ops_page(
    axe: Path, browser: "Browser", app: LiveApp, test_database_url: str, viewport: dict[str, int]
) -> None:
    with ops_page_after_searches(browser, app, test_database_url, viewport, for_axe=True) as page:
        axe_finds_nothing(page, axe)


@pytest.mark.skipif(not os.environ.get("SCREENSHOTS_DIR"), reason="SCREENSHOTS_DIR is not set")
@pytest.mark.parametrize(
    ("viewport", "name"), [(DESKTOP, "ops-page.png"), (PHONE, "ops-page-phone.png")]
)
def test_take_the_ops_page_s_screenshot(
    browser: "Browser", app: LiveApp, test_database_url: str, viewport: dict[str, int], name: str
) -> None:
    # A few minutes' worth would be nicer; a few searches will do.
    with ops_page_after_searches(browser, app, test_database_url, viewport, rounds=3) as page:
        page.screenshot(path=str(Path(os.environ["SCREENSHOTS_DIR"]) / name), full_page=True)
