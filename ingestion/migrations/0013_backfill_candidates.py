"""A generation's own candidates apart from the rest (`EmbeddingCandidate.backfill`).

A generation created marks every active listing of its audience a candidate. Each claim
then found all the pending pairs, sorted them and took 128: at 100,000 listings 370 ms and
1.2 million buffers a claim for the whole of the build, where the claim over every listing
had taken 37-41 ms (docs/architecture.md). The generation's marks are now told apart, so a
claim can walk them in key order and stop once it has its batch; the other marks (a
listing written, a vector deleted) stay few and are claimed first, newest first, as
before. A listing marked both ways is an ordinary candidate: marking it for a generation
leaves it one, and writing it makes it one. Either way its `seq` moves, which is what
settling a candidate checks (migrations/0012). Candidates marked before this migration
count as written: a build under way when it runs finishes at the old cost."""

from django.db import migrations, models

# A generation's creation marks its audience's active listings with `mark`.
GENERATION_CANDIDATES = """
CREATE OR REPLACE FUNCTION ingestion_generation_candidates() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM {mark}(ARRAY(
        SELECT l.id FROM created g
        JOIN ingestion_listing l ON l.audience = g.audience AND l.status = 'active'
        WHERE g.state IN ('active', 'building', 'ready')
    ));
    RETURN NULL;
END
$$;
"""

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
ALTER TABLE ingestion_embedding_candidate ADD COLUMN backfill boolean NOT NULL DEFAULT false;
CREATE INDEX ingestion_embedding_candidate_backfill
    ON ingestion_embedding_candidate (listing_id) WHERE backfill;
CREATE INDEX ingestion_embedding_candidate_written
    ON ingestion_embedding_candidate (listing_id) WHERE NOT backfill;

CREATE FUNCTION ingestion_mark_backfill(ids bigint[]) RETURNS void
LANGUAGE sql AS $$
    INSERT INTO ingestion_embedding_candidate (listing_id, backfill)
    SELECT DISTINCT id, true FROM unnest(ids) AS id ORDER BY id
    ON CONFLICT (listing_id) DO UPDATE SET seq = EXCLUDED.seq
$$;
"""

FORWARD = "".join(
    [
        ADD_BACKFILL,
        MARK_CANDIDATES.format(remark="seq = EXCLUDED.seq, backfill = false"),
        GENERATION_CANDIDATES.format(mark="ingestion_mark_backfill"),
    ]
)

BACKWARD = (
    GENERATION_CANDIDATES.format(mark="ingestion_mark_candidates")
    + MARK_CANDIDATES.format(remark="seq = EXCLUDED.seq")
    + """
DROP FUNCTION ingestion_mark_backfill(bigint[]);
ALTER TABLE ingestion_embedding_candidate DROP COLUMN backfill;
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
                    name="backfill",
                    field=models.BooleanField(default=False, editable=False),
                ),
            ],
        ),
    ]
