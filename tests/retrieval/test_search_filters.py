"""Search that knows events happen in time and place, over real Postgres: upcoming first by
default (never an ended event, a cached ranking's included), date, venue and kind filters
through both stages, refused values named, the filters in the cache key, and paging."""

import json
from collections.abc import AsyncIterator, Iterator
from datetime import datetime, timedelta
from typing import Any

import numpy as np
import psycopg
import pytest
from asgiref.sync import sync_to_async
from django.db import transaction
from django.test import AsyncClient
from django.utils import timezone

from ingestion import generations
from ingestion.embedding import DIMENSIONS, MODEL_NAME, get_embedder
from ingestion.indexing import embed_pending_batch
from ingestion.models import Listing, Source, SourceRecord
from ingestion.upsert import apply_draft
from resilience.awaiting import writes_done
from resilience.redis_clients import get_redis
from retrieval import service
from retrieval.bounds.deadline import Deadline
from retrieval.cache import cache_key
from retrieval.pg import vector as pg_vector
from retrieval.pg.generation import vector_type
from retrieval.pg.pool import connection, get_pool
from retrieval.pg.vector import PgVectorIndex, vector_text
from retrieval.query.filters import parameters, shape
from retrieval.query.parse import parse_query
from retrieval.types import DateFilter, SearchFilters
from tests.conftest import first_search_answered
from tests.factories import draft, source
from tests.plans import nodes
from tests.search_fixtures import embeddings_locked, search_json

pytestmark = [pytest.mark.django_db(transaction=True)]

WORD = "harpsichord"  # in every listing here, so both stages find them all


def _listings(now: datetime) -> dict[str, int]:
    """A past, an ongoing, a future, an all-day-today and an undated listing, and one at
    another venue from a calendar; their ids by name."""
    generations.ensure_active_generation(MODEL_NAME, DIMENSIONS)
    today = now.replace(hour=0, minute=0, second=0, microsecond=0)
    specs: dict[str, dict[str, Any]] = {
        "past": {
            "starts_at": now - timedelta(days=2),
            "ends_at": now - timedelta(days=2, hours=-2),
        },
        "ongoing": {"starts_at": now - timedelta(hours=1), "ends_at": now + timedelta(hours=2)},
        "future": {"starts_at": now + timedelta(days=3)},
        "all_day": {"starts_at": today, "all_day": True},
        "undated": {"starts_at": None},
    }
    ids = {}
    with transaction.atomic():
        feed = source("Time Out", Source.Kind.FEED)
        for name, times in specs.items():
            apply_draft(
                feed,
                draft(
                    name,
                    title=f"{WORD.title()} {name} recital",
                    venue="Wigmore Hall",
                    description=f"Baroque {WORD} music.",
                    **times,
                ),
                now,
            )
            ids[name] = _listing_of(feed, name)
        calendar = source("Barbican", Source.Kind.CALENDAR)
        apply_draft(
            calendar,
            draft(
                "cafe",
                title=f"{WORD.title()} evening",
                venue="Café Oto",
                description=f"Improvised {WORD}.",
                starts_at=now + timedelta(days=5),
            ),
            now,
        )
        ids["cafe"] = _listing_of(calendar, "cafe")
    while embed_pending_batch():
        pass
    return ids


def _listing_of(of: Source, external_id: str) -> int:
    listing_id = SourceRecord.objects.get(source=of, external_id=external_id).listing_id
    assert listing_id is not None
    return listing_id


@pytest.fixture
async def listed(async_client: AsyncClient) -> AsyncIterator[dict[str, int]]:
    ids = await sync_to_async(_listings)(timezone.now())
    await get_pool()
    await first_search_answered(async_client)
    yield ids
    service.forget_searchable_generation()


def _ids(body: dict[str, Any], ids: dict[str, int]) -> set[str]:
    names = {pk: name for name, pk in ids.items()}
    return {names[result["id"]] for result in body["results"]}


@pytest.mark.usefixtures("patient_search")
async def test_a_search_without_dates_never_returns_an_ended_event(
    async_client: AsyncClient, listed: dict[str, int]
) -> None:
    body = await search_json(async_client, q=f"{WORD} recital", timeout_ms="1000")
    assert body["mode"] == "hybrid"
    assert _ids(body, listed) == {"ongoing", "future", "all_day", "undated", "cafe"}


async def test_ended_events_are_not_even_vector_candidates(listed: dict[str, int]) -> None:
    embedding = np.asarray(get_embedder().embed_query(f"{WORD} recital"), dtype=np.float32)
    generation = await service.searchable_generation_id(Deadline.after(1000))
    assert generation is not None
    found = await PgVectorIndex().search(embedding, generation, 50, Deadline.after(1000))
    assert listed["past"] not in {c.listing_id for c in found}
    assert listed["future"] in {c.listing_id for c in found}


async def test_past_events_only_when_asked_for(
    async_client: AsyncClient, listed: dict[str, int]
) -> None:
    past = await search_json(async_client, q=WORD, when="past", timeout_ms="1000")
    assert _ids(past, listed) == {"past"}
    day = (timezone.now() - timedelta(days=2)).date().isoformat()  # the past one's
    ranged = await search_json(async_client, q=WORD, **{"from": day, "to": day}, timeout_ms="1000")
    assert _ids(ranged, listed) == {"past"}
    everything = await search_json(async_client, q=WORD, when="any", timeout_ms="1000")
    assert _ids(everything, listed) == set(listed)


async def test_a_cached_ranking_never_shows_an_event_that_ended_since(
    async_client: AsyncClient, test_database_url: str, listed: dict[str, int]
) -> None:
    query = f"{WORD} recital"
    await search_json(async_client, q=query, timeout_ms="1000")
    await writes_done()
    generation = await service.searchable_generation_id(Deadline.after(1000))
    assert generation is not None
    raw = get_redis().get(cache_key(parse_query(query, None), generation))
    assert raw is not None
    assert listed["ongoing"] in json.loads(raw)["ranking"]
    # The ongoing event ends (its source says so) after its ranking was cached.
    await sync_to_async(Listing.objects.filter(pk=listed["ongoing"]).update)(
        ends_at=timezone.now() - timedelta(minutes=1)
    )
    async with embeddings_locked(test_database_url):
        body = await search_json(async_client, q=query)
    assert body["mode"] == "cache_fallback"
    assert _ids(body, listed) == {"future", "all_day", "undated", "cafe"}


@pytest.mark.usefixtures("patient_search")
async def test_venue_matches_names_without_case_or_accents(
    async_client: AsyncClient, listed: dict[str, int]
) -> None:
    for venue in ("café oto", "CAFE OTO", "Oto"):
        body = await search_json(async_client, q=WORD, venue=venue, timeout_ms="1000")
        assert _ids(body, listed) == {"cafe"}, venue
        assert body["mode"] == "hybrid"
    wigmore = await search_json(async_client, q=WORD, venue="wigmore", timeout_ms="1000")
    assert _ids(wigmore, listed) == {"ongoing", "future", "all_day", "undated"}


async def test_kind_filters_on_the_listings_sources(
    async_client: AsyncClient, listed: dict[str, int]
) -> None:
    response = await async_client.get(
        "/api/search", {"q": WORD, "kind": ["calendar", "editorial"], "timeout_ms": "1000"}
    )
    body = json.loads(response.content)
    assert _ids(body, listed) == {"cafe"}
    assert body["results"][0]["sources"] == [{"name": "Barbican", "kind": "calendar"}]
    assert body["results"][0]["provenance"]


async def test_a_selective_filter_still_fills_the_vector_stage(listed: dict[str, int]) -> None:
    """One listing in six passes: a scan of the nearest few would find none of the rest;
    the stage still returns every listing that passes, nearest first."""
    embedding = np.asarray(get_embedder().embed_query("pottery"), dtype=np.float32)
    generation = await service.searchable_generation_id(Deadline.after(1000))
    assert generation is not None
    filters = SearchFilters(venue="cafe oto")
    found = await PgVectorIndex().search(embedding, generation, 5, Deadline.after(1000), filters)
    assert [c.listing_id for c in found] == [listed["cafe"]]
    start = timezone.now() + timedelta(days=2)
    window = DateFilter(start, start + timedelta(days=2), False, False, False)
    found = await PgVectorIndex().search(
        embedding, generation, 5, Deadline.after(1000), SearchFilters(dates=window)
    )
    assert [c.listing_id for c in found] == [listed["future"]]


@pytest.fixture
def index_scans_only(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No filter passes few enough listings to rank exactly: every filtered search reads
    on through the HNSW index (what a filter passing 5 % or more of 100,000 listings does)."""
    monkeypatch.setattr(pg_vector, "EXACT_MIN", 0)
    monkeypatch.setattr(pg_vector, "GRAPH_COST", 0)
    pg_vector._statement.cache_clear()
    yield
    pg_vector._statement.cache_clear()


@pytest.mark.usefixtures("index_scans_only")
async def test_the_index_scan_reads_on_to_what_passes_the_filter(listed: dict[str, int]) -> None:
    embedding = np.asarray(get_embedder().embed_query("pottery"), dtype=np.float32)
    generation = await service.searchable_generation_id(Deadline.after(1000))
    assert generation is not None
    by_venue = await PgVectorIndex().search(
        embedding, generation, 5, Deadline.after(1000), SearchFilters(venue="cafe oto")
    )
    assert [c.listing_id for c in by_venue] == [listed["cafe"]]
    past = DateFilter(None, None, not_ended=False, ended=True, undated=False)
    ended = await PgVectorIndex().search(
        embedding, generation, 5, Deadline.after(1000), SearchFilters(dates=past)
    )
    assert [c.listing_id for c in ended] == [listed["past"]]


async def _ranked_exactly(generation: int, filters: SearchFilters, limit: int) -> bool:
    """Whether the stage's statement for `filters` ranked what passes exactly: its exact
    branch read the embeddings, and the branch reading on in distance order did not."""
    embedding = np.asarray(get_embedder().embed_query("pottery"), dtype=np.float32)
    kind = await vector_type(generation, Deadline.after(1000))
    statement, local = pg_vector._statement(DIMENSIONS, kind, generation, shape(filters))
    params = {"embedding": vector_text(embedding), "limit": limit, **parameters(filters)}
    async with connection(1) as conn, conn.transaction():
        cursor = psycopg.AsyncClientCursor(conn)
        for name, value in local.items():
            await cursor.execute("SELECT set_config(%s, %s, true)", [name, value])
        await cursor.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + statement, params)
        (document,) = await cursor.fetchone() or ("[]",)
    (top,) = json.loads(document) if isinstance(document, str) else document
    read = {
        branch["Alias"]: any(
            node.get("Relation Name") == "ingestion_listing_embedding" and node["Actual Loops"]
            for node in nodes(branch)
        )
        for branch in nodes(top["Plan"])
        if branch.get("Alias") in ("exact", "near")
    }
    assert read["exact"] != read["near"], read
    return read["exact"]


async def test_the_exact_bound_grows_with_the_limit_and_the_vectors(
    listed: dict[str, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """With no floor, what passes is ranked exactly below sqrt(GRAPH_COST x limit x N), N the
    vectors the planner counted in the generation's index (six, analysed here). Wigmore
    Hall's upcoming listings (three or four pass) against sqrt(1 x 1 x 6), about 2: the
    graph reads on; against sqrt(1 x 10 x 6), about 8: ranked exactly."""
    monkeypatch.setattr(pg_vector, "EXACT_MIN", 0)
    monkeypatch.setattr(pg_vector, "GRAPH_COST", 1)
    pg_vector._statement.cache_clear()
    generation = await service.searchable_generation_id(Deadline.after(1000))
    assert generation is not None
    async with connection(5) as conn:
        await conn.execute("ANALYZE ingestion_listing_embedding")
    filters = SearchFilters(venue="wigmore hall")
    try:
        assert not await _ranked_exactly(generation, filters, 1)
        assert await _ranked_exactly(generation, filters, 10)
    finally:
        pg_vector._statement.cache_clear()


@pytest.mark.parametrize(
    ("params", "parameter"),
    [
        ({"when": "someday"}, "when"),
        ({"from": "soon"}, "from"),
        ({"from": "2027-02-01", "to": "2027-01-01"}, "to"),
        ({"kind": "podcast"}, "kind"),
        ({"venue": "!!!"}, "venue"),
        ({"page": "0"}, "page"),
        ({"k": "500"}, "k"),
    ],
)
async def test_bad_filter_values_are_a_400_naming_the_parameter(
    async_client: AsyncClient, params: dict[str, str], parameter: str
) -> None:
    response = await async_client.get("/api/search", {"q": WORD, **params})
    assert response.status_code == 400
    body = json.loads(response.content)
    assert body["parameter"] == parameter
    assert parameter in body["error"]


def test_filters_are_part_of_the_cache_key() -> None:
    query = parse_query("jazz", None)
    venue = cache_key(query.__class__(**{**vars(query), "filters": SearchFilters(venue="oto")}), 1)
    assert cache_key(query, 1) != venue
    again = query.__class__(**{**vars(query), "filters": SearchFilters(venue="oto")})
    assert cache_key(again, 1) == venue


async def test_pages_are_slices_of_one_ranking(
    async_client: AsyncClient, listed: dict[str, int]
) -> None:
    everything = await search_json(async_client, q=WORD, when="any", k="6", timeout_ms="1000")
    assert everything["next_page"] is None
    first = await search_json(async_client, q=WORD, when="any", k="4", timeout_ms="1000")
    second = await search_json(async_client, q=WORD, when="any", k="4", page="2", timeout_ms="1000")
    assert first["next_page"] == 2
    assert second["next_page"] is None
    paged = [r["id"] for r in first["results"] + second["results"]]
    assert paged == [r["id"] for r in everything["results"]]


async def test_a_misspelt_query_gets_a_suggestion(
    async_client: AsyncClient, listed: dict[str, int]
) -> None:
    await sync_to_async(_refresh_vocabulary)()
    body = await search_json(async_client, q="harpsicord", timeout_ms="1000")
    assert body["suggestion"] == WORD
    plain = await search_json(async_client, q=WORD, timeout_ms="1000")
    assert plain["suggestion"] is None


def _refresh_vocabulary() -> None:
    from retrieval.pg import vocabulary

    vocabulary.refresh()
