"""While another connection holds ACCESS EXCLUSIVE on the embeddings table, every search
starts a vector statement that waits on the lock, still answers in time from lexical
results or the cache, and leaves no vector statement of its own running in Postgres."""

import asyncio
import json
import time
from collections.abc import AsyncIterator

import psycopg
import pytest
from asgiref.sync import sync_to_async
from django.conf import settings
from django.test import AsyncClient
from pytest_django.fixtures import Settings

from retrieval import service
from retrieval.pg.statement import VECTOR_TAG
from tests.search_fixtures import embeddings_locked, index_listings

pytestmark = pytest.mark.django_db(transaction=True)
SEARCHES = 50
GRACE_S = 0.020
POLL_S = 0.003
QUERIES = ["jazz", "Jazz  quartet", "bread", "organ recital", "science fair"]


@pytest.fixture
async def locked_embeddings(
    test_database_url: str, async_client: AsyncClient, settings: Settings
) -> AsyncIterator[psycopg.AsyncConnection]:
    # With the default minimum of calls the breaker opens after ten timeouts, and the
    # searches after those never start a vector statement: this test would then prove
    # nothing about them. A minimum above the number of searches, warm-ups included,
    # keeps it closed.
    settings.VECTOR_BREAKER_MIN_CALLS = len(QUERIES) + SEARCHES + 1
    service.forget_wiring()
    await sync_to_async(index_listings)()
    # Each query once first: a process's first request pays for imports, the model load
    # and the pool's connections, and a query's first embedding for its encoding; none of
    # that is what this test measures, and it would use up the vector budget before the
    # vector statement is sent.
    for query in QUERIES:
        assert (await async_client.get("/api/search", {"q": query})).status_code == 200
    async with embeddings_locked(test_database_url) as holder:
        yield holder
    service.forget_wiring()


async def _vector_statements_running(observer: psycopg.AsyncConnection, holder_pid: int) -> int:
    cursor = await observer.execute(
        "SELECT count(*) FROM pg_stat_activity"
        " WHERE datname = current_database() AND pid NOT IN (pg_backend_pid(), %s)"
        " AND state = 'active' AND query LIKE %s",
        [holder_pid, f"/* {VECTOR_TAG} */%"],
    )
    row = await cursor.fetchone()
    return int(row[0]) if row else 0


async def _saw_a_vector_statement(
    observer: psycopg.AsyncConnection, holder_pid: int, search: "asyncio.Task[object]"
) -> bool:
    """Whether a vector statement shows up in Postgres before `search` ends. It waits on
    the lock for the whole vector budget, so a poll every few milliseconds sees it; any
    faster and the polls would take the event loop from the search they watch."""
    while not search.done():
        if await _vector_statements_running(observer, holder_pid):
            return True
        await asyncio.sleep(POLL_S)
    return False


async def _none_left_by(
    observer: psycopg.AsyncConnection, holder_pid: int, deadline: float
) -> bool:
    """Whether every vector statement is gone by `deadline` (a time.monotonic() value)."""
    while await _vector_statements_running(observer, holder_pid):
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(POLL_S)
    return True


async def test_each_search_starts_a_vector_statement_answers_in_time_and_leaves_none(
    async_client: AsyncClient,
    locked_embeddings: psycopg.AsyncConnection,
    test_database_url: str,
) -> None:
    deadline_s = settings.SEARCH_DEADLINE_MS / 1000
    budget_s = settings.SEARCH_VECTOR_BUDGET_MS / 1000
    holder_pid = locked_embeddings.info.backend_pid
    observer = await psycopg.AsyncConnection.connect(test_database_url, autocommit=True)
    modes, slowest = set(), 0.0
    started_statement, timed_out, cleaned_up = [], [], []
    try:
        for number in range(SEARCHES):
            started = time.monotonic()
            search = asyncio.create_task(
                async_client.get("/api/search", {"q": QUERIES[number % len(QUERIES)]})
            )
            started_statement.append(await _saw_a_vector_statement(observer, holder_pid, search))
            response = await search
            elapsed = time.monotonic() - started
            assert response.status_code == 200, response.content
            body = json.loads(response.content)
            assert body["results"], body
            timed_out.append("vector_timeout" in body["reasons"])
            modes.add(body["mode"])
            slowest = max(slowest, elapsed)
            bound = started + budget_s + GRACE_S
            cleaned_up.append(await _none_left_by(observer, holder_pid, bound))
    finally:
        await observer.close()
    assert started_statement == [True] * SEARCHES, "searches without a vector statement"
    assert timed_out == [True] * SEARCHES, "searches without a vector timeout"
    assert modes <= {"lexical_fallback", "cache_fallback"}
    assert slowest <= deadline_s + GRACE_S, f"slowest search took {slowest * 1000:.1f} ms"
    assert cleaned_up == [True] * SEARCHES, "vector statements left running"
