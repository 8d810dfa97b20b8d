"""The embedding claim's statements (ingestion/indexing.py runs them): the claims of the
pending (listing, generation) pairs, the written listings' and a generation's backfill, and
their parameters; the recheck of claimed pairs; the upsert of their vectors, for the
listings still storable; and the settling of the candidates that want nothing more."""

from ingestion.embedding import DIMENSIONS, MODEL_NAME
from ingestion.pending import LIVE_GENERATIONS, pending_from

# A claim tries the advisory lock of each pending pair row by row in the claim's order,
# until the limit is reached: no more locks are taken than pairs claimed (a listing in two
# generations is locked twice, which its own claim may), and only the claimed listings'
# rows are read. The lock is taken in the select list of a subquery fenced by `OFFSET 0`:
# as a condition the planner pushed it below the ordering, where a plan that sorts took
# a lock for every pending pair (50,000 in a test: "out of shared memory"). Listing ids
# past the lock's int key wrap; two listings sharing a key only ever make a claim pass
# over one of them. Tagged at its start: pg_stat_activity keeps only a statement's first
# 1,024 bytes.
CLAIM_TAG = "searchsite:embedding-claim"
CLAIM_LOCK_SPACE = 7402  # the first key of the advisory locks (7401: ingestion/dedup.py)
_CLAIMED_GENERATIONS = (
    f"{LIVE_GENERATIONS} AND g.embedding_model = %(model)s AND g.dimensions = %(dimensions)s"
)


def _claim_sql(pending: str) -> str:
    """A claim of the pairs `pending` (a query of `id`, `generation_id` and `state`) finds,
    in its order."""
    return f"""/* {CLAIM_TAG} */
        SELECT l.id, t.generation_id, t.state, l.content_version, l.title, l.venue, l.aliases,
               l.description, l.fetched_kind,
               extract(epoch FROM clock_timestamp() - l.fetched_at)
        FROM (SELECT q.id, q.generation_id, q.state
              FROM (SELECT p.id, p.generation_id, p.state,
                           pg_try_advisory_xact_lock(
                               %(lock_space)s, mod(p.id, 2147483647)::int) AS locked
                    FROM ({pending}) AS p OFFSET 0) AS q
              WHERE q.locked
              LIMIT %(take)s) AS t
        JOIN ingestion_listing l ON l.id = t.id
        WHERE l.status = 'active'
    """  # noqa: S608  (constant text: the values are parameters)


# Listings written (a few while a feed runs): every pending pair of theirs, found in a CTE
# of its own, materialised, so that the ordering sees them all; the active generation's
# first, the newest fetched first.
CLAIM_SQL = _claim_sql(f"""
    WITH pending AS MATERIALIZED (
        SELECT l.id, g.id AS generation_id, g.state, g.state = 'active' AS active, l.fetched_at
        {pending_from(_CLAIMED_GENERATIONS, candidates="c.backfill_generation_id IS NULL")}
        ORDER BY active DESC, l.fetched_at DESC NULLS LAST, l.id
    )
    SELECT id, generation_id, state FROM pending
""")  # noqa: S608  (constant text)
# A generation's backfill (every listing of its audience), claimed once the others are
# done: a window of its candidates in key order, newest listing first, whatever the
# planner makes of the rest. Sorting all of them for each claim took 370 ms at 100,000.
# The window is wider than a claim: the other lane's claim holds the first of them.
BACKFILL_WINDOW = 8
_BACKFILL_ROWS = """(
    SELECT * FROM ingestion_embedding_candidate WHERE backfill_generation_id IS NOT NULL
    ORDER BY listing_id DESC LIMIT %(window)s
)"""
BACKFILL_CLAIM_SQL = _claim_sql(f"""
    SELECT l.id, g.id AS generation_id, g.state
    {pending_from(_CLAIMED_GENERATIONS, rows=_BACKFILL_ROWS)}
    ORDER BY c.listing_id DESC
""")


def claim_params(size: int, take: int | None = None) -> dict[str, str | int]:
    """The values of either claim statement for a sweep's claims of `size`, taking `take`
    (all `size` unless the written listings' claim took some)."""
    return {
        "model": MODEL_NAME,
        "dimensions": DIMENSIONS,
        "lock_space": CLAIM_LOCK_SPACE,
        "take": size if take is None else take,
        "window": BACKFILL_WINDOW * size,
    }


STILL_PENDING = """
    SELECT c.listing_id, c.generation_id
    FROM unnest(%s::bigint[], %s::bigint[], %s::int[]) AS c(listing_id, generation_id, version)
    WHERE NOT EXISTS (SELECT 1 FROM ingestion_listing_embedding e
                      WHERE e.listing_id = c.listing_id AND e.generation_id = c.generation_id
                        AND e.content_version >= c.version)
"""


# The candidates with no pending pair in any live generation (of any model: another
# worker's are not this one's to drop), deleted if their mark is still the one read. A
# change committed after this statement's snapshot re-marked its candidate, so the `seq`
# no longer matches (the recheck of a row locked meanwhile sees the new one); a candidate
# another transaction holds is skipped, not waited for: that one is marking it again, or
# settling it itself. Nothing waits here, so nothing can deadlock on it.
def _settle_sql(which: str) -> str:
    unwanted = pending_from(LIVE_GENERATIONS, candidates="c.listing_id = k.listing_id")
    return f"""
        WITH settled AS MATERIALIZED (
            SELECT k.listing_id, k.seq FROM ingestion_embedding_candidate k
            WHERE {which} AND NOT EXISTS (SELECT 1 {unwanted})
        )
        DELETE FROM ingestion_embedding_candidate c
        WHERE c.listing_id IN (
            SELECT k.listing_id FROM ingestion_embedding_candidate k
            JOIN settled s ON s.listing_id = k.listing_id AND s.seq = k.seq
            FOR UPDATE OF k SKIP LOCKED
        )
    """  # noqa: S608  (constant text)


SETTLE_STORED = _settle_sql("k.listing_id = ANY(%s)")  # after a claim is stored
SETTLE_ALL = _settle_sql("TRUE")  # when nothing is left: withdrawn and deleted listings'

UPSERT = """
    INSERT INTO ingestion_listing_embedding
        (listing_id, generation_id, embedding, content_version, embedded_at, text_digest)
    VALUES (%s, %s, %s::vector, %s, %s, %s)
    ON CONFLICT (listing_id, generation_id) DO UPDATE
        SET embedding = EXCLUDED.embedding,
            content_version = EXCLUDED.content_version,
            embedded_at = EXCLUDED.embedded_at,
            text_digest = EXCLUDED.text_digest
        WHERE ingestion_listing_embedding.content_version < EXCLUDED.content_version
"""
# The claimed listings a claim's vectors may be stored for: still active, and held against
# withdrawal until the commit. One a poll is changing now is passed over rather than
# waited for: its vector would be out of date at once, and it is pending again.
STORABLE = """
    SELECT id FROM ingestion_listing
    WHERE id = ANY(%s) AND status = 'active'
    FOR SHARE SKIP LOCKED
"""
# Vectors already made, in a claim's generations, from the texts it claims (by digest):
# one each, whichever listing it was made for.
REUSABLE = """
    SELECT DISTINCT ON (e.generation_id, e.text_digest)
           e.generation_id, e.text_digest, e.embedding::text
    FROM unnest(%s::bigint[], %s::bytea[]) AS wanted(generation_id, text_digest)
    JOIN ingestion_listing_embedding e
      ON e.generation_id = wanted.generation_id AND e.text_digest = wanted.text_digest
"""
