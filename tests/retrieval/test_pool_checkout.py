"""No connection is lost to a cancelled search (retrieval/pg/checkout.py): a storm of
waits for a pooled connection, cancelled at random instants as a search's stages are when
their budgets run out, leaves the pool whole.

The same storm through psycopg_pool 3.3.3's own `pool.connection()` left 2 of a pool of 4
connections lost in each of two runs
(docs/decisions/pool-connections-returned-whatever-cancels.md), so this test fails when
`checked_out` is replaced by it."""

import asyncio
import random
from collections.abc import AsyncIterator

import pytest
from psycopg_pool import AsyncConnectionPool

from retrieval.pg.checkout import checked_out

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
async def pool(test_database_url: str) -> AsyncIterator[AsyncConnectionPool]:
    pool = AsyncConnectionPool(
        test_database_url, min_size=2, max_size=4, open=False, kwargs={"autocommit": True}
    )
    await pool.open(wait=True, timeout=10)
    try:
        yield pool
    finally:
        await pool.close(timeout=1)


async def _storm(pool: AsyncConnectionPool) -> None:
    """Sixteen searches at a time against a pool of four, each cancelled (or not) at a
    random instant: while it waits, as it is handed a connection, while its statement
    runs, as it gives the connection back."""
    rng = random.Random(1)

    async def search() -> None:
        async with checked_out(pool, 0.2) as conn:
            await conn.execute("SELECT pg_sleep(0.003)")

    for _ in range(600):
        tasks = [asyncio.create_task(search()) for _ in range(16)]
        for share, pause_s in ((0.5, 0.01), (0.3, 0.005)):
            await asyncio.sleep(rng.random() * pause_s)
            for task in tasks:
                if rng.random() < share:
                    task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def test_searches_cancelled_at_random_instants_leave_the_pool_whole(
    pool: AsyncConnectionPool,
) -> None:
    await _storm(pool)
    for _ in range(100):  # returning a connection is a task of its own: let them end
        stats = pool.get_stats()
        if stats["pool_available"] == stats["pool_size"] == 4:
            break
        await asyncio.sleep(0.01)
    assert (stats["pool_size"], stats["pool_available"]) == (4, 4), stats
    async with checked_out(pool, 1.0) as conn:  # and they answer
        assert await (await conn.execute("SELECT 1")).fetchone() == (1,)
