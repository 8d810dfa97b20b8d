"""Timed-out searches enqueue one warming task per cache key; a real worker fills the
cache; the next timed-out search is served from it, until a new generation is active."""

import asyncio

import pytest
from asgiref.sync import sync_to_async
from django.test import AsyncClient
from pydantic import TypeAdapter
from pytest_django.fixtures import Settings

from ingestion import generations
from ingestion.embedding import DIMENSIONS, MODEL_NAME
from ingestion.indexing import embed_pending_batch
from resilience.redis_clients import get_redis
from retrieval import service
from retrieval.api_types import SearchBody
from retrieval.cache import cache_key
from retrieval.query import parse_query
from tests.conftest import eventually, start_worker, stop_worker, wait_until
from tests.scraping import scrape
from tests.search_fixtures import embeddings_locked, index_listings, search_json

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]
WARMING = "retrieval_cache_warming_total"


def _new_active_generation() -> None:
    generation = generations.create_generation(MODEL_NAME, DIMENSIONS)
    while embed_pending_batch():
        pass
    generations.mark_ready(generation)
    generation.refresh_from_db()
    generations.activate(generation)


async def test_one_warming_task_then_cache_fallback_until_a_new_generation(
    async_client: AsyncClient,
    test_database_url: str,
    child_env: dict[str, str],
    settings: Settings,
) -> None:
    # The twenty timeouts below are within the process's warming rate: only the
    # de-duplication stands between them and twenty tasks.
    settings.SEARCH_WARMING_PER_S = 100.0
    # The vector stage keeps its 40 ms budget and misses it on the lock; the lexical
    # answers of twenty searches at once get a deadline no loaded machine misses (at
    # 150 ms CI's once missed it: 503, `listings_timeout`).
    settings.SEARCH_DEADLINE_MS = 5_000.0
    await sync_to_async(index_listings)()
    redis = get_redis()
    redis.delete("warming")
    await search_json(async_client, q="warm up")  # imports, pools and the model load: not measured
    before = await scrape(async_client)

    async with embeddings_locked(test_database_url):
        bodies = await asyncio.gather(
            *(search_json(async_client, q="jazz night") for _ in range(20))
        )
    assert {body["mode"] for body in bodies} == {"lexical_fallback"}
    timed_out = sum("vector_timeout" in body["reasons"] for body in bodies)
    assert timed_out

    async def every_timeout_warmed_or_deduplicated() -> bool:
        now = await scrape(async_client)
        events = ("enqueued", "deduplicated")
        decided = sum(now.since(before, WARMING, event=event) for event in events)
        return decided == timed_out

    # Warming may be scheduled behind the response: wait for each timeout's decision.
    await eventually(every_timeout_warmed_or_deduplicated, 10, "every warming decision")
    assert redis.llen("warming") == 1  # twenty timeouts, one task

    generation = bodies[0]["index_generation"]
    key = cache_key(parse_query("jazz night", None), generation)
    assert not redis.exists(key)
    worker = await sync_to_async(start_worker)(child_env, name="warming-worker", purge=False)
    try:
        await sync_to_async(wait_until)(
            lambda: bool(redis.exists(key)), 60, "the warmed cache entry"
        )
    finally:
        await sync_to_async(stop_worker)(worker)

    async with embeddings_locked(test_database_url):
        body = await search_json(async_client, q="  JAZZ   Night ")
    assert body["mode"] == "cache_fallback"
    assert body["degraded"] is True
    assert body["cache_age_s"] is not None
    assert body["results"][0]["title"] in {"Jazz quartet at the riverside", "Late-night jazz jam"}
    TypeAdapter(SearchBody).validate_python(body)  # the documented schema admits it

    await sync_to_async(_new_active_generation)()
    service.forget_active_generation()
    async with embeddings_locked(test_database_url):
        body = await search_json(async_client, q="jazz night")
    assert body["mode"] == "lexical_fallback"
