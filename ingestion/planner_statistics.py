"""The planner's statistics of the listings, gathered as soon as an import outgrows them.

Autovacuum analyses a table once a tenth of it has changed, but only on its next round
(a minute apart by default). Until then a table that an import is filling has no
statistics, or those of a fraction of its size, and every estimate is a default guess; on
such a table the undated de-duplication lookup was planned on an index that read every
active listing for each draft: 687 ms for a batch of 128 where the normalised-title index
took 1.3 ms, three quarters of a poll
(docs/decisions/undated-drafts-dedup-on-a-normalised-title.md). So a poll that added
listings checks, in one catalog query, whether the listings have more than doubled since
they were last analysed (or never were), and if so analyses them: what Postgres' own
documentation asks of a bulk load. Past the first import that is rare, and analysing is
a sample of at most 30,000 rows whatever the size.
"""

from django.db import connection

# Changes since the last analysis below which the statistics are left to autovacuum.
MIN_CHANGED = 100

_OUTGROWN = """
SELECT c.reltuples < 0 OR s.n_mod_since_analyze + %(added)s > greatest(%(least)s, c.reltuples)
FROM pg_class c JOIN pg_stat_user_tables s ON s.relid = c.oid
WHERE c.oid = 'ingestion_listing'::regclass
"""


def analyse_listings_if_outgrown(added: int) -> None:
    """Analyse the listings if they outgrew their statistics. `added`:
    the listings the caller has just committed, which the cumulative statistics may not
    count yet (a backend reports its changes up to a second after its commit). Another
    analysis of them under way (autovacuum's, another worker's) is not waited for."""
    with connection.cursor() as cursor:
        cursor.execute(_OUTGROWN, {"added": added, "least": MIN_CHANGED})
        row = cursor.fetchone()
        if row and row[0]:
            cursor.execute("ANALYZE (SKIP_LOCKED) ingestion_listing")
