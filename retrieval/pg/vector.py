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

from ingestion.generations import hnsw_index_name
from retrieval.bounds.deadline import Deadline
from retrieval.pg.generation import vector_type
from retrieval.pg.statement import VECTOR_TAG, fetch_with_local_settings
from retrieval.query.filters import (
    DEFAULT_SHAPE,
    Shape,
    conditions,
    needs_listing,
    next_start,
    parameters,
    shape,
)
from retrieval.types import DEFAULT_FILTERS, Candidate, SearchFilters

# The generation, the dimension and the index's vector type are inlined as literals: only
# then can the planner match the generation's partial HNSW index (`WHERE generation_id = G`
# on `embedding::halfvec(N)`, ingestion/generations.py).
# The index orders by its own type's distance; the rows it finds are ranked again, and
# scored, by the full-precision one (a half-precision distance is off by about 1e-4, enough
# to swap near neighbours), which costs `limit` distances more.
# The query vector appears once: its text is the largest part of the message, and the
# server parses every copy of it.
# Among equal distances (listings of the same text) the sooner event first (a series by
# its next date in the window), undated last: ordered again above the index scan, which
# can give distance order alone.
_SEARCH = """
WITH q AS MATERIALIZED (SELECT %(embedding)s::vector({dims}) AS v)
SELECT listing_id, distance FROM (
    SELECT listing_id, {next_start} AS starts_at,
           embedding::vector({dims}) <=> (SELECT v FROM q) AS distance
    FROM ingestion_listing_embedding e
    WHERE generation_id = {generation}{filters}
    ORDER BY embedding::{kind}({dims}) <=> (SELECT v::{kind}({dims}) FROM q)
    LIMIT %(limit)s) AS nearest
ORDER BY distance, starts_at NULLS LAST, listing_id
"""
# A filtered search first counts, up to a bound, the listings that pass (on the
# embeddings' own index of their dates, or the listings' indexes for venue and kind).
# Fewer than that are few enough to rank exactly, by distance, every one of them, read
# again by the same index; more, and the HNSW index scan reads on in distance order
# (pgvector's iterative scan) until `limit` rows pass. Of N vectors, n passing cost about
# n to rank and limit x N / n graph rows to find, each of those GRAPH_COST times a ranked
# row: the two meet at n = sqrt(GRAPH_COST x limit x N), the bound (at least EXACT_MIN).
# N is the planner's count of the generation's HNSW index, kept by (auto)analyze.
_FILTERED = """
WITH q AS MATERIALIZED (SELECT %(embedding)s::vector({dims}) AS v),
bound AS MATERIALIZED (
    -- reltuples is -1 for an index no (auto)analyze has counted yet.
    SELECT greatest({exact_min}, sqrt({graph_cost} * %(limit)s * greatest(0, (
        SELECT reltuples FROM pg_class WHERE oid = to_regclass('{index}')))))::bigint AS n),
-- Counted as they are read: the exact branch reads them again, with their vectors.
few AS MATERIALIZED (
    SELECT count(*) < (SELECT n FROM bound) AS yes
    FROM ({passing} LIMIT (SELECT n FROM bound)) AS passing),
exact AS (
    -- OFFSET 0 keeps the sort above the passing rows: never the HNSW index.
    SELECT listing_id, starts_at, distance FROM ({ranked} AND (SELECT yes FROM few)
        OFFSET 0) AS exactly
    ORDER BY distance
    LIMIT %(limit)s
),
near AS (
    SELECT e.listing_id, {next_start} AS starts_at,
           e.embedding::vector({dims}) <=> (SELECT v FROM q) AS distance
    FROM ingestion_listing_embedding e{join}
    WHERE e.generation_id = {generation}{near_filters} AND NOT (SELECT yes FROM few)
    ORDER BY e.embedding::{kind}({dims}) <=> (SELECT v::{kind}({dims}) FROM q)
    LIMIT %(limit)s
)
SELECT listing_id, distance FROM (
    SELECT listing_id, starts_at, distance FROM exact
    UNION ALL
    SELECT listing_id, starts_at, distance FROM near) AS found
ORDER BY distance, starts_at NULLS LAST, listing_id
"""
# What the exact branch reads of each passing row.
_RANKED = """e.listing_id, {next_start} AS starts_at,
           e.embedding::vector({dims}) <=> (SELECT v FROM q) AS distance"""
_PASSING_BY_DATES = """
    SELECT {columns} FROM ingestion_listing_embedding e
    WHERE e.generation_id = {generation}{window}{filters}"""
# The window as ingestion/migrations/0007 indexes it (undated rows, an unbounded range,
# are left out by `filters`).
_WINDOW = """
      AND tstzrange(least(e.starts_at, e.current_until), greatest(e.starts_at, e.current_until),
                    '[]') && tstzrange({lower}, {upper}, '[)')"""
_PASSING_BY_LISTING = """
    SELECT {columns} FROM ingestion_listing l
    JOIN ingestion_listing_embedding e ON e.listing_id = l.id AND e.generation_id = {generation}
    WHERE l.status = 'active'{filters}"""
# Measured with bench/filtered_vector.py (docs/benchmarks.md): the exact ranking and the
# graph's scan cost the same near 5 % of 100,000 listings with the stage's limit of 50.
GRAPH_COST = 5
EXACT_MIN = 2000
# Without an iterative scan, HNSW yields its ef_search nearest and the rows deleted since
# the index last was vacuumed are dropped from them: fewer than `limit` rows although more
# listings exist. Strict order keeps the distances sorted; the tuples it may read on are
# bounded, and so is its time by the statement's timeout.
_MAX_SCAN_TUPLES = 5000
# A filter that the graph serves passes 1.6 % or more of 1,000,000 listings: an index
# scan finds `limit` (50 for 10 results) of them in about 3,200 rows.
_FILTERED_SCAN_TUPLES = 20_000


@cache
def _statement(dims: int, kind: str, generation: int, of: Shape) -> tuple[str, dict[str, str]]:
    """The statement for a filter shape, and the settings it runs with."""
    local = {
        "hnsw.ef_search": str(settings.SEARCH_HNSW_EF_SEARCH),
        "hnsw.iterative_scan": "strict_order",
        "hnsw.max_scan_tuples": str(_MAX_SCAN_TUPLES),
    }
    if of == DEFAULT_SHAPE:
        return _SEARCH.format(
            dims=dims,
            kind=kind,
            generation=generation,
            filters=conditions(of, "e"),
            next_start=next_start(of, "e"),
        ), local
    joined = needs_listing(of)
    statement = _FILTERED.format(
        dims=dims,
        kind=kind,
        generation=generation,
        passing=passing(generation, of),
        ranked=passing(generation, of, _RANKED.format(next_start=next_start(of, "e"), dims=dims)),
        exact_min=EXACT_MIN,
        graph_cost=GRAPH_COST,
        index=hnsw_index_name(generation),
        join=" JOIN ingestion_listing l ON l.id = e.listing_id" if joined else "",
        near_filters=conditions(of, "l" if joined else "e"),
        next_start=next_start(of, "e"),
    )
    local |= {
        "hnsw.max_scan_tuples": str(_FILTERED_SCAN_TUPLES),
        # Workers for the exact branch cost ~25 ms to start, even when its one-time
        # filter then leaves them nothing to do.
        "max_parallel_workers_per_gather": "0",
    }
    if not joined:
        # A bitmap of the window's rows is built whole before the count's LIMIT applies
        # (50,000 rows for half the listings); an index scan stops at the bound.
        local["enable_bitmapscan"] = "off"
    return statement, local


def passing(generation: int, of: Shape, columns: str = "e.listing_id AS id") -> str:
    """The ids of the listings a filtered search of `generation` ranks: its listings that
    pass the filter (also what the facets count, retrieval/pg/facets.py). Dates are on the
    embeddings too; only venue and kind need the listing itself."""
    if needs_listing(of):
        return _PASSING_BY_LISTING.format(
            columns=columns, generation=generation, filters=conditions(of, "l")
        )
    return _PASSING_BY_DATES.format(
        columns=columns, generation=generation, window=_window(of), filters=conditions(of, "e")
    )


def _window(of: Shape) -> str:
    """The date window as an interval the index can find, when the filter has one."""
    if not (of.ends_after or of.starts_before):
        return ""
    lower = "%(filter_from)s" if of.ends_after else "now()" if of.not_ended else "NULL"
    upper = "%(filter_to)s" if of.starts_before else "NULL"
    return _WINDOW.format(lower=lower, upper=upper)


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
        kind = await vector_type(int(generation), deadline)
        statement, local = _statement(
            int(embedding.shape[0]), kind, int(generation), shape(filters)
        )
        rows = await fetch_with_local_settings(
            VECTOR_TAG,
            statement,
            {"embedding": vector_text(embedding), "limit": limit, **parameters(filters)},
            deadline,
            local=local,
        )
        # Cosine distance to a similarity, so higher is better like every other score.
        return [Candidate(int(row[0]), 1.0 - float(row[1])) for row in rows]
