"""Where a filtered vector search should rank exactly and where it should read the HNSW
graph on: both ways forced, side by side, at date windows passing each share of the
listings, on a database `bench/search.py` built. Each pass's p50 and p95, its recall@10
against an exact ranking of what the window passes, and the bound the statement chooses
by (retrieval/pg/vector.py) for the stage's limit.

    .venv/bin/python bench/filtered_vector.py --listings 1000000 --data-dir /tmp/bench1m \\
        [--shares 0.01,0.02,0.03,0.05] [--queries 50] [--rounds 2]
"""

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import SHARED_DATA, percentile, running
from listings import records
from search import filtered_vector, queries


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--listings", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--shares", default="0.01,0.02,0.03,0.05")
    parser.add_argument("--data-dir", type=Path, required=True)
    args = parser.parse_args()
    shares = tuple(float(share) for share in args.shares.split(","))
    with running(args.data_dir):
        import uvloop
        from django.db import connection

        import retrieval.pg.vector as stage
        from ingestion import generations
        from ingestion.embedding import DIMENSIONS, MODEL_NAME, get_embedder
        from retrieval.hybrid import CANDIDATES_PER_RESULT
        from retrieval.pg.pool import close_pools

        generation = generations.ensure_active_generation(MODEL_NAME, DIMENSIONS).pk
        limit = 10 * CANDIDATES_PER_RESULT  # what a search of 10 results asks for
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT reltuples FROM pg_class WHERE oid = to_regclass(%s)",
                [generations.hnsw_index_name(generation)],
            )
            vectors = cursor.fetchone()[0]
        bound = max(stage.EXACT_MIN, (stage.GRAPH_COST * limit * vectors) ** 0.5)
        print(
            f"{vectors:,.0f} vectors, limit {limit}: ranked exactly below {bound:,.0f} passing"
            f" ({bound / vectors:.2%})"
        )
        base = records(2000, SHARED_DATA if SHARED_DATA.exists() else None)
        qs = queries(args.queries, base)
        embedder = get_embedder()
        embeddings = {q: embedder.embed_query(q) for q in set(qs)}
        connection.close()
        # The two ways forced: every filter counted as few, or none.
        ways = {"exact": (10**12, 0), "graph": (0, 0)}

        async def run() -> None:
            try:
                stage.EXACT_MIN, stage.GRAPH_COST = ways["graph"]
                await filtered_vector(qs[:10], embeddings, generation, limit, shares)  # warming
                for n in range(args.rounds):
                    for way, (least, cost) in ways.items():
                        stage.EXACT_MIN, stage.GRAPH_COST = least, cost
                        stage._statement.cache_clear()
                        figures = await filtered_vector(qs, embeddings, generation, limit, shares)
                        for f in figures:
                            print(
                                f"round {n + 1} {way:5s} {f['share']:6.2%} passing:"
                                f" p50 {statistics.median(f['latency']):7.2f}"
                                f" p95 {percentile(f['latency'], 0.95):7.2f} ms,"
                                f" recall@10 {f['recall']:.3f}, {f['missed']} over a second",
                                flush=True,
                            )
            finally:
                await close_pools()

        uvloop.run(run())


if __name__ == "__main__":
    main()
