"""The listings that may want an embedding, kept by triggers (`EmbeddingCandidate`).

Finding the pending (listing, generation) pairs from the listings themselves read two index
entries per listing: at 100,000 listings 32 ms of Postgres for every claim of the embedding
worker, which a feed makes every few listings (347 claims for 2,400 listings, 4.6 ms a
listing, in bench/feed_probe.py with pg_stat_statements: docs/reliability.md), and as much
for every lag read. The candidates are the listings whose vectors may be missing or out of
date; every way a pair becomes pending marks one:

- a listing inserted active, or changed in content version, status or audience while active
  (row triggers: a listing's writes are a few at a time);
- an embedding deleted of an active listing in a live generation (a statement trigger: a
  retired generation's vectors go in one statement, and its state is retired by then);
- a generation created: every active listing of its audience (a statement trigger).

`ingestion_mark_candidates` writes them in listing id order, so that two writers marking
overlapping listings take their row locks in the same order. The table is filled here
from the definition it replaces, in the same transaction as the triggers."""

from django.db import migrations, models

FORWARD = """
CREATE SEQUENCE ingestion_embedding_candidate_seq;
CREATE TABLE ingestion_embedding_candidate (
    listing_id bigint PRIMARY KEY,
    seq bigint NOT NULL DEFAULT nextval('ingestion_embedding_candidate_seq')
);
ALTER SEQUENCE ingestion_embedding_candidate_seq OWNED BY ingestion_embedding_candidate.seq;
-- A queue: rows come and go all day and every claim reads it whole. Vacuumed once 500 are
-- dead, not a fifth of its size, so the dead rows a backfill leaves are not read for long.
ALTER TABLE ingestion_embedding_candidate
    SET (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 500);

CREATE FUNCTION ingestion_mark_candidates(ids bigint[]) RETURNS void
LANGUAGE sql AS $$
    INSERT INTO ingestion_embedding_candidate (listing_id)
    SELECT DISTINCT id FROM unnest(ids) AS id ORDER BY id
    ON CONFLICT (listing_id) DO UPDATE SET seq = EXCLUDED.seq
$$;

CREATE FUNCTION ingestion_listing_candidate() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM ingestion_mark_candidates(ARRAY[NEW.id]);
    RETURN NULL;
END
$$;
CREATE TRIGGER listing_inserted_candidate
    AFTER INSERT ON ingestion_listing
    FOR EACH ROW WHEN (NEW.status = 'active')
    EXECUTE FUNCTION ingestion_listing_candidate();
CREATE TRIGGER listing_changed_candidate
    AFTER UPDATE OF content_version, status, audience ON ingestion_listing
    FOR EACH ROW WHEN (
        NEW.status = 'active'
        AND (OLD.content_version, OLD.status, OLD.audience)
            IS DISTINCT FROM (NEW.content_version, NEW.status, NEW.audience)
    )
    EXECUTE FUNCTION ingestion_listing_candidate();

CREATE FUNCTION ingestion_unembedded_candidates() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM ingestion_mark_candidates(ARRAY(
        SELECT gone.listing_id FROM gone
        JOIN ingestion_indexgeneration g ON g.id = gone.generation_id AND g.state IN ('active', 'building', 'ready')
        JOIN ingestion_listing l ON l.id = gone.listing_id AND l.status = 'active'
    ));
    RETURN NULL;
END
$$;
CREATE TRIGGER embedding_deleted_candidates
    AFTER DELETE ON ingestion_listing_embedding
    REFERENCING OLD TABLE AS gone
    FOR EACH STATEMENT EXECUTE FUNCTION ingestion_unembedded_candidates();

CREATE FUNCTION ingestion_generation_candidates() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM ingestion_mark_candidates(ARRAY(
        SELECT l.id FROM created g
        JOIN ingestion_listing l ON l.audience = g.audience AND l.status = 'active'
        WHERE g.state IN ('active', 'building', 'ready')
    ));
    RETURN NULL;
END
$$;
CREATE TRIGGER generation_created_candidates
    AFTER INSERT ON ingestion_indexgeneration
    REFERENCING NEW TABLE AS created
    FOR EACH STATEMENT EXECUTE FUNCTION ingestion_generation_candidates();

SELECT ingestion_mark_candidates(ARRAY(
    SELECT l.id FROM ingestion_indexgeneration g
    JOIN ingestion_listing l ON l.audience = g.audience AND l.status = 'active'
    WHERE g.state IN ('active', 'building', 'ready')
      AND NOT EXISTS (SELECT 1 FROM ingestion_listing_embedding e
                      WHERE e.generation_id = g.id AND e.listing_id = l.id
                        AND e.content_version >= l.content_version)
));
"""

BACKWARD = """
DROP TRIGGER generation_created_candidates ON ingestion_indexgeneration;
DROP FUNCTION ingestion_generation_candidates();
DROP TRIGGER embedding_deleted_candidates ON ingestion_listing_embedding;
DROP FUNCTION ingestion_unembedded_candidates();
DROP TRIGGER listing_changed_candidate ON ingestion_listing;
DROP TRIGGER listing_inserted_candidate ON ingestion_listing;
DROP FUNCTION ingestion_listing_candidate();
DROP FUNCTION ingestion_mark_candidates(bigint[]);
DROP TABLE ingestion_embedding_candidate;
"""


class Migration(migrations.Migration):
    dependencies = [
        ("ingestion", "0011_pending_work_indexes"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.RunSQL(FORWARD, BACKWARD)],
            state_operations=[
                migrations.CreateModel(
                    name="EmbeddingCandidate",
                    fields=[
                        (
                            "listing",
                            models.OneToOneField(
                                db_constraint=False,
                                on_delete=models.deletion.DO_NOTHING,
                                primary_key=True,
                                related_name="+",
                                serialize=False,
                                to="ingestion.listing",
                            ),
                        ),
                        ("seq", models.BigIntegerField(editable=False)),
                    ],
                    options={"db_table": "ingestion_embedding_candidate"},
                ),
            ],
        ),
    ]
