"""Every connection names its role in application_name, so ops can read pg_stat_activity:
the web's searches, a worker's cache warming, and each process's ORM connections."""

import asyncio
import threading

import psycopg
import pytest
from asgiref.sync import sync_to_async
from django.db import connection
from django.test import AsyncClient

from resilience import redis_keys
from resilience.redis_clients import get_redis
from retrieval.pg.pool import SEARCH_CONNECTIONS, WARMING_CONNECTIONS
from retrieval.pg.statement import VECTOR_TAG
from retrieval.query.parse import parse_query
from retrieval.warming import run as warming_run
from retrieval.warming.run import LOCK_PROBE_TAG
from retrieval.warming.schedule import job_payload
from tests.conftest import eventually
from tests.search_fixtures import embeddings_locked

pytestmark = [pytest.mark.django_db(transaction=True)]


async def _names_of(url: str, tag: str) -> set[str]:
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as observer:
        cursor = await observer.execute(
            "SELECT application_name FROM pg_stat_activity WHERE datname = current_database()"
            " AND state = 'active' AND query LIKE %s",
            [f"/* {tag} */%"],
        )
        return {str(row[0]) for row in await cursor.fetchall()}


@pytest.mark.usefixtures("patient_search")
async def test_a_search_names_its_connections(
    async_client: AsyncClient, warmed_up: None, test_database_url: str
) -> None:
    async with embeddings_locked(test_database_url):
        search = asyncio.create_task(async_client.get("/api/search", {"q": "jazz"}))

        async def waiting() -> bool:
            return await _names_of(test_database_url, VECTOR_TAG) == {SEARCH_CONNECTIONS}

        await eventually(waiting, 5, "the search's vector statement, named")
        await search


async def test_cache_warming_names_its_connections(
    indexed_listings: None, test_database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Warming gives up on a lock after LOCK_WAIT_MS; waiting on it long enough to be
    # seen, its first statement shows the connection's name.
    monkeypatch.setattr(warming_run, "LOCK_WAIT_MS", 10_000)
    query = parse_query("organ", None)
    key = "searchsite:results:test-warming-name"
    get_redis().set(redis_keys.warming_job(key), job_payload(query), ex=60)
    async with embeddings_locked(test_database_url):
        # As a Celery worker runs the task: in a thread of its own, with its own loop.
        worker = threading.Thread(target=warming_run.warm, args=[key])
        worker.start()

        async def waiting() -> bool:
            return await _names_of(test_database_url, LOCK_PROBE_TAG) == {WARMING_CONNECTIONS}

        await eventually(waiting, 10, "the warming task's first statement, named")
    await sync_to_async(worker.join)(30)
    assert not worker.is_alive()


def test_the_orm_names_its_process() -> None:
    with connection.cursor() as cursor:
        cursor.execute("SHOW application_name")
        row = cursor.fetchone()
    assert row is not None
    assert str(row[0]).startswith("searchsite-")
