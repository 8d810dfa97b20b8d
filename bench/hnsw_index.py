"""A generation's HNSW index against one built beside it over the same vectors (issue 36):
of the other type (`--type`: halfvec against vector), or with other build parameters
(`--m`, `--ef-construction`). Each index's size, the other's build time and memory, and at
each `ef_search` recall@10 against an exact scan and the nearest-10 statement's latency,
the two indexes alternated per query. The other index is dropped at the end.

Recall is counted two ways. The target's: the exact top 10's listings found. And
ann-benchmarks' (its `knn` metric): a listing found counts when its exact distance is
within 0.001 of the exact 10th's, so a listing that ties with a true neighbour within the
precision an index of half floats keeps is not a miss. Beside them, how many listings lie
that near the 10th: the ties a graph search cannot order.

    .venv/bin/python bench/hnsw_index.py --listings 1000000 --data-dir /tmp/b1000000-v2 \
        [--type vector] [--m 32] [--ef-construction 200] [--ef-search 80,200,400]
"""

import argparse
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import SHARED_DATA, percentile, running
from listings import records
from search import queries

NEAREST = (
    "SELECT listing_id FROM ingestion_listing_embedding WHERE generation_id = {generation}"
    " ORDER BY embedding::{kind}({dims}) <=> %s::{kind}({dims}) LIMIT 10"
)
DISTANCES = (
    "SELECT listing_id, embedding::vector({dims}) <=> %s::vector({dims})"
    " FROM ingestion_listing_embedding WHERE generation_id = {generation}"
)
# ann-benchmarks' tolerance (its `knn` metric's epsilon).
TIE = 0.001
# How far down the exact order the ties with the 10th are counted.
EXACT_DEPTH = 200


@dataclass(frozen=True)
class Index:
    name: str
    kind: str
    m: int
    ef_construction: int

    def nearest(self, generation: int, dims: int) -> str:
        return NEAREST.format(generation=generation, kind=self.kind, dims=dims)


@dataclass(frozen=True)
class Exact:
    """A query's true neighbours, nearest first, with their distances."""

    ids: list[int]
    distances: list[float]

    @property
    def top(self) -> set[int]:
        return set(self.ids[:10])

    @property
    def tenth(self) -> float:
        return self.distances[9]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--listings", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=50)
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--type", choices=("halfvec", "vector"), help="else the generation's")
    parser.add_argument("--m", type=int, help="else the setting's")
    parser.add_argument("--ef-construction", type=int, help="else the setting's")
    parser.add_argument(
        "--ef-search", help="values to measure at, comma-separated (else the setting's)"
    )
    args = parser.parse_args()
    with running(args.data_dir):
        from django.conf import settings
        from search_data import timed_index_build

        from ingestion import generations
        from ingestion.embedding import DIMENSIONS, get_embedder
        from retrieval.pg.pool import conninfo
        from retrieval.pg.vector import vector_text

        generation = generations.active_generation()
        if generation is None:
            sys.exit("no active generation: build the database with bench/search.py first")
        own_name = generations.hnsw_index_name(generation)
        own = Index(own_name, generation.vector_type, *_built_with(own_name))
        kind = args.type or own.kind
        m = args.m or own.m
        ef_construction = args.ef_construction or own.ef_construction
        if (kind, m, ef_construction) == (own.kind, own.m, own.ef_construction):
            sys.exit(
                "the index beside must differ from the generation's:"
                " --type, --m or --ef-construction"
            )
        other = Index(
            f"listing_embedding_hnsw_{kind}_m{m}_ef{ef_construction}_g{generation.pk}",
            kind,
            m,
            ef_construction,
        )
        data_dir = SHARED_DATA if SHARED_DATA.exists() else None
        qs = queries(args.queries, records(2000, data_dir))
        embedder = get_embedder()
        vectors = {q: vector_text(embedder.embed_query(q)) for q in set(qs)}
        with psycopg.connect(conninfo(), autocommit=True) as conn:
            built = timed_index_build(
                conn,
                f"CREATE INDEX IF NOT EXISTS {other.name} ON ingestion_listing_embedding"
                f" USING hnsw ((embedding::{kind}({DIMENSIONS})) {kind}_cosine_ops)"
                f" WITH (m = {m}, ef_construction = {ef_construction})"
                f" WHERE generation_id = {generation.pk}",
            )
            try:
                sizes = {
                    index: conn.execute(
                        "SELECT pg_relation_size(%s::regclass)", [index.name]
                    ).fetchone()
                    for index in (own, other)
                }
                exact = {q: _exact(conn, generation.pk, DIMENSIONS, vectors[q]) for q in set(qs)}
                efs = [int(ef) for ef in (args.ef_search or "").split(",") if ef] or [
                    settings.SEARCH_HNSW_EF_SEARCH
                ]
                # A round untimed first: the first reads of either index come from disk.
                _nearest(conn, (own, other), generation.pk, DIMENSIONS, qs, vectors, exact, efs[0])
                found = {
                    ef: _nearest(
                        conn, (own, other), generation.pk, DIMENSIONS, qs, vectors, exact, ef
                    )
                    for ef in efs
                }
            finally:
                conn.execute(f"DROP INDEX IF EXISTS {other.name}")
        print(f"{args.listings} listings, {len(qs)} queries")
        print(
            f"the other index built in {built.seconds:.0f} s, its memory at most"
            f" {built.peak_mb:.0f} MB (maintenance_work_mem {built.maintenance_work_mem},"
            f" {built.parallel_workers} parallel workers)"
        )
        for label, index in (("own", own), ("other", other)):
            (size,) = sizes[index] or (0,)
            print(
                f"{label:5s} {index.kind:8s} m {index.m:3d} ef_construction"
                f" {index.ef_construction:4d}  {size / 2**20:8.1f} MB"
            )
        ties = [
            sum(1 for distance in e.distances if abs(distance - e.tenth) <= TIE)
            for e in exact.values()
        ]
        print(
            f"listings within {TIE} of the exact 10th's distance (itself included):"
            f" median {statistics.median(ties):.0f}, most {max(ties)}"
            f" (of the nearest {EXACT_DEPTH})"
        )
        for ef, by_index in found.items():
            for label, index in (("own", own), ("other", other)):
                strict, tolerant, latency = by_index[index]
                print(
                    f"ef_search {ef:4d} {label:5s} recall@10 {statistics.mean(strict):.3f}"
                    f" (within {TIE}: {statistics.mean(tolerant):.3f})"
                    f"  latency p50 {percentile(latency, 0.5):6.2f}"
                    f" p99 {percentile(latency, 0.99):6.2f} ms"
                )


def _built_with(index: str) -> tuple[int, int]:
    """The `m` and `ef_construction` the index was built with: the settings' may have
    changed since. Read on Django's connection, which looked up the generation."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT reloptions FROM pg_class WHERE oid = %s::regclass", [index])
        options = dict(option.split("=") for option in (cursor.fetchone() or [None])[0] or [])
    return int(options.get("m", 16)), int(options.get("ef_construction", 64))  # pgvector's


def _nearest(
    conn: "psycopg.Connection[tuple[Any, ...]]",
    indexes: tuple[Index, Index],
    generation: int,
    dims: int,
    qs: list[str],
    vectors: dict[str, str],
    exact: dict[str, Exact],
    ef_search: int,
) -> dict[Index, tuple[list[float], list[float], list[float]]]:
    """Each index's recall@10 (strict, and within TIE) and latency per query at
    `ef_search`, the two alternated per query, so a drift of the machine weighs on both
    alike. Each is searched with the other dropped in a transaction rolled back after: two
    indexes over the same expression would leave the choice to the planner."""
    figures: dict[Index, tuple[list[float], list[float], list[float]]] = {
        index: ([], [], []) for index in indexes
    }
    for number, q in enumerate(qs):
        for index in indexes if number % 2 else indexes[::-1]:
            (other,) = set(indexes) - {index}
            with conn.transaction(force_rollback=True):
                conn.execute(f"DROP INDEX {other.name}")
                conn.execute(f"SET LOCAL hnsw.ef_search = {ef_search}")
                began = time.perf_counter()
                found = [
                    row[0] for row in conn.execute(index.nearest(generation, dims), [vectors[q]])
                ]
                took_ms = (time.perf_counter() - began) * 1000
            truth = exact[q]
            distances = _distances(conn, generation, dims, vectors[q], found)
            strict, tolerant, latency = figures[index]
            strict.append(len(set(found) & truth.top) / 10)
            tolerant.append(sum(1 for d in distances if d <= truth.tenth + TIE) / 10)
            latency.append(took_ms)
    return figures


def _exact(
    conn: "psycopg.Connection[tuple[Any, ...]]", generation: int, dims: int, vector: str
) -> Exact:
    """The true nearest EXACT_DEPTH: every row of the generation, no index."""
    statement = (
        DISTANCES.format(generation=generation, dims=dims) + f" ORDER BY 2 LIMIT {EXACT_DEPTH}"
    )
    with conn.transaction():
        conn.execute("SET LOCAL enable_indexscan = off")
        rows = conn.execute(statement, [vector]).fetchall()
    return Exact([row[0] for row in rows], [row[1] for row in rows])


def _distances(
    conn: "psycopg.Connection[tuple[Any, ...]]",
    generation: int,
    dims: int,
    vector: str,
    ids: list[int],
) -> list[float]:
    """The exact distances of the listings an index found."""
    statement = DISTANCES.format(generation=generation, dims=dims) + " AND listing_id = ANY(%s)"
    return [row[1] for row in conn.execute(statement, [vector, ids])]


if __name__ == "__main__":
    main()
