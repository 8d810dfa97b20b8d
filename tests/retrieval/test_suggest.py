"""Suggestions as a visitor types (`GET /api/suggest`), over real Postgres: every word
typed, the last as a prefix, then near misses; only listings that can still be attended;
answered 200 within their own deadline whatever the database does."""

import time
from datetime import datetime, timedelta
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.db import transaction
from django.test import AsyncClient
from django.utils import timezone
from pytest_django.fixtures import Settings

from ingestion.models import Audience, Listing, Source
from ingestion.upsert import apply_draft
from retrieval.bounds.deadline import Deadline
from retrieval.pg import suggestions, vocabulary
from tests.factories import draft, source
from tests.scraping import scrape
from tests.search_fixtures import held_by

pytestmark = pytest.mark.django_db(transaction=True)

# external id, title, venue, days from now it starts (negative: over)
EVENTS = [
    ("a", "Late jazz at the Cellar", "The Cellar", 3),
    ("b", "Jazz brunch", "Riverside Café", 3),
    ("c", "Jazz brunch", "Riverside Café", 10),  # the same text twice: the most shared
    ("d", "Organ recital", "St Mary's Church", 4),
    ("e", "Jazzercise for beginners", "Leisure Centre", -2),  # ended
    ("f", "Celebration of jazz", "Town Hall", 5),
    ("g", "Jazz for the withdrawn", "Closed Hall", 6),  # withdrawn below
]


@transaction.atomic
def _events() -> None:
    feed, now = source(), timezone.now()
    for external_id, title, venue, days in EVENTS:
        starts = now + timedelta(days=days)
        apply_draft(feed, draft(external_id, title=title, venue=venue, starts_at=starts), now)
    Listing.objects.filter(title="Jazz for the withdrawn").update(status=Listing.Status.WITHDRAWN)
    judged = Source.objects.create(
        name="judged", kind=Source.Kind.EDITORIAL, audience=Audience.of_evaluation_set("cranfield")
    )
    apply_draft(judged, draft("j", title="Jazz in an evaluation set", venue=""), now)


@pytest.fixture
async def events() -> None:
    await sync_to_async(_events)()
    await sync_to_async(suggestions.refresh)()
    await sync_to_async(vocabulary.refresh)()  # the words a typo is corrected to


async def suggested(client: AsyncClient, q: str | None) -> list[tuple[str, str]]:
    params = {} if q is None else {"q": q}
    response = await client.get("/api/suggest", params)
    assert response.status_code == 200, response.content
    body: dict[str, Any] = response.json()
    return [(one["text"], one["kind"]) for one in body["suggestions"]]


async def test_every_word_typed_the_last_as_a_prefix_the_closest_and_most_shared_first(
    async_client: AsyncClient, events: None
) -> None:
    # Texts that start with what was typed first, then the most shared, then the shortest.
    # Not the ended, the withdrawn nor the evaluation set's.
    assert await suggested(async_client, "jaz") == [
        ("Jazz brunch", "title"),
        ("Celebration of jazz", "title"),
        ("Late jazz at the Cellar", "title"),
    ]
    assert await suggested(async_client, "late cel") == [("Late jazz at the Cellar", "title")]
    # Venues too, ignoring case and accents.
    assert await suggested(async_client, "RIVERSIDE cafe") == [("Riverside Café", "venue")]


async def test_a_typo_is_suggested_its_nearest_texts(
    async_client: AsyncClient, events: None
) -> None:
    assert await suggested(async_client, "orgn recital") == [("Organ recital", "title")]


async def test_too_little_typed_is_suggested_nothing_and_bad_text_is_refused(
    async_client: AsyncClient, events: None
) -> None:
    for typed in (None, "", "   ", "j", "j!", "&|"):
        assert await suggested(async_client, typed) == [], typed
    # tsquery and SQL syntax is text like any other: at most, nothing matches it.
    for hostile in ("jazz & !(x) <-> :*", "jazz'; DROP TABLE ingestion_listing; --", "\\:* |"):
        await suggested(async_client, hostile)
    too_long = await async_client.get("/api/suggest", {"q": "j" * 101})
    assert too_long.status_code == 400
    assert too_long.json()["parameter"] == "q"
    control = await async_client.get("/api/suggest", {"q": "jazz\x00"})
    assert control.status_code == 400


async def test_at_most_the_limit_is_suggested(
    async_client: AsyncClient, events: None, settings: Settings
) -> None:
    settings.SEARCH_SUGGEST_LIMIT = 2
    assert len(await suggested(async_client, "jaz")) == 2


async def test_a_text_is_suggested_until_the_last_of_its_listings_has_ended(
    events: None,
) -> None:
    """Without waiting for a refresh: the view keeps when each text's listings end, and
    the statement compares it with the time it is asked at (the clock injected here)."""
    recital = await Listing.objects.aget(title="Organ recital")
    assert recital.current_until is not None

    async def at(typed: str, now: datetime) -> list[str]:
        found = await suggestions.suggest(typed, 8, Deadline.after(5_000), now=now)
        return [one.text for one in found]

    assert await at("organ", recital.current_until) == ["Organ recital"]
    assert await at("organ", recital.current_until + timedelta(microseconds=1)) == []
    # Two listings share "Jazz brunch": it is suggested until the later one has ended.
    ends = sorted([one.current_until async for one in Listing.objects.filter(title="Jazz brunch")])
    assert await at("jazz b", ends[0] + timedelta(hours=1)) == ["Jazz brunch"]
    assert await at("jazz b", ends[1] + timedelta(hours=1)) == []


async def test_a_stalled_database_gives_no_suggestions_on_time_and_is_counted(
    async_client: AsyncClient, events: None, test_database_url: str, settings: Settings
) -> None:
    settings.SEARCH_SUGGEST_DEADLINE_MS = 50.0
    before = await scrape(async_client)
    # A materialized view cannot be locked with LOCK; a refresh in a transaction left
    # open holds the same ACCESS EXCLUSIVE lock.
    async with held_by(test_database_url, f"REFRESH MATERIALIZED VIEW {suggestions.VIEW}"):
        started = time.monotonic()
        assert await suggested(async_client, "jaz") == []
        took_s = time.monotonic() - started
    assert took_s < 0.050 + 0.5, took_s  # the deadline, and the test client's own time
    after = await scrape(async_client)
    assert after.since(before, "retrieval_suggestions_total", outcome="timeout") == 1
    assert await suggested(async_client, "jaz")  # and answered again at once
