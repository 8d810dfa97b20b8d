"""Our hybrid search against LanceDB's, the peer issue 4 names, side by side in one run.

    .venv/bin/pip install lancedb==0.40.0      # not a project dependency: this bench only
    .venv/bin/python bench/peer_lancedb.py --data-dir /tmp/bench100k

Both search the same 100,000 listings (the database `bench/search.py --data-dir` built,
copied once into a LanceDB table beside it) with the same 200 queries and the same
precomputed query embeddings, top 10 by reciprocal rank fusion of a full-text and a
vector branch. LanceDB runs in this process: its native full-text index over title, venue
and description, an IVF_HNSW_SQ cosine index on the vectors, `query_type="hybrid"`.
Blocks and rounds as in bench/search.py: one round warms, two are kept, in opposite orders.
"""

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import SHARED_DATA, rounds, running
from listings import records
from search import Embeddings, FixedEmbedder, ms, queries


def lance_table(directory: Path, generation: int) -> Any:  # lancedb: no dependency, no types
    """The listings as a LanceDB table with both indexes, built on the first run."""
    import lancedb
    import numpy as np
    import pyarrow as pa
    from django.db import connection
    from lancedb.index import HnswSq

    db = lancedb.connect(str(directory))
    if "listings" in db.table_names():
        return db.open_table("listings")
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT l.id, l.title || ' ' || l.venue || ' ' || l.description, e.embedding::text"
            " FROM ingestion_listing l JOIN ingestion_listing_embedding e"
            " ON e.listing_id = l.id AND e.generation_id = %s WHERE l.status = 'active'",
            [generation],
        )
        rows = cursor.fetchall()
    vectors = np.array([np.array(v[1:-1].split(","), dtype=np.float32) for _, _, v in rows])
    data = pa.table(
        {
            "id": pa.array([r[0] for r in rows], pa.int64()),
            "text": pa.array([r[1] for r in rows], pa.string()),
            "vector": pa.FixedSizeListArray.from_arrays(
                pa.array(vectors.ravel(), pa.float32()), vectors.shape[1]
            ),
        }
    )
    table = db.create_table("listings", data)
    table.create_fts_index("text")
    table.create_index("vector", config=HnswSq(distance_type="cosine"))
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, required=True)
    args = parser.parse_args()
    with running(args.data_dir):
        import uvloop
        from django.db import connection

        from ingestion import generations
        from ingestion.embedding import DIMENSIONS, MODEL_NAME, get_embedder

        generation = generations.ensure_active_generation(MODEL_NAME, DIMENSIONS)
        started = time.perf_counter()
        table = lance_table(args.data_dir / "lance", generation.pk)
        print(f"LanceDB table ready in {time.perf_counter() - started:.0f} s")
        qs = queries(200, records(2000, SHARED_DATA if SHARED_DATA.exists() else None))
        embedder = get_embedder()
        embeddings = {q: embedder.embed_query(q) for q in set(qs)}
        connection.close()
        ours, theirs = uvloop.run(measure(qs, embeddings, table))
    print(f"ours (hybrid_search)      {ms(ours)}")
    print(f"LanceDB 0.40 hybrid       {ms(theirs)}")
    print(f"ratio of p50s             {statistics.median(ours) / statistics.median(theirs):.2f}")


async def measure(
    qs: list[str], embeddings: Embeddings, table: Any
) -> tuple[list[float], list[float]]:
    import dataclasses

    from retrieval.bounds.deadline import SearchDeadline
    from retrieval.hybrid import hybrid_search
    from retrieval.pg.pool import close_pools
    from retrieval.query.parse import parse_query
    from retrieval.service import budget_policy, dependencies

    deps = dataclasses.replace(dependencies(), embedder=FixedEmbedder(embeddings))
    policy = budget_policy()
    figures: dict[str, list[float]] = {"ours": [], "theirs": []}

    async def ours(q: str) -> float:
        started = time.perf_counter()
        await hybrid_search(parse_query(q, "10"), SearchDeadline.planned(policy), deps)
        return (time.perf_counter() - started) * 1000

    async def theirs(q: str) -> float:
        started = time.perf_counter()
        # Ids only, as our search returns: hydrating the listings is a later step for both.
        hybrid = table.search(query_type="hybrid")
        hybrid.vector(embeddings[q]).text(q).select(["id"]).limit(10).to_list()
        return (time.perf_counter() - started) * 1000

    try:
        for (name, block), keep in rounds([("ours", ours), ("theirs", theirs)]):
            for q in qs:
                elapsed = await block(q)
                if keep:
                    figures[name].append(elapsed)
    finally:
        await close_pools()
    return figures["ours"], figures["theirs"]


if __name__ == "__main__":
    main()
