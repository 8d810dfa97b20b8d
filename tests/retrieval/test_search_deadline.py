"""One deadline to the last byte, on real Postgres: loading the result listings runs by the
request's deadline like the stages do, and the lexical stage's statements share its time
instead of each getting the whole budget again."""

import asyncio
import json
import time

import psycopg
import pytest
from django.conf import settings
from django.test import AsyncClient

from retrieval.bounds.deadline import Deadline
from retrieval.pg.lexical import PgLexicalIndex
from retrieval.pg.statement import LISTINGS_TAG
from retrieval.query.parse import parse_query
from retrieval.types import StageTimeoutError
from tests.search_fixtures import statements_running

pytestmark = pytest.mark.django_db(transaction=True)
GRACE_S = 0.020


async def test_a_lock_taken_before_hydration_gives_a_503_by_the_deadline(
    async_client: AsyncClient,
    indexed_listings: None,
    test_database_url: str,
    listings_locked_before_reading: None,
) -> None:
    started = time.monotonic()
    # Bounded: without a timeout of its own, hydration would wait for the lock forever.
    response = await asyncio.wait_for(async_client.get("/api/search", {"q": "jazz"}), 5)
    elapsed_s = time.monotonic() - started
    assert response.status_code == 503, response.content
    assert response["Retry-After"]
    assert "listings_timeout" in json.loads(response.content)["reasons"]
    assert elapsed_s <= settings.SEARCH_DEADLINE_MS / 1000 + GRACE_S
    # Cancelled on the server too: its statement_timeout ended it, nothing waits on.
    assert await statements_running(test_database_url, LISTINGS_TAG) == 0


async def test_the_lexical_statements_share_one_deadline(
    indexed_listings: None, test_database_url: str
) -> None:
    """A misspelt query runs a search, a spelling correction and a second search. With the
    listings locked for the first 150 ms and the vocabulary locked throughout, the
    correction may wait only for what the first search left of 300 ms: the whole search
    ends by then (given a fresh 300 ms, it would end near 450 ms)."""
    listings = await psycopg.AsyncConnection.connect(test_database_url)
    vocabulary = await psycopg.AsyncConnection.connect(test_database_url)
    # A materialized view cannot be LOCKed, but renaming one takes ACCESS EXCLUSIVE, held
    # until the rollback undoes the rename.
    await vocabulary.execute("ALTER MATERIALIZED VIEW retrieval_vocabulary RENAME TO held")
    await listings.execute("LOCK TABLE ingestion_listing IN ACCESS EXCLUSIVE MODE")

    async def release_listings() -> None:
        await asyncio.sleep(0.15)
        await listings.rollback()

    try:
        releasing = asyncio.create_task(release_listings())
        started = time.monotonic()
        with pytest.raises(StageTimeoutError):
            await PgLexicalIndex().search(parse_query("jazzz", "5"), 15, Deadline.after(300))
        elapsed_s = time.monotonic() - started
        await releasing
        assert elapsed_s <= 0.300 + 0.060
    finally:
        await listings.rollback()
        await vocabulary.rollback()
        await listings.close()
        await vocabulary.close()
