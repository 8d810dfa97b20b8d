"""Which (listing, generation) pairs still want an embedding: an active listing of the
generation's audience with no vector of its current content version there. One definition
for the embedding claim (ingestion/embedding_claim.py), the lag
(ingestion/embedding_lag.py) and the progress of an import (evaluation/importing.py).

Only the embedding candidates are looked at (`EmbeddingCandidate`, kept by triggers): the
listings that may want a vector, a handful while a feed runs, against every listing when
the pairs were found from the listings themselves (32 ms of Postgres for each claim and
lag read at 100,000 listings, docs/reliability.md). Each candidate is looked up on its own
(the `OFFSET 0` keeps the subquery from being flattened into the join): its listing by
primary key, its vector by one probe of the covering index (migration 0011). The table's
rows come and go all day, so its statistics are stale more often than not; planned on
them, a settled table of 1 row looked like 50,000 and the join read both tables whole
(6,272 buffers, in tests/ingestion/test_pending_work_plans.py). A generation's backfill marks are
checked in that generation alone (migrations/0013), so the lag and the other generations'
claims pass over a build's candidates without a probe."""

# FROM-clause items: `g`, each generation, `c`, the candidates (or `{rows}` of them), and
# `l`, the generation's pending listings (id, fetched_at).
_PENDING = """
    ingestion_indexgeneration g
    CROSS JOIN {rows} c
    CROSS JOIN LATERAL (
        SELECT l.id, l.fetched_at FROM ingestion_listing l
        WHERE l.id = c.listing_id AND l.status = 'active' AND l.audience = g.audience
          AND NOT EXISTS (SELECT 1 FROM ingestion_listing_embedding e
                          WHERE e.generation_id = g.id AND e.listing_id = l.id
                            AND e.content_version >= l.content_version)
        OFFSET 0
    ) AS l
"""

LIVE_GENERATIONS = "g.state IN ('active', 'building', 'ready')"
# A generation's backfill mark is of a listing that may want a vector there and nowhere
# else (migrations/0013): other generations pass over it without a probe.
_OWN_GENERATION = "(c.backfill_generation_id IS NULL OR c.backfill_generation_id = g.id)"


def pending_from(
    generations: str, *, candidates: str = "TRUE", rows: str = "ingestion_embedding_candidate"
) -> str:
    """`FROM ... WHERE generations AND candidates`: the pending pairs (`g`, `l`) of the
    generations the condition `generations` (on `g`) keeps, among the candidates (`c`)
    the condition `candidates` keeps (one listing's key, say, found through its index
    rather than by probing every candidate); `rows`, a subquery of the candidates' rows,
    narrows them first."""
    pending = _PENDING.format(rows=rows)
    return f"FROM {pending} WHERE {generations} AND {candidates} AND {_OWN_GENERATION}"
