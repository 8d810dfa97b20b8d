"""Sooner first among equals, and `sort=date`, over real Postgres with the real model: two
listings of the same text are equally relevant to both stages, and the sooner is shown
first whichever was written first; sorted by date, the same matching listings come by
start."""

from datetime import datetime, timedelta
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.db import transaction
from django.test import AsyncClient
from django.utils import timezone

from ingestion import generations
from ingestion.embedding import DIMENSIONS, MODEL_NAME
from ingestion.indexing import embed_pending_batch
from ingestion.upsert import apply_draft
from retrieval.pg.pool import get_pool
from tests.conftest import first_search_answered
from tests.factories import draft, source
from tests.search_fixtures import search_json

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("patient_search")]

# external id, title, description, days from now; written in this order, so the later
# of the two equal sessions has the smaller id (a tie would otherwise go to it).
LISTINGS = [
    ("later", "Harpsichord session", "Baroque harpsichord in the crypt.", 20),
    ("sooner", "Harpsichord session", "Baroque harpsichord in the crypt.", 6),
    ("masterclass", "Harpsichord masterclass", "Technique for harpsichord players.", 2),
    ("festival", "Early music festival", "Harpsichord, viol and lute all weekend.", 9),
]


def _listings(now: datetime) -> None:
    generations.ensure_active_generation(MODEL_NAME, DIMENSIONS)
    with transaction.atomic():
        feed = source()
        for external_id, title, description, days in LISTINGS:
            starts = now + timedelta(days=days)
            fields: dict[str, Any] = {"description": description, "venue": "St John's"}
            apply_draft(feed, draft(external_id, title=title, starts_at=starts, **fields), now)
    while embed_pending_batch():
        pass


@pytest.fixture
async def listed(async_client: AsyncClient) -> None:
    await sync_to_async(_listings)(timezone.now())
    await get_pool()
    await first_search_answered(async_client)


def _starts(body: dict[str, Any]) -> list[str]:
    return [result["start"] for result in body["results"]]


async def test_of_two_equally_relevant_listings_the_sooner_comes_first(
    async_client: AsyncClient, listed: None
) -> None:
    body = await search_json(async_client, q="harpsichord session")
    assert body["mode"] == "hybrid"
    sessions = [r for r in body["results"] if r["title"] == "Harpsichord session"]
    assert len(sessions) == 2
    assert sessions[0]["start"] < sessions[1]["start"]
    # Next to each other: equal in both stages, so nothing else ranks between them.
    titles = [r["title"] for r in body["results"]]
    assert titles[:2] == ["Harpsichord session", "Harpsichord session"]


async def test_sorted_by_date_the_same_listings_come_sooner_first(
    async_client: AsyncClient, listed: None
) -> None:
    by_relevance = await search_json(async_client, q="harpsichord")
    by_date = await search_json(async_client, q="harpsichord", sort="date")
    assert by_relevance["mode"] == by_date["mode"] == "hybrid"
    assert sorted(_starts(by_relevance)) == _starts(by_date)
    assert _starts(by_relevance) != _starts(by_date)  # relevance is not date order here
    # Pages are slices of the one date order.
    first = await search_json(async_client, q="harpsichord", sort="date", k="2")
    second = await search_json(async_client, q="harpsichord", sort="date", k="2", page="2")
    assert _starts(first) + _starts(second) == _starts(by_date)


async def test_an_unknown_order_is_refused_by_name(async_client: AsyncClient) -> None:
    response = await async_client.get("/api/search", {"q": "harpsichord", "sort": "price"})
    assert response.status_code == 400
    assert response.json()["parameter"] == "sort"
