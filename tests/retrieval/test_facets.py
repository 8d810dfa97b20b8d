"""Counts on the filters (issue 33, item 3), over real Postgres with the real model: every
count is the number of results the search with that choice then gives; a count above
what the stages rank says "at least"; and with the counts' statement stalled the results
come on time without them, saying why."""

import asyncio
import time
from datetime import datetime, timedelta
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.db import transaction
from django.test import AsyncClient
from django.utils import timezone
from pytest_django.fixtures import Settings

from ingestion import generations
from ingestion.embedding import DIMENSIONS, MODEL_NAME
from ingestion.indexing import embed_pending_batch
from ingestion.models import Source
from ingestion.upsert import apply_drafts
from resilience.awaiting import writes_done
from retrieval.bounds.deadline import Deadline
from retrieval.pg import facets, suggestions
from retrieval.pg.statement import FACETS_TAG, fetch_with_local_settings
from retrieval.pg.suggestions import VIEW
from retrieval.types import DEFAULT_FILTERS, StageTimeoutError
from tests.conftest import first_search_answered
from tests.factories import draft, source
from tests.search_fixtures import held_by, search_json

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("patient_search")]


# Days from now of each listing: today (30 minutes on), within the week, then six later.
DAYS = [0.02, 2, 5, 12, 20, 30, 40, 50, 60]


def _listings(now: datetime) -> None:
    """Concerts on each kind of source at two venues, and a lecture among them."""
    generations.ensure_active_generation(MODEL_NAME, DIMENSIONS)
    venues = ["Riverside Hall", "The Cellar Bar", "Riverside Hall"]
    with transaction.atomic():
        sources = {kind: source(f"{kind} source", kind) for kind in Source.Kind.values}
        for n, days in enumerate(DAYS):
            kind = Source.Kind.values[n % 3]
            title = "Lecture on harmony" if n == 5 else f"Concert number {n}"
            starts_at = now + timedelta(days=days)
            listing = draft(f"c{n}", title=title, starts_at=starts_at, venue=venues[n % 3])
            apply_drafts(sources[kind], [listing], now)
    while embed_pending_batch():
        pass
    suggestions.refresh()


@pytest.fixture
async def listed(async_client: AsyncClient) -> None:
    await sync_to_async(_listings)(timezone.now())
    await first_search_answered(async_client)
    # Its counts (the default filters, as the tests count) may go on behind its response;
    # ended here, they cannot keep or rest a count after a test's `facets.forget()`.
    await writes_done()


async def _with_facets(client: AsyncClient, **params: str) -> dict[str, Any]:
    """The search's answer once its facets are counted: they are given only if done when
    the results are, which a machine busy enough may miss once; then they are kept."""
    deadline = time.monotonic() + 30
    while True:
        body = await search_json(client, **params)
        if body["facets"] is not None or time.monotonic() > deadline:
            return body


async def _all_results(client: AsyncClient, **params: str) -> list[dict[str, Any]]:
    results: list[dict[str, Any]] = []
    page: int | None = 1
    while page is not None:
        body = await search_json(client, **params, page=str(page))
        results += body["results"]
        page = body["next_page"]
    return results


async def test_each_count_is_what_the_search_with_that_choice_gives(
    async_client: AsyncClient, listed: None
) -> None:
    body = await _with_facets(async_client, q="concert")
    facets = body["facets"]
    assert facets is not None
    assert body["degraded"] is False
    assert [c["value"] for c in facets["when"]] == ["today", "this-weekend", "next-7-days", "later"]
    assert [c["value"] for c in facets["kind"]] == ["feed", "calendar", "editorial"]
    assert {c["value"] for c in facets["venue"]} == {"Riverside Hall", "The Cellar Bar"}
    asked = (
        [("when", c) for c in facets["when"]]
        + [("kind", c) for c in facets["kind"]]
        + [("venue", c) for c in facets["venue"]]
    )
    for name, count in asked:
        assert count["at_least"] is False
        given = await _all_results(async_client, q="concert", **{name: count["value"]})
        assert count["count"] == len(given), (name, count, [r["title"] for r in given])
    later = {c["value"]: c["count"] for c in facets["when"]}["later"]
    assert later == 6  # the lecture too, ranked lower: every listing passing is ranked


async def test_a_count_past_what_the_stages_rank_is_at_least_that(
    async_client: AsyncClient, listed: None
) -> None:
    # One result a page: each stage ranks 5 candidates (CANDIDATES_PER_RESULT), and six
    # listings are on later than the next 7 days.
    body = await _with_facets(async_client, q="concert", k="1")
    when = {c["value"]: c for c in body["facets"]["when"]}
    assert when["later"] == {"value": "later", "count": 5, "at_least": True}
    assert len(await _all_results(async_client, q="concert", k="1", when="later")) >= 5
    # Under the limit, exact as ever.
    kinds = {c["value"]: c for c in body["facets"]["kind"]}
    assert kinds["feed"] == {"value": "feed", "count": 3, "at_least": False}


async def test_with_the_counts_stalled_the_results_come_on_time_without_them(
    async_client: AsyncClient, listed: None, test_database_url: str, settings: Settings
) -> None:
    settings.SEARCH_FACETS_TTL_S = 0  # none kept from the search before: counted afresh
    # A budget longer than any search: results that waited for the counts would be late.
    settings.SEARCH_FACETS_BUDGET_MS = 8_000
    # Only the counts read the suggestions' view (its top venues): a refresh holding it
    # stalls them alone.
    async with held_by(test_database_url, f"REFRESH MATERIALIZED VIEW {VIEW}"):
        started = time.monotonic()
        body = await search_json(async_client, q="concert", when="any")
        took_ms = (time.monotonic() - started) * 1000
    assert body["facets"] is None
    assert "facets_timeout" in body["reasons"]
    assert body["degraded"] is False  # the results are whole
    assert body["mode"] == "hybrid"
    assert {r["title"] for r in body["results"]} >= {"Concert number 0", "Concert number 4"}
    # On time: not held for the counts' budget, nor for the lock.
    assert took_ms < 4_000


async def test_counts_not_done_in_time_finish_behind_and_serve_the_next_search(
    async_client: AsyncClient, listed: None, test_database_url: str, settings: Settings
) -> None:
    settings.SEARCH_FACETS_BUDGET_MS = 8_000
    facets.forget()
    view_held = f"REFRESH MATERIALIZED VIEW {VIEW}"
    async with held_by(test_database_url, view_held):
        first = await search_json(async_client, q="concert", when="any")
    assert first["facets"] is None
    await writes_done()  # the counts, let go on behind the response, end once free
    # The view held again: the next search's counts can only come from those kept.
    async with held_by(test_database_url, view_held):
        second = await search_json(async_client, q="jazz", when="any")
    assert second["facets"] is not None
    assert "facets_timeout" not in second["reasons"]


def _count_recorder(
    monkeypatch: pytest.MonkeyPatch, fail: bool = False
) -> tuple[list[str], asyncio.Event]:
    """The counting statements sent, each held until the event is set (or failing as a
    missed budget does)."""
    sent: list[str] = []
    release = asyncio.Event()
    fetch = fetch_with_local_settings

    async def held(tag: str, *args: Any, **kw: Any) -> Any:
        sent.append(tag)
        await release.wait()
        if fail:
            raise StageTimeoutError("the counts' budget passed")
        return await fetch(tag, *args, **kw)

    monkeypatch.setattr(facets, "fetch_with_local_settings", held)
    return sent, release


async def _generation() -> int:
    return (await sync_to_async(generations.ensure_active_generation)(MODEL_NAME, DIMENSIONS)).pk


async def test_searches_finding_no_counts_kept_share_the_one_in_flight(
    listed: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    facets.forget()
    sent, release = _count_recorder(monkeypatch)
    generation, now = await _generation(), timezone.now()
    counting = [
        asyncio.ensure_future(
            facets.count(DEFAULT_FILTERS, generation, 50, Deadline.after(5_000), now)
        )
        for _ in range(5)
    ]
    for _ in range(3):  # each task runs to its first wait in one turn of the loop
        await asyncio.sleep(0)
    assert not any(c.done() for c in counting)
    release.set()
    counted = await asyncio.gather(*counting)
    assert sent == [FACETS_TAG]
    assert all(c == counted[0] for c in counted)
    assert {c.value for c in counted[0].kind} == {"feed", "calendar", "editorial"}


async def test_after_a_count_fails_none_is_tried_again_for_a_while(
    listed: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    facets.forget()
    sent, release = _count_recorder(monkeypatch, fail=True)
    release.set()
    now = [1_000.0]
    monkeypatch.setattr(facets, "_clock", lambda: now[0])
    generation, today = await _generation(), timezone.now()

    async def count() -> facets.Facets:
        return await facets.count(DEFAULT_FILTERS, generation, 50, Deadline.after(5_000), today)

    with pytest.raises(StageTimeoutError):
        await count()
    now[0] += facets.RETRY_AFTER_S - 0.1
    with pytest.raises(facets.CountsRestingError):
        await count()
    assert len(sent) == 1  # resting: no statement
    now[0] += 0.2
    with pytest.raises(StageTimeoutError):
        await count()
    assert len(sent) == 2
