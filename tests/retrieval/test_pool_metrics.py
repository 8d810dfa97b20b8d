"""Ops can see searches wait for a database connection (retrieval/pg/pool.py): every wait is
timed and every wait that ran out of time counted, so a load run can set pool waits beside
in-flight searches (bench/load.py), and a search pool too small for the traffic shows."""

import pytest
from prometheus_client import REGISTRY
from psycopg_pool import PoolTimeout
from pytest_django.fixtures import Settings

from retrieval.pg import pool as pg_pool

pytestmark = pytest.mark.django_db(transaction=True)


def _sample(name: str) -> float:
    return REGISTRY.get_sample_value(name) or 0.0


async def test_waits_for_a_connection_are_timed_and_timeouts_counted(settings: Settings) -> None:
    settings.SEARCH_POOL_SIZE = 1
    waits, timeouts = (
        _sample("retrieval_pool_wait_seconds_count"),
        _sample("retrieval_pool_timeouts_total"),
    )
    try:
        async with pg_pool.connection(1.0):
            assert _sample("retrieval_pool_wait_seconds_count") == waits + 1
            with pytest.raises(PoolTimeout):  # the pool's one connection is taken
                async with pg_pool.connection(0.02):
                    pass
            assert _sample("retrieval_pool_timeouts_total") == timeouts + 1

        async with pg_pool.connection(1.0):  # given back: the next wait is timed too
            assert _sample("retrieval_pool_wait_seconds_count") == waits + 2
    finally:
        await pg_pool.close_pool()
