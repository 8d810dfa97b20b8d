"""A cold start warms itself before it takes traffic: readiness is 503 until the stack is
warmed up, warm-up reads the search's indexes into memory, and its searches never count
against the vector breaker."""

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
import pytest
from asgiref.sync import sync_to_async
from django.db import connection
from django.test import AsyncClient
from pytest_django import Settings

from ingestion import generations
from ingestion.generations import hnsw_index_name
from resilience.redis_clients import get_redis
from retrieval import service
from retrieval.bounds.deadline import Deadline
from retrieval.cache import cache_key
from retrieval.pg import pool as pg_pool
from retrieval.query.parse import parse_query
from retrieval.warming import warm_up
from tests.conftest import eventually
from tests.search_fixtures import VECTOR_TABLE, index_listings

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def _forget_warm_up() -> None:
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM retrieval_warm_up")


async def test_readiness_is_503_until_the_stack_is_warmed_up_then_200(
    async_client: AsyncClient,
) -> None:
    await sync_to_async(index_listings)()
    await sync_to_async(_forget_warm_up)()
    response = await async_client.get("/healthz/ready")
    assert response.status_code == 503
    assert response.json()["failing"] == ["warm_up"]
    assert (await async_client.get("/healthz/live")).status_code == 200  # alive all along

    async def ready() -> bool:
        return bool((await async_client.get("/healthz/ready")).status_code == 200)

    # The unready process warmed the stack itself, in the background.
    await eventually(ready, 60, "ready")
    await eventually(_background_done, 30, "the background warm-up's end")
    assert await sync_to_async(warm_up.warmed_up)()


async def _background_done() -> bool:
    return not warm_up.warming_up_in_background()


async def test_readiness_warms_up_the_process_own_event_loop_first(
    async_client: AsyncClient, settings: Settings
) -> None:
    """With the stack warm, the first readiness probe runs the warm-up searches on this
    process's own loop: its pool opened whole and kept so, its statements prepared, and the
    breaker told of nothing."""
    settings.SEARCH_POOL_SIZE = 5
    await sync_to_async(index_listings)()
    await sync_to_async(warm_up.mark_warmed_up)()  # the stack warmed by bootstrap
    generation = await service.searchable_generation_id(Deadline.after(5000))
    assert generation is not None
    warmed_key = cache_key(parse_query(warm_up.WARM_UP_QUERIES[0], None), generation)
    assert not get_redis().exists(warmed_key)

    assert (await async_client.get("/healthz/ready")).status_code == 200

    assert get_redis().exists(warmed_key)  # its searches ran, here, before the answer
    pool = await pg_pool.get_pool()
    assert pool.get_stats()["pool_available"] == 5  # every connection open before traffic
    assert (pool.min_size, pool.max_size) == (5, 5)  # and none closed for being idle
    await sync_to_async(service.vector_gate().flush)()
    assert await sync_to_async(service.vector_breaker().window)() == (0, 0)


async def test_the_pool_filled_while_a_first_search_opens_it(settings: Settings) -> None:
    """A readiness probe fills the pool while another request's first search is still
    opening it: psycopg_pool's wait() asserts that no other is under way, and the probe
    answered 500 (once in CI)."""
    settings.SEARCH_POOL_SIZE = 5
    await asyncio.gather(pg_pool.get_pool(), pg_pool.fill_pool(5.0))
    pool = await pg_pool.get_pool()
    assert pool.get_stats()["pool_available"] == 5


@contextmanager
def _locked(url: str, table: str) -> Iterator[None]:
    with psycopg.connect(url) as holder:
        holder.execute(f"LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE")
        yield
        holder.rollback()


def test_warm_up_searches_never_count_against_the_breaker(
    settings: Settings, test_database_url: str
) -> None:
    index_listings()
    # One failure told to the breaker would open it; each vector stage will time out.
    settings.VECTOR_BREAKER_MIN_CALLS = 1
    settings.SEARCH_WARMING_BUDGET_MS = 300
    service.forget_wiring()
    with _locked(test_database_url, VECTOR_TABLE):
        warmed = warm_up.warm_up()
    assert set(warmed.modes) == {"lexical_fallback"}  # every vector stage timed out
    service.vector_gate().flush()  # anything recorded is in Redis now
    assert service.vector_breaker().window() == (0, 0)
    assert service.vector_breaker().state() == "closed"
    assert warm_up.warmed_up()


def _buffered_blocks(relation: str) -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_buffercache"
            " WHERE relfilenode = pg_relation_filenode(%s::regclass)"
            " AND reldatabase = (SELECT oid FROM pg_database WHERE datname = current_database())",
            [relation],
        )
        row = cursor.fetchone()
    return int(row[0]) if row else 0


def test_warm_up_reads_the_active_hnsw_index_and_the_lexical_indexes_into_shared_buffers() -> None:
    index_listings()
    active = generations.active_generation()
    assert active is not None
    hnsw, lexical = hnsw_index_name(active), "listing_search_vector_gin"
    with connection.cursor() as cursor:
        cursor.execute("CREATE EXTENSION IF NOT EXISTS pg_buffercache")
        for relation in (hnsw, lexical):
            cursor.execute("SELECT pg_buffercache_evict_relation(%s::regclass)", [relation])
    assert _buffered_blocks(hnsw) == _buffered_blocks(lexical) == 0

    prewarmed = warm_up.prewarm_relations()

    assert list(prewarmed)[-1] == hnsw  # read last: nothing read after it pushes it out
    for relation in (hnsw, lexical):
        assert prewarmed[relation] > 0
        assert _buffered_blocks(relation) == prewarmed[relation]
