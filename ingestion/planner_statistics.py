"""The planner's statistics of the tables an import fills, gathered as soon as an import
outgrows them.

Autovacuum analyses a table once a tenth of it has changed, but only on its next round
(a minute apart by default). Until then a table that an import is filling has no
statistics, or those of a fraction of its size, and every estimate is a default guess:
- on such listings the undated de-duplication lookup was planned on an index that read
  every active listing for each draft: 687 ms for a batch of 128 where the normalised-title
  index took 1.3 ms, three quarters of a poll
  (docs/decisions/undated-drafts-dedup-on-a-normalised-title.md);
- on such source records a search's hydration, a prepared statement, kept a generic plan
  that read each result's provenance by a sequential scan of the records: 14 ms a call
  against 0.78 ms by their listing index, for as long as the statistics stayed stale
  (docs/reliability.md, "the bench's listings had no source records").
So a poll that added listings checks, in one catalog query, whether the listings or their
records have more than doubled since they were last analysed (or never were), and if so
analyses those: what Postgres' own documentation asks of a bulk load, and what makes the
cached plans that read them be made again. Past the first import that is rare, and
analysing is a sample of at most 30,000 rows whatever the size.
"""

from django.db import connection

# Every new listing comes with a record, so one count of what was added serves both.
TABLES = ("ingestion_listing", "ingestion_sourcerecord")
# Changes since the last analysis below which the statistics are left to autovacuum.
MIN_CHANGED = 100

_OUTGROWN = """
SELECT c.oid::regclass::text
FROM pg_class c JOIN pg_stat_user_tables s ON s.relid = c.oid
WHERE c.oid = ANY(%(tables)s::regclass[])
  AND (c.reltuples < 0 OR s.n_mod_since_analyze + %(added)s > greatest(%(least)s, c.reltuples))
ORDER BY 1
"""


def analyse_if_outgrown(added: int) -> None:
    """Analyse the listings and their records where they outgrew their statistics.
    `added`: the listings (and so records) the caller has just committed, which the
    cumulative statistics may not count yet (a backend reports its changes up to a second
    after its commit). Another analysis of them under way (autovacuum's, another worker's)
    is not waited for."""
    with connection.cursor() as cursor:
        cursor.execute(_OUTGROWN, {"tables": list(TABLES), "added": added, "least": MIN_CHANGED})
        outgrown = [connection.ops.quote_name(table) for (table,) in cursor.fetchall()]
        if outgrown:
            cursor.execute(f"ANALYZE (SKIP_LOCKED) {', '.join(outgrown)}")
