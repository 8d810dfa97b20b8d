"""Vector retrieval in Postgres: pgvector HNSW over one generation.

Invariants: never returns rows of a generation other than the one passed in, nor a listing
that cannot be shown: withdrawn listings have no embeddings (a trigger deletes them as the
listing is withdrawn, ingestion/migrations/0003), and the index scan reads on past the rows
it finds deleted (pgvector's iterative scan), so they never take a result slot.

statement_timeout cannot cut an HNSW scan short (pgvector runs the whole graph search in
its first fetch), so the cost of one search is bounded by `hnsw.ef_search` instead; the
timeout still stops lock waits, and the awaiting task's cancellation is sent to the server.
"""

from functools import cache

import numpy as np
import numpy.typing as npt
from django.conf import settings

from retrieval.deadline import Deadline
from retrieval.filters import DEFAULT_SHAPE, Shape, conditions, needs_listing, parameters, shape
from retrieval.pg import VECTOR_TAG, fetch_with_local_settings
from retrieval.types import DEFAULT_FILTERS, Candidate, SearchFilters

# The generation and the dimension are inlined as literals: only then can the planner match
# the generation's partial HNSW index (`WHERE generation_id = G` on `embedding::vector(N)`).
# The query vector appears once, ordered by its output column: its text is the largest part
# of the message, and the server parses every copy of it.
_SEARCH = """
SELECT listing_id, embedding::vector({dims}) <=> %(embedding)s::vector({dims}) AS distance
FROM ingestion_listing_embedding e
WHERE generation_id = {generation}{filters}
ORDER BY distance
LIMIT %(limit)s
"""
# A filter on more of the listing than its dates (venue, kind, a start before some time)
# joins the listings: the index scan reads on, in distance order, until `limit` rows pass
# the filter or it has read _FILTERED_SCAN_TUPLES (pgvector's iterative scan). A filter
# that few listings pass finds fewer than `limit` that way (a 1 % filter needs some 100
# neighbours read per row kept); those are exactly the filters whose listings are few
# enough to rank all of them, on the listings' own indexes, by exact distance.
_FILTERED = """
WITH q AS MATERIALIZED (SELECT %(embedding)s::vector({dims}) AS v),
near AS MATERIALIZED (
    SELECT e.listing_id, e.embedding::vector({dims}) <=> (SELECT v FROM q) AS distance
    FROM ingestion_listing_embedding e{join}
    WHERE e.generation_id = {generation}{near_filters}
    ORDER BY distance
    LIMIT %(limit)s
),
exact AS (
    -- OFFSET 0 keeps the sort above the filtered rows: never the HNSW index again.
    SELECT listing_id, distance FROM (
        SELECT e.listing_id, e.embedding::vector({dims}) <=> (SELECT v FROM q) AS distance
        FROM ingestion_listing l JOIN ingestion_listing_embedding e
          ON e.listing_id = l.id AND e.generation_id = {generation}
        WHERE (SELECT count(*) FROM near) < %(limit)s
          AND l.status = 'active'{filters}
        OFFSET 0) AS filtered
    ORDER BY distance
    LIMIT %(limit)s
)
SELECT listing_id, distance FROM near WHERE (SELECT count(*) FROM near) >= %(limit)s
UNION ALL
SELECT listing_id, distance FROM exact
ORDER BY distance
"""
# Without an iterative scan, HNSW yields its ef_search nearest and the rows deleted since
# the index last was vacuumed are dropped from them: fewer than `limit` rows although more
# listings exist. Strict order keeps the distances sorted; the tuples it may read on are
# bounded, and so is its time by the statement's timeout.
_MAX_SCAN_TUPLES = 5000
_FILTERED_SCAN_TUPLES = 2000


@cache
def _statement(dims: int, generation: int, of: Shape) -> tuple[str, int]:
    """The statement for a filter shape, and the tuples its index scan may read."""
    if of == DEFAULT_SHAPE:
        return _SEARCH.format(dims=dims, generation=generation, filters=conditions(of, "e")), (
            _MAX_SCAN_TUPLES
        )
    # Dates are on the embeddings too; only venue and kind need the listing itself.
    joined = needs_listing(of)
    statement = _FILTERED.format(
        dims=dims,
        generation=generation,
        join=" JOIN ingestion_listing l ON l.id = e.listing_id" if joined else "",
        near_filters=conditions(of, "l" if joined else "e"),
        filters=conditions(of),
    )
    return statement, _FILTERED_SCAN_TUPLES


@cache
def _text_format(dimensions: int) -> str:
    return "[" + ",".join(["%.9g"] * dimensions) + "]"


def vector_text(embedding: npt.NDArray[np.float32]) -> str:
    """The query vector as pgvector's text input. Nine significant digits give back every
    float32 exactly, in 61 µs for 384 dimensions against 184 µs for pgvector's `to_text`
    (shortest repr of each value as a double), and in a third less text."""
    return _text_format(embedding.shape[0]) % tuple(embedding.tolist())


class PgVectorIndex:
    async def search(
        self,
        embedding: npt.NDArray[np.float32],
        generation: int,
        limit: int,
        deadline: Deadline,
        filters: SearchFilters = DEFAULT_FILTERS,
    ) -> list[Candidate]:
        statement, scan_tuples = _statement(
            int(embedding.shape[0]), int(generation), shape(filters)
        )
        rows = await fetch_with_local_settings(
            VECTOR_TAG,
            statement,
            {"embedding": vector_text(embedding), "limit": limit, **parameters(filters)},
            deadline,
            local={
                "hnsw.ef_search": str(settings.SEARCH_HNSW_EF_SEARCH),
                "hnsw.iterative_scan": "strict_order",
                "hnsw.max_scan_tuples": str(scan_tuples),
                # Workers for the exact branch cost ~25 ms to start, even when its
                # one-time filter then leaves them nothing to do.
                "max_parallel_workers_per_gather": "0",
            },
        )
        # Cosine distance to a similarity, so higher is better like every other score.
        return [Candidate(int(row[0]), 1.0 - float(row[1])) for row in rows]
