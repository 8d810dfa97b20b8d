"""Finding the listings still to embed never reads the embeddings' rows.

The rows are mostly their vector (469 MB at 100,000 listings). Reading them whole for the
embedding lag, which every /metrics scrape and /healthz asks for, and for every claim of
the embedding worker took 250 ms on three processes each time and turned a load bench's
scrapes into the largest load on the machine (docs/reliability.md). Each statement must
find the pending pairs in the covering index (migration 0011) instead."""

import json
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connection, transaction

from ingestion.embedding import DIMENSIONS, MODEL_NAME
from ingestion.embedding_lag import PENDING_SQL
from ingestion.indexing import CLAIM_LOCK_SPACE, CLAIM_SQL
from tests.search_fixtures import index_listings

pytestmark = pytest.mark.django_db
EMBEDDINGS = "ingestion_listing_embedding"


def _nodes(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield plan
    for child in plan.get("Plans", []):
        yield from _nodes(child)


def _scans_of(table: str, statement: str, params: list[str | int]) -> list[str]:
    """How the plan of `statement` reads `table`: one node type per scan of it."""
    with transaction.atomic(), connection.cursor() as cursor:
        # The test's tables are a few rows: left to itself the planner reads them whole
        # whatever indexes there are. With sequential scans priced out, the plan shows
        # which index can answer, and whether it can answer without the table's rows.
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute(f"EXPLAIN (FORMAT JSON) {statement}", params)
        (document,) = cursor.fetchone()
    (top,) = json.loads(document) if isinstance(document, str) else document
    return [node["Node Type"] for node in _nodes(top["Plan"]) if node.get("Relation Name") == table]


def test_the_embedding_lag_reads_only_the_covering_index() -> None:
    index_listings()
    assert _scans_of(EMBEDDINGS, PENDING_SQL, []) == ["Index Only Scan"]


def test_a_claim_reads_only_the_covering_index() -> None:
    index_listings()
    params: list[str | int] = [MODEL_NAME, DIMENSIONS, CLAIM_LOCK_SPACE, 128]
    assert _scans_of(EMBEDDINGS, CLAIM_SQL, params) == ["Index Only Scan"]
