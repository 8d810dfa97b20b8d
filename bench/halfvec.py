"""halfvec against vector for a generation's HNSW index (issue 36): the index's size and
build time, recall@10 against an exact scan, and the nearest-10 statement's latency, on a
database `bench/search.py` built (same vectors, same `m` and `ef_construction`, the same
`ef_search`). An index of the other type than the generation's own is built beside it,
timed, and dropped at the end.

    .venv/bin/python bench/halfvec.py --listings 1000000 --data-dir /tmp/bench1m \
        [--ef-search 80,200,400]
"""

import argparse
import statistics
import sys
import time
from pathlib import Path

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import SHARED_DATA, percentile, running
from listings import records
from search import queries

NEAREST = (
    "SELECT listing_id FROM ingestion_listing_embedding WHERE generation_id = {generation}"
    " ORDER BY embedding::{kind}({dims}) <=> %s::{kind}({dims}) LIMIT 10"
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--listings", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=50)
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument(
        "--ef-search", help="values to measure at, comma-separated (else the setting's)"
    )
    args = parser.parse_args()
    with running(args.data_dir):
        from django.conf import settings

        from ingestion import generations
        from ingestion.embedding import DIMENSIONS, get_embedder
        from retrieval.pg.pool import conninfo
        from retrieval.pg.vector import vector_text

        generation = generations.active_generation()
        if generation is None:
            sys.exit("no active generation: build the database with bench/search.py first")
        data_dir = SHARED_DATA if SHARED_DATA.exists() else None
        qs = queries(args.queries, records(2000, data_dir))
        embedder = get_embedder()
        vectors = {q: vector_text(embedder.embed_query(q)) for q in set(qs)}
        own = generation.vector_type
        other = "vector" if own == "halfvec" else "halfvec"
        beside = f"listing_embedding_hnsw_{other}_g{generation.pk}"
        names = {own: generations.hnsw_index_name(generation), other: beside}
        with psycopg.connect(conninfo(), autocommit=True) as conn:
            conn.execute("SET maintenance_work_mem = '3GB'")
            conn.execute("SET max_parallel_maintenance_workers = 1")
            started = time.perf_counter()
            conn.execute(
                f"CREATE INDEX IF NOT EXISTS {beside} ON ingestion_listing_embedding"
                f" USING hnsw ((embedding::{other}({DIMENSIONS})) {other}_cosine_ops)"
                f" WITH (m = {settings.SEARCH_HNSW_M},"
                f" ef_construction = {settings.SEARCH_HNSW_EF_CONSTRUCTION})"
                f" WHERE generation_id = {generation.pk}"
            )
            built_s = time.perf_counter() - started
            try:
                sizes = {
                    name: conn.execute("SELECT pg_relation_size(%s::regclass)", [name]).fetchone()
                    for name in names.values()
                }
                exact = {q: _exact(conn, generation.pk, DIMENSIONS, vectors[q]) for q in set(qs)}
                efs = [int(ef) for ef in (args.ef_search or "").split(",") if ef] or [
                    settings.SEARCH_HNSW_EF_SEARCH
                ]
                found = {
                    ef: _nearest(conn, generation.pk, DIMENSIONS, qs, vectors, exact, ef)
                    for ef in efs
                }
            finally:
                conn.execute(f"DROP INDEX IF EXISTS {beside}")
        print(f"{args.listings} listings, {len(qs)} queries")
        print(f"{other} index built beside the generation's {own} one in {built_s:.0f} s")
        for kind, name in names.items():
            (size,) = sizes[name] or (0,)
            print(f"{kind:8s} index {size / 2**20:8.1f} MB")
        for ef, (recall, latency) in found.items():
            for kind in names:
                print(
                    f"ef_search {ef:4d} {kind:8s} recall@10 {statistics.mean(recall[kind]):.3f}"
                    f"  latency p50 {percentile(latency[kind], 0.5):6.2f}"
                    f" p99 {percentile(latency[kind], 0.99):6.2f} ms"
                )


def _nearest(
    conn: "psycopg.Connection[tuple[int]]",
    generation: int,
    dims: int,
    qs: list[str],
    vectors: dict[str, str],
    exact: dict[str, set[int]],
    ef_search: int,
) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Each type's recall@10 and latency per query at `ef_search`, the two alternated per
    query, so a drift of the machine weighs on both alike."""
    conn.execute(f"SET hnsw.ef_search = {ef_search}")
    recall: dict[str, list[float]] = {"vector": [], "halfvec": []}
    latency: dict[str, list[float]] = {"vector": [], "halfvec": []}
    for number, q in enumerate(qs):
        for kind in ("vector", "halfvec") if number % 2 else ("halfvec", "vector"):
            statement = NEAREST.format(generation=generation, kind=kind, dims=dims)
            began = time.perf_counter()
            found = {row[0] for row in conn.execute(statement, [vectors[q]])}
            latency[kind].append((time.perf_counter() - began) * 1000)
            recall[kind].append(len(found & exact[q]) / len(exact[q]))
    return recall, latency


def _exact(
    conn: "psycopg.Connection[tuple[int]]", generation: int, dims: int, vector: str
) -> set[int]:
    """The true nearest 10: every row of the generation, no index."""
    with conn.transaction():
        conn.execute("SET LOCAL enable_indexscan = off")
        rows = conn.execute(
            NEAREST.format(generation=generation, kind="vector", dims=dims), [vector]
        ).fetchall()
    return {row[0] for row in rows}


if __name__ == "__main__":
    main()
