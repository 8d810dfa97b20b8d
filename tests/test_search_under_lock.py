"""While another connection holds ACCESS EXCLUSIVE on the embeddings table, every search
still answers in time from lexical results or the cache, and no vector statement of theirs
is left running in Postgres."""

import json
import time
from collections.abc import AsyncIterator

import psycopg
import pytest
from django.conf import settings
from django.test import AsyncClient

from retrieval.pg import VECTOR_TAG
from tests.search_fixtures import embeddings_locked, index_listings

pytestmark = pytest.mark.django_db(transaction=True)
SEARCHES = 50
GRACE_S = 0.020


@pytest.fixture
async def locked_embeddings(
    test_database_url: str, async_client: AsyncClient
) -> AsyncIterator[psycopg.AsyncConnection]:
    from asgiref.sync import sync_to_async

    await sync_to_async(index_listings)()
    # One search first: a process's first request pays for imports, the model load and the
    # pool's connections, which is not what this test measures.
    assert (await async_client.get("/api/search", {"q": "warm up"})).status_code == 200
    async with embeddings_locked(test_database_url) as holder:
        yield holder


async def _vector_statements_running(observer: psycopg.AsyncConnection, holder_pid: int) -> int:
    cursor = await observer.execute(
        "SELECT count(*) FROM pg_stat_activity"
        " WHERE datname = current_database() AND pid NOT IN (pg_backend_pid(), %s)"
        " AND state = 'active' AND query LIKE %s",
        [holder_pid, f"/* {VECTOR_TAG} */%"],
    )
    row = await cursor.fetchone()
    return int(row[0]) if row else 0


async def test_searches_answer_in_time_and_leave_nothing_running(
    async_client: AsyncClient,
    locked_embeddings: psycopg.AsyncConnection,
    test_database_url: str,
) -> None:
    import asyncio

    deadline_s = settings.SEARCH_DEADLINE_MS / 1000
    budget_s = settings.SEARCH_VECTOR_BUDGET_MS / 1000
    holder_pid = locked_embeddings.info.backend_pid
    observer = await psycopg.AsyncConnection.connect(test_database_url, autocommit=True)
    queries = ["jazz", "Jazz  quartet", "bread", "organ recital", "science fair"]
    modes, slowest, leftovers = set(), 0.0, []
    try:
        for number in range(SEARCHES):
            started = time.monotonic()
            response = await async_client.get("/api/search", {"q": queries[number % 5]})
            elapsed = time.monotonic() - started
            assert response.status_code == 200, response.content
            body = json.loads(response.content)
            assert body["results"], body
            assert "vector_timeout" in body["reasons"] or "breaker_open" in body["reasons"]
            modes.add(body["mode"])
            slowest = max(slowest, elapsed)
            await asyncio.sleep(max(0.0, started + budget_s + GRACE_S - time.monotonic()))
            leftovers.append(await _vector_statements_running(observer, holder_pid))
    finally:
        await observer.close()
    assert modes <= {"lexical_fallback", "cache_fallback"}
    assert slowest <= deadline_s + GRACE_S, f"slowest search took {slowest * 1000:.1f} ms"
    assert leftovers == [0] * SEARCHES
