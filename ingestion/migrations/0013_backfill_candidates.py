"""A generation's own candidates apart from the rest (`EmbeddingCandidate.backfill_generation`).

A generation created marks every active listing of its audience a candidate. Each claim
then found all the pending pairs, sorted them and took 128: at 100,000 listings 370 ms and
1.2 million buffers a claim for the whole of the build, where the claim over every listing
had taken 37-41 ms (docs/decisions/pending-embeddings-tracked-as-candidates.md); and each read of the vector lag, 230 ms. The
generation's marks now carry its id, so a claim can walk them in key order and stop once
it has its batch, and the lag (active generations) passes over another generation's
backfill. The other marks (a listing written, a vector deleted) stay few and are claimed
first, newest first, as before.

A backfill mark is of a listing that wanted nothing in any other live generation (else it
was a candidate already): it is pending in its own generation at most, which is all
`ingestion/pending.py` checks for it. Anything that could make it want more marks it
again as written, and a listing marked by two generations' backfills is marked as
written too. Every mark moves `seq`, which is what settling a candidate checks
(migrations/0012). Candidates marked before this migration count as written: a build
under way when it runs finishes at the old cost."""

from django.db import migrations, models

# A generation's creation marks its audience's active listings with `mark`.
GENERATION_CANDIDATES = """
CREATE OR REPLACE FUNCTION ingestion_generation_candidates() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    {mark}
    RETURN NULL;
END
$$;
"""
# As migrations/0012 marked them: every listing of every generation created, as written.
MARK_ALL = """PERFORM ingestion_mark_candidates(ARRAY(
        SELECT l.id FROM created g
        JOIN ingestion_listing l ON l.audience = g.audience AND l.status = 'active'
        WHERE g.state IN ('active', 'building', 'ready')
    ));"""
# Each generation created marks its own backfill (a statement may create several).
MARK_EACH = """PERFORM ingestion_mark_backfill(ARRAY(
        SELECT l.id FROM ingestion_listing l
        WHERE l.audience = g.audience AND l.status = 'active'
    ), g.id)
    FROM created g WHERE g.state IN ('active', 'building', 'ready');"""

# A written listing's mark, which `remark` updates on a listing marked already.
MARK_CANDIDATES = """
CREATE OR REPLACE FUNCTION ingestion_mark_candidates(ids bigint[]) RETURNS void
LANGUAGE sql AS $$
    INSERT INTO ingestion_embedding_candidate (listing_id)
    SELECT DISTINCT id FROM unnest(ids) AS id ORDER BY id
    ON CONFLICT (listing_id) DO UPDATE SET {remark}
$$;
"""

ADD_BACKFILL = """
ALTER TABLE ingestion_embedding_candidate ADD COLUMN backfill_generation_id bigint;
CREATE INDEX ingestion_embedding_candidate_backfill
    ON ingestion_embedding_candidate (backfill_generation_id, listing_id)
    WHERE backfill_generation_id IS NOT NULL;
CREATE INDEX ingestion_embedding_candidate_written
    ON ingestion_embedding_candidate (listing_id) WHERE backfill_generation_id IS NULL;

-- A listing's backfill mark stays its generation's only if it was that generation's before.
CREATE FUNCTION ingestion_mark_backfill(ids bigint[], generation bigint) RETURNS void
LANGUAGE sql AS $$
    INSERT INTO ingestion_embedding_candidate AS c (listing_id, backfill_generation_id)
    SELECT DISTINCT id, generation FROM unnest(ids) AS id ORDER BY id
    ON CONFLICT (listing_id) DO UPDATE SET seq = EXCLUDED.seq,
        backfill_generation_id = CASE WHEN c.backfill_generation_id = generation
                                      THEN generation END
$$;
"""

FORWARD = "".join(
    [
        ADD_BACKFILL,
        MARK_CANDIDATES.format(remark="seq = EXCLUDED.seq, backfill_generation_id = NULL"),
        GENERATION_CANDIDATES.format(mark=MARK_EACH),
    ]
)

BACKWARD = (
    GENERATION_CANDIDATES.format(mark=MARK_ALL)
    + MARK_CANDIDATES.format(remark="seq = EXCLUDED.seq")
    + """
DROP FUNCTION ingestion_mark_backfill(bigint[], bigint);
ALTER TABLE ingestion_embedding_candidate DROP COLUMN backfill_generation_id;
"""
)


class Migration(migrations.Migration):
    dependencies = [
        ("ingestion", "0012_embedding_candidates"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.RunSQL(FORWARD, BACKWARD)],
            state_operations=[
                migrations.AddField(
                    model_name="embeddingcandidate",
                    name="backfill_generation",
                    field=models.ForeignKey(
                        db_constraint=False,
                        editable=False,
                        null=True,
                        on_delete=models.deletion.DO_NOTHING,
                        related_name="+",
                        to="ingestion.indexgeneration",
                    ),
                ),
            ],
        ),
    ]
