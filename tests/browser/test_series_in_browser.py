"""A series on the search page in real headless Chromium (issue 33): the demo calendar's
weekly blues session is one result for "blues", showing its next date, its rule in words
and its further dates in a disclosure, opened by keyboard alone; the same without
JavaScript; axe-core's verdict at desktop and phone width with the dates open. With
SCREENSHOTS_DIR set, also the README's picture of it."""

import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from tests.browser.conftest import DESKTOP, PHONE, searching
from tests.browser.pages import open_search, scrolls_sideways, serious_violations, shown_listings
from tests.live_app import LiveApp

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Locator, Page

SERIES = "Tuesday blues session"


@pytest.fixture
def events(transactional_db: None) -> int:
    """The browser tests' events and the demo's venue calendar, whose weekly session is a
    series (overriding tests/browser/conftest.py's `events` for this module)."""
    from tests.browser.listings import index_events

    return index_events(with_demo_calendar=True)


def _series(page: "Page") -> "Locator":
    return page.locator("#final .listing", has_text=SERIES)


def _answer(page: "Page", app: LiveApp) -> dict[str, Any]:
    """The API's answer for the same search: what the page must agree with."""
    body: dict[str, Any] = page.request.get(f"{app.url}/api/search?q=blues").json()
    (series,) = [result for result in body["results"] if result["title"] == SERIES]
    found: dict[str, Any] = series
    return found


def _assert_shown_as_the_api_says(page: "Page", app: LiveApp) -> None:
    titles = [listing.title for listing in shown_listings(page)]
    assert titles.count(SERIES) == 1, titles
    series = _answer(page, app)
    shown = _series(page)
    assert shown.locator(".when").inner_text() == series["when"]
    assert series["when"].startswith("Tue ")
    assert shown.locator(".recurrence").inner_text() == "Every Tuesday"
    assert series["more_dates"] > 40  # a year of Tuesdays in the calendar's window
    summary = shown.locator("details.dates summary")
    assert summary.inner_text() == f"{series['more_dates']} more dates"


def test_the_weekly_session_is_one_result_with_its_next_date_and_more_dates_by_keyboard(
    page: "Page", app: LiveApp
) -> None:
    open_search(page, app.url, q="blues")
    _assert_shown_as_the_api_says(page, app)
    dates = _series(page).locator("details.dates li")
    assert not dates.first.is_visible()
    summary = _series(page).locator("details.dates summary")
    for _ in range(60):  # Tab through the page to the disclosure, as a keyboard user does
        page.keyboard.press("Tab")
        if summary.evaluate("node => node === document.activeElement"):
            break
    else:
        pytest.fail("the dates' disclosure cannot be reached by Tab")
    page.keyboard.press("Enter")
    assert dates.first.is_visible()
    series = _answer(page, app)
    shown = [date.inner_text() for date in dates.all()]
    assert shown[: len(series["dates"])] == [date["when"] for date in series["dates"]]
    assert all(re.match(r"^Tue \d{1,2} [A-Z][a-z]{2}", when) for when in shown[:-1])


def test_without_javascript_the_series_shows_the_same(browser: "Browser", app: LiveApp) -> None:
    context = browser.new_context(java_script_enabled=False)
    try:
        page = context.new_page()
        open_search(page, app.url, q="blues")
        _assert_shown_as_the_api_says(page, app)
        _series(page).locator("details.dates summary").click()
        assert _series(page).locator("details.dates li").first.is_visible()
    finally:
        context.close()


@pytest.mark.parametrize("width", ["desktop", "phone"])
def test_axe_finds_nothing_serious_with_a_series_dates_open(
    axe: Path, browser: "Browser", patient_app: LiveApp, events: int, width: str
) -> None:
    app = searching(patient_app, events)
    context = browser.new_context(viewport=PHONE if width == "phone" else DESKTOP, bypass_csp=True)
    try:
        page = context.new_page()
        open_search(page, app.url, q="blues")
        _series(page).locator("details.dates summary").click()
        page.add_script_tag(path=str(axe))
        assert serious_violations(page) == []
        assert not scrolls_sideways(page)
    finally:
        context.close()


@pytest.mark.skipif(not os.environ.get("SCREENSHOTS_DIR"), reason="SCREENSHOTS_DIR is not set")
def test_take_the_series_screenshot(browser: "Browser", app: LiveApp) -> None:
    """docs/img/search-series.png: the series with its dates open."""
    context = browser.new_context(viewport=DESKTOP, device_scale_factor=1)
    try:
        page = context.new_page()
        open_search(page, app.url, q="blues")
        _series(page).locator("details.dates summary").click()
        assert _series(page).locator("details.dates li").first.is_visible()
        page.screenshot(path=str(Path(os.environ["SCREENSHOTS_DIR"]) / "search-series.png"))
    finally:
        context.close()
