"""A cold start warms itself before it takes traffic: readiness is 503 until the stack is
warmed up, warm-up reads the search's indexes into memory, and its searches never count
against the vector breaker."""

from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
import pytest
from django.db import connection
from django.test import Client
from pytest_django import Settings

from ingestion import generations
from ingestion.generations import hnsw_index_name
from retrieval import cold_start, service
from tests.conftest import wait_until
from tests.search_fixtures import VECTOR_TABLE, index_listings

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def _forget_warm_up() -> None:
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM retrieval_warm_up")


def test_readiness_is_503_until_the_stack_is_warmed_up_then_200(client: Client) -> None:
    index_listings()
    _forget_warm_up()
    response = client.get("/healthz/ready")
    assert response.status_code == 503
    assert response.json()["failing"] == ["warm_up"]
    assert client.get("/healthz/live").status_code == 200  # alive all the while

    # The unready process warmed the stack itself, in the background.
    wait_until(lambda: client.get("/healthz/ready").status_code == 200, 60, "ready")
    wait_until(lambda: not cold_start.warming_up_in_background(), 30, "the warm-up's end")
    assert cold_start.warmed_up()


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
        warmed = cold_start.warm_up()
    assert set(warmed.modes) == {"lexical_fallback"}  # every vector stage timed out
    service.vector_gate().flush()  # anything recorded is in Redis now
    assert service.vector_breaker().window() == (0, 0)
    assert service.vector_breaker().state() == "closed"
    assert cold_start.warmed_up()


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

    prewarmed = cold_start.prewarm_relations()

    assert list(prewarmed)[-1] == hnsw  # read last: nothing read after it pushes it out
    for relation in (hnsw, lexical):
        assert prewarmed[relation] > 0
        assert _buffered_blocks(relation) == prewarmed[relation]
