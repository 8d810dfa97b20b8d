"""Suggestions under the search box in real headless Chromium against the live app, as the
WAI-ARIA combobox pattern has them: by keyboard alone (arrows, Enter, Escape), announced,
axe-core clean open at desktop and phone width, and the plain search box without
JavaScript. With SCREENSHOTS_DIR set, also docs/img/search-suggestions.png."""

import os
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import parse_qs, urlsplit

import pytest

from tests.browser.conftest import DESKTOP, PHONE
from tests.browser.pages import scrolls_sideways, serious_violations, shown_listings
from tests.live_app import LiveApp

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

LIST = "#q-suggestions"
ATTEMPTS = 5


def _asked(url: str) -> str | None:
    """What a suggestions request asked for; None for any other request."""
    parts = urlsplit(url)
    if parts.path != "/api/suggest":
        return None
    return parse_qs(parts.query).get("q", [None])[0]


def _typed(page: "Page", app: LiveApp, text: str) -> list[str]:
    """`text` typed into the search box key by key; the suggestions then shown. The
    suggestions' statement has a deadline of 30 ms, and past it the answer is none, as it
    should be (retrieval/web/api.py): on a machine loaded by other work the last key is
    typed again after such an answer, a few times at most."""
    page.goto(app.url)
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.id") == "q"
    for attempt in range(ATTEMPTS):
        with page.expect_response(lambda response: _asked(response.url) == text) as answered:
            if attempt == 0:
                page.keyboard.type(text, delay=20)
            else:  # within the script's pause in typing: one request, for the whole text
                page.keyboard.press("Backspace")
                page.keyboard.type(text[-1])
        if answered.value.json()["suggestions"]:
            break
    page.locator(LIST).wait_for(state="visible")
    return [text.strip() for text in page.locator(f"{LIST} [role=option]").all_inner_texts()]


def _chosen(page: "Page") -> str | None:
    active = page.locator("#q").get_attribute("aria-activedescendant")
    if active is None:
        return None
    option = page.locator(f"#{active}")
    assert option.get_attribute("aria-selected") == "true"
    assert page.locator(f"{LIST} [aria-selected=true]").count() == 1
    return option.inner_text()


def test_a_suggestion_is_chosen_and_searched_by_keyboard_alone(page: "Page", app: LiveApp) -> None:
    shown = _typed(page, app, "ja")
    # What starts with what was typed first; a venue would say so.
    assert shown == ["Jazz quartet at the riverside", "Late-night jazz jam"]
    box = page.locator("#q")
    assert box.get_attribute("role") == "combobox"
    assert box.get_attribute("aria-expanded") == "true"
    assert page.get_by_role("status").filter(has_text="2 suggestions").count() == 1
    assert _chosen(page) is None  # nothing is chosen until an arrow is pressed
    page.keyboard.press("ArrowDown")
    assert _chosen(page) == "Jazz quartet at the riverside"
    page.keyboard.press("ArrowDown")
    assert _chosen(page) == "Late-night jazz jam"
    page.keyboard.press("ArrowDown")  # round to the first
    assert _chosen(page) == "Jazz quartet at the riverside"
    page.keyboard.press("ArrowUp")
    assert _chosen(page) == "Late-night jazz jam"
    with page.expect_navigation():
        page.keyboard.press("Enter")
    assert "q=Late-night+jazz+jam" in page.url
    page.locator("#final").wait_for()
    assert shown_listings(page)[0].title == "Late-night jazz jam"


def test_escape_closes_the_suggestions_and_keeps_what_was_typed(page: "Page", app: LiveApp) -> None:
    assert _typed(page, app, "cella") == ["The Cellar Bar · venue"]
    page.keyboard.press("ArrowDown")
    page.keyboard.press("Escape")
    assert page.locator(LIST).is_hidden()
    assert page.locator("#q").get_attribute("aria-expanded") == "false"
    assert page.locator("#q").get_attribute("aria-activedescendant") is None
    assert page.locator("#q").input_value() == "cella"


@pytest.mark.parametrize("width", ["desktop", "phone"])
def test_axe_finds_nothing_serious_with_the_suggestions_open(
    axe: Path, browser: "Browser", app: LiveApp, width: str
) -> None:
    viewport = PHONE if width == "phone" else DESKTOP
    # axe-core goes in as a script tag of the test's own, which the page's policy refuses.
    context = browser.new_context(viewport=viewport, bypass_csp=True)
    try:
        page = context.new_page()
        assert _typed(page, app, "ja")
        page.keyboard.press("ArrowDown")
        page.add_script_tag(path=str(axe))
        assert serious_violations(page) == []
        assert not scrolls_sideways(page)
    finally:
        context.close()


def test_without_javascript_the_box_is_a_plain_search_box(browser: "Browser", app: LiveApp) -> None:
    context = browser.new_context(java_script_enabled=False)
    try:
        page = context.new_page()
        page.goto(app.url)
        box = page.locator("#q")
        assert box.get_attribute("role") is None
        assert page.locator(LIST).count() == 0
        box.fill("organ")
        with page.expect_navigation():
            box.press("Enter")
        assert shown_listings(page)[0].title == "Organ recital"
    finally:
        context.close()


@pytest.mark.skipif(not os.environ.get("SCREENSHOTS_DIR"), reason="SCREENSHOTS_DIR is not set")
def test_take_the_suggestions_screenshot(browser: "Browser", app: LiveApp) -> None:
    context = browser.new_context(viewport=DESKTOP, device_scale_factor=1)
    try:
        page = context.new_page()
        assert _typed(page, app, "ja")
        page.keyboard.press("ArrowDown")
        out = Path(os.environ["SCREENSHOTS_DIR"]) / "search-suggestions.png"
        page.screenshot(path=str(out), clip={"x": 0, "y": 0, "width": 1280, "height": 420})
    finally:
        context.close()
