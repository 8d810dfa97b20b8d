"""Which (listing, generation) pairs still want an embedding: an active listing of the
generation's audience with no vector of its current content version there. One definition
for the embedding claim (ingestion/indexing.py), the lag (ingestion/embedding_lag.py) and
the progress of an import (evaluation/importing.py).

Written per generation (a LATERAL subquery under each generation row) so that the
generation's id is a constant inside it: the anti-join then merges the two covering
indexes of migration 0011 in id order, one pass over each. The join written flat (listings
x generations, then the embeddings on both ids) was planned as one index probe per
listing with the generation left to a filter, a skip scan each time: at 100,000 listings
601,699 buffers and 150 ms on three processes (the query's own and two parallel workers)
for every claim and every lag read, against 3,120 buffers on one (docs/reliability.md,
session 13)."""

# FROM-clause items: `g`, each generation, and `l`, its pending listings (id, fetched_at).
_PENDING = """
    ingestion_indexgeneration g
    CROSS JOIN LATERAL (
        SELECT l.id, l.fetched_at FROM ingestion_listing l
        WHERE l.status = 'active' AND l.audience = g.audience
          AND NOT EXISTS (SELECT 1 FROM ingestion_listing_embedding e
                          WHERE e.generation_id = g.id AND e.listing_id = l.id
                            AND e.content_version >= l.content_version)
    ) AS l
"""


def pending_from(generations: str) -> str:
    """`FROM ... WHERE generations`: the pending pairs (`g`, `l`) of the generations the
    condition `generations` (on `g`) keeps."""
    return f"FROM {_PENDING} WHERE {generations}"
