"""The page's filters in real headless Chromium against the live app: "this weekend" and a
venue chosen in the form narrow the listings shown to those the filters describe; each
count beside the results is the number of listings its link then shows."""

import re
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING
from urllib.parse import parse_qs, urlparse
from zoneinfo import ZoneInfo

import pytest
from django.conf import settings
from django.db import transaction

from ingestion.indexing import embed_pending_batch
from ingestion.models import Listing, Source
from ingestion.upsert import apply_draft
from retrieval.query.dates import shortcut_range
from tests.browser.pages import open_search, shown_listings
from tests.conftest import wait_until
from tests.factories import draft
from tests.live_app import LiveApp

if TYPE_CHECKING:
    from playwright.sync_api import Page


@pytest.fixture
def weekend_gig(events: int) -> str:
    """One more Cellar Bar event, this weekend (the events' own dates fall where they
    may), unless the weekend has nearly gone."""
    now = datetime.now(UTC)
    start, end = shortcut_range("this-weekend", now=now, zone=ZoneInfo(settings.TIME_ZONE))
    at = max(start + timedelta(hours=20), now + timedelta(minutes=30))
    if at + timedelta(hours=1) >= end:
        pytest.skip("the weekend is nearly over: no event can still be ahead in it")
    with transaction.atomic():
        calendar = Source.objects.get(kind=Source.Kind.CALENDAR)
        gig = draft("weekend-gig", title="Weekend jazz cellar session", venue="The Cellar Bar",
                    description="Late jazz on Saturday.", starts_at=at,
                    ends_at=at + timedelta(hours=1), timezone="Europe/London")  # fmt: skip
        apply_draft(calendar, gig, now)
    while embed_pending_batch():
        pass
    return gig.title


def _expected(venue_word: str) -> tuple[set[str], set[str]]:
    """The titles at a venue with that word that this weekend holds (still to end), and
    those it does not."""
    now = datetime.now(UTC)
    start, end = shortcut_range("this-weekend", now=now, zone=ZoneInfo(settings.TIME_ZONE))
    inside: set[str] = set()
    outside: set[str] = set()
    for listing in Listing.objects.filter(venue__icontains=venue_word):
        until = listing.ends_at or listing.starts_at
        held = (
            listing.starts_at is not None
            and until is not None
            and listing.starts_at < end
            and until >= max(start, now)
        )
        (inside if held else outside).add(listing.title)
    return inside, outside


def test_this_weekend_at_one_venue_shows_just_those_listings(
    page: "Page", app: LiveApp, weekend_gig: str
) -> None:
    page.goto(app.url)
    page.get_by_label("What are you looking for?").fill("jazz night music")
    page.get_by_label("When").select_option(label="This weekend")
    page.get_by_label("Venue").fill("cellar")
    page.keyboard.press("Enter")
    page.locator("#final").wait_for()

    asked = parse_qs(urlparse(page.url).query)
    assert asked["when"] == ["this-weekend"]
    assert asked["venue"] == ["cellar"]
    inside, outside = _expected("cellar")
    assert weekend_gig in inside
    assert outside, "every Cellar Bar event is this weekend: the filter would show nothing"
    titles = {listing.title for listing in shown_listings(page)}
    assert titles == inside
    for listing in shown_listings(page):
        assert listing.venue == "The Cellar Bar"


def _counted(label: str) -> int:
    """The count a facet's link says: "This weekend (3)" is 3."""
    match = re.fullmatch(r".* \((\d+)\)", label)
    assert match, f"{label!r} carries no exact count"
    return int(match.group(1))


def test_each_count_beside_the_results_is_what_its_link_then_shows(
    page: "Page", app: LiveApp
) -> None:
    def counted() -> bool:
        open_search(page, app.url, q="music")
        return bool(page.locator("#final nav.facets").count())

    # Counts are given only when done with the results, then kept for the next search; one
    # that missed its budget rests its filters for facets.RETRY_AFTER_S (5 s), so the bound
    # outlasts a few rests, as a loaded machine's first counts can miss theirs.
    wait_until(counted, 30, "a page with its counts")
    facets = page.get_by_role("navigation", name="Narrow the results")
    links = [
        (link.inner_text(), link.get_attribute("href") or "")
        for link in facets.get_by_role("link").all()
    ]
    assert {label.split(" (")[0] for label, _ in links} >= {
        "Today",
        "This weekend",
        "Next 7 days",
        "Later",
        "Feed",
        "Calendar",
        "Editorial",
    }
    assert any(_counted(label) > 0 for label, _ in links)
    for label, href in links:
        page.goto(f"{app.url}/{href}")
        page.locator("#final").wait_for()
        assert len(shown_listings(page)) == _counted(label), (label, href)
