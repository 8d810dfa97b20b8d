"""A process whose search pool first opens while Postgres is unreachable (retrieval/pg/pool.py):
its first search waits about a second for a connection, where opening the pool used to wait
30 s, and the searches after it fail at once, as in an outage that began under a
statement."""

import time

import pytest

from retrieval.pg import outage
from retrieval.pg import pool as pg_pool
from tests.conftest import free_port

BUDGET_S = 0.05


async def _search_connection() -> None:
    async with pg_pool.connection(BUDGET_S):
        raise AssertionError("connected to a server that does not exist")


async def test_a_pool_opened_while_postgres_is_down_fails_its_searches_fast(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    nobody = f"host=127.0.0.1 port={free_port()} dbname=listings user=search connect_timeout=2"
    monkeypatch.setattr(pg_pool, "conninfo", lambda server: nobody)
    try:
        started = time.perf_counter()
        with pytest.raises(outage.DatabaseUnavailableError):
            await _search_connection()
        assert time.perf_counter() - started < outage.PROBE_TIMEOUT_S + 0.5

        started = time.perf_counter()
        with pytest.raises(outage.DatabaseUnavailableError):
            await _search_connection()
        assert time.perf_counter() - started < 0.01
    finally:
        await pg_pool.close_pool()
