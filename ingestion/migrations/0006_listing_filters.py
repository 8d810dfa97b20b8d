"""What a public search filters on (issue 11), kept where each stage can read it cheaply:

- `current_until`: when a listing stops being worth showing as upcoming: its end, else its
  start (an all-day event lasts its day); null for an undated listing. Not indexed on the
  listings: "not ended" holds for most of them, and with a B-tree there the lexical
  statement's generic plan read all 100,000 entries of it into a bitmap for every search
  (5 ms); a date is a filter on rows the text match found.
- `venue_terms`: the words of the venue and the aliases, lower-cased and unaccented, for a
  case- and accent-insensitive venue filter on a GIN index.
- `source_kinds`: the kinds of the sources whose live records make up the listing, kept by
  a trigger on the records, so a merge, a split or a withdrawn record changes it too.
- `ingestion_listing_embedding.starts_at` and `.current_until`: copies of the listing's,
  kept by triggers, so a vector search filters on dates in the rows its HNSW scan reads
  anyway: a join cost 0.34 ms at the median and 3.5 ms at p95 (migration 0003), and with a
  10 % date window, whose scan reads some 500 rows, a p50 of 40 ms.
"""

import django.contrib.postgres.fields
from django.contrib.postgres.indexes import GinIndex
from django.db import migrations, models

FUNCTIONS = """
CREATE EXTENSION IF NOT EXISTS unaccent;
-- unaccent() is only STABLE (its dictionary could change); naming the dictionary makes
-- the result depend on the argument alone, as a generated column needs.
CREATE FUNCTION immutable_unaccent(text) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE STRICT
    AS $$ SELECT unaccent('unaccent'::regdictionary, $1) $$;
CREATE FUNCTION listing_venue_terms(venue text, aliases text[]) RETURNS text[]
    LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT coalesce(array_agg(DISTINCT word ORDER BY word), '{}')
    FROM regexp_split_to_table(
        lower(immutable_unaccent(coalesce(venue, '') || ' '
                                 || coalesce(immutable_array_to_string(aliases, ' '), ''))),
        '[^[:alnum:]]+') AS word
    WHERE word <> ''
$$;
-- Hours, not a day: adding '24 hours' to a timestamptz does not depend on the session's
-- time zone, which is what lets the function be IMMUTABLE.
CREATE FUNCTION listing_current_until(starts timestamptz, ends timestamptz, all_day boolean)
    RETURNS timestamptz LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT coalesce(ends, starts + CASE WHEN all_day THEN interval '24 hours'
                                        ELSE interval '0' END)
$$;
"""

UNDO_FUNCTIONS = """
DROP FUNCTION listing_current_until(timestamptz, timestamptz, boolean);
DROP FUNCTION listing_venue_terms(text, text[]);
DROP FUNCTION immutable_unaccent(text);
"""

TRIGGERS = """
ALTER TABLE ingestion_listing ALTER COLUMN source_kinds SET DEFAULT '{}';

CREATE FUNCTION ingestion_listing_refresh_kinds(target bigint) RETURNS void
LANGUAGE sql AS $$
    UPDATE ingestion_listing l SET source_kinds = k.kinds
    FROM (SELECT coalesce(array_agg(DISTINCT s.kind ORDER BY s.kind), '{}') AS kinds
          FROM ingestion_sourcerecord r JOIN ingestion_source s ON s.id = r.source_id
          WHERE r.listing_id = target AND NOT r.withdrawn) AS k
    WHERE l.id = target AND l.source_kinds IS DISTINCT FROM k.kinds
$$;
CREATE FUNCTION ingestion_record_kinds() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP <> 'INSERT' AND OLD.listing_id IS NOT NULL THEN
        PERFORM ingestion_listing_refresh_kinds(OLD.listing_id);
    END IF;
    IF TG_OP = 'INSERT' OR TG_OP = 'UPDATE' AND NEW.listing_id IS DISTINCT FROM OLD.listing_id
    THEN
        IF NEW.listing_id IS NOT NULL THEN
            PERFORM ingestion_listing_refresh_kinds(NEW.listing_id);
        END IF;
    END IF;
    RETURN NULL;
END
$$;
CREATE TRIGGER record_listing_kinds
    AFTER INSERT OR DELETE ON ingestion_sourcerecord
    FOR EACH ROW EXECUTE FUNCTION ingestion_record_kinds();
-- Django saves every column: only a real change of what the kinds depend on counts.
CREATE TRIGGER record_listing_kinds_changed
    AFTER UPDATE OF listing_id, withdrawn, source_id ON ingestion_sourcerecord
    FOR EACH ROW WHEN ((OLD.listing_id, OLD.withdrawn, OLD.source_id)
                       IS DISTINCT FROM (NEW.listing_id, NEW.withdrawn, NEW.source_id))
    EXECUTE FUNCTION ingestion_record_kinds();
UPDATE ingestion_listing l SET source_kinds = k.kinds
FROM (SELECT r.listing_id, array_agg(DISTINCT s.kind ORDER BY s.kind) AS kinds
      FROM ingestion_sourcerecord r JOIN ingestion_source s ON s.id = r.source_id
      WHERE NOT r.withdrawn AND r.listing_id IS NOT NULL
      GROUP BY r.listing_id) AS k
WHERE l.id = k.listing_id;

CREATE FUNCTION ingestion_embedding_current_until() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    SELECT l.starts_at, l.current_until INTO NEW.starts_at, NEW.current_until
    FROM ingestion_listing l WHERE l.id = NEW.listing_id;
    RETURN NEW;
END
$$;
CREATE TRIGGER embedding_current_until
    BEFORE INSERT ON ingestion_listing_embedding
    FOR EACH ROW EXECUTE FUNCTION ingestion_embedding_current_until();
CREATE FUNCTION ingestion_listing_dates_changed() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE ingestion_listing_embedding
    SET starts_at = NEW.starts_at, current_until = NEW.current_until
    WHERE listing_id = NEW.id;
    RETURN NULL;
END
$$;
CREATE TRIGGER listing_dates_changed
    AFTER UPDATE OF starts_at, ends_at, all_day ON ingestion_listing
    FOR EACH ROW WHEN ((OLD.starts_at, OLD.ends_at, OLD.all_day)
                       IS DISTINCT FROM (NEW.starts_at, NEW.ends_at, NEW.all_day))
    EXECUTE FUNCTION ingestion_listing_dates_changed();
UPDATE ingestion_listing_embedding e SET starts_at = l.starts_at, current_until = l.current_until
FROM ingestion_listing l WHERE l.id = e.listing_id;
"""

UNDO_TRIGGERS = """
DROP TRIGGER listing_dates_changed ON ingestion_listing;
DROP FUNCTION ingestion_listing_dates_changed();
DROP TRIGGER embedding_current_until ON ingestion_listing_embedding;
DROP FUNCTION ingestion_embedding_current_until();
DROP TRIGGER record_listing_kinds_changed ON ingestion_sourcerecord;
DROP TRIGGER record_listing_kinds ON ingestion_sourcerecord;
DROP FUNCTION ingestion_record_kinds();
DROP FUNCTION ingestion_listing_refresh_kinds(bigint);
"""


class Migration(migrations.Migration):
    dependencies = [
        ("ingestion", "0005_audience_per_evaluation_set"),
    ]

    operations = [
        migrations.RunSQL(FUNCTIONS, UNDO_FUNCTIONS),
        migrations.AddField(
            model_name="listing",
            name="current_until",
            field=models.GeneratedField(
                db_persist=True,
                expression=models.Func(
                    "starts_at",
                    "ends_at",
                    "all_day",
                    function="listing_current_until",
                    output_field=models.DateTimeField(),
                ),
                output_field=models.DateTimeField(),
            ),
        ),
        migrations.AddField(
            model_name="listing",
            name="venue_terms",
            field=models.GeneratedField(
                db_persist=True,
                expression=models.Func(
                    "venue",
                    "aliases",
                    function="listing_venue_terms",
                    output_field=django.contrib.postgres.fields.ArrayField(
                        base_field=models.TextField(), size=None
                    ),
                ),
                output_field=django.contrib.postgres.fields.ArrayField(
                    base_field=models.TextField(), size=None
                ),
            ),
        ),
        migrations.AddField(
            model_name="listing",
            name="source_kinds",
            field=django.contrib.postgres.fields.ArrayField(
                base_field=models.CharField(max_length=16),
                blank=True,
                default=list,
                editable=False,
                size=None,
            ),
        ),
        migrations.AddField(
            model_name="listingembedding",
            name="starts_at",
            field=models.DateTimeField(editable=False, null=True),
        ),
        migrations.AddField(
            model_name="listingembedding",
            name="current_until",
            field=models.DateTimeField(editable=False, null=True),
        ),
        migrations.RunSQL(TRIGGERS, UNDO_TRIGGERS),
        migrations.AddIndex(
            model_name="listing",
            index=GinIndex(fields=["venue_terms"], name="listing_venue_terms_gin"),
        ),
        migrations.AddIndex(
            model_name="listing",
            index=GinIndex(fields=["source_kinds"], name="listing_source_kinds_gin"),
        ),
    ]
