"""A series is one listing (issue 33): its occurrences are stored beside it.

- `ingestion_listing.occurrences`: each occurrence as a `tstzrange` [start, until], until
  as `listing_current_until` reads an end, in an array rather than a `tstzmultirange`,
  which would merge touching or overlapping occurrences into one. The listing's own
  `starts_at`/`ends_at` span them all, so `current_until`, the embeddings' date copies
  and their GiST index keep passing a superset of the listings a window holds; the
  occurrences are read only where that superset is not exact (a window with both ends,
  `past`), and for the next occurrence a result shows.
- `ingestion_listing.recurrence`: the rule in words where it is simple ("every Tuesday").
- `ingestion_listing.withdrawn_dates`: the starts of the dates an editor withdrew, which a
  source's next version of the series leaves out.
- `ingestion_listing_embedding.occurrences`: a copy, kept by the same triggers as the
  dates' (migration 0006), so the vector stage checks occurrences in the rows its index
  scan reads, without a join.
"""

import django.contrib.postgres.fields
import django.contrib.postgres.fields.ranges
from django.db import migrations, models

TRIGGERS = """
CREATE OR REPLACE FUNCTION ingestion_embedding_current_until() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    SELECT l.starts_at, l.current_until, l.occurrences
    INTO NEW.starts_at, NEW.current_until, NEW.occurrences
    FROM ingestion_listing l WHERE l.id = NEW.listing_id;
    RETURN NEW;
END
$$;
CREATE OR REPLACE FUNCTION ingestion_listing_dates_changed() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE ingestion_listing_embedding
    SET starts_at = NEW.starts_at, current_until = NEW.current_until,
        occurrences = NEW.occurrences
    WHERE listing_id = NEW.id;
    RETURN NULL;
END
$$;
DROP TRIGGER listing_dates_changed ON ingestion_listing;
CREATE TRIGGER listing_dates_changed
    AFTER UPDATE OF starts_at, ends_at, all_day, occurrences ON ingestion_listing
    FOR EACH ROW WHEN ((OLD.starts_at, OLD.ends_at, OLD.all_day, OLD.occurrences)
                       IS DISTINCT FROM (NEW.starts_at, NEW.ends_at, NEW.all_day,
                                         NEW.occurrences))
    EXECUTE FUNCTION ingestion_listing_dates_changed();
"""
UNDO_TRIGGERS = """
CREATE OR REPLACE FUNCTION ingestion_embedding_current_until() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    SELECT l.starts_at, l.current_until INTO NEW.starts_at, NEW.current_until
    FROM ingestion_listing l WHERE l.id = NEW.listing_id;
    RETURN NEW;
END
$$;
CREATE OR REPLACE FUNCTION ingestion_listing_dates_changed() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE ingestion_listing_embedding
    SET starts_at = NEW.starts_at, current_until = NEW.current_until
    WHERE listing_id = NEW.id;
    RETURN NULL;
END
$$;
DROP TRIGGER listing_dates_changed ON ingestion_listing;
CREATE TRIGGER listing_dates_changed
    AFTER UPDATE OF starts_at, ends_at, all_day ON ingestion_listing
    FOR EACH ROW WHEN ((OLD.starts_at, OLD.ends_at, OLD.all_day)
                       IS DISTINCT FROM (NEW.starts_at, NEW.ends_at, NEW.all_day))
    EXECUTE FUNCTION ingestion_listing_dates_changed();
"""


def _occurrences(**options: object) -> django.contrib.postgres.fields.ArrayField:
    return django.contrib.postgres.fields.ArrayField(
        base_field=django.contrib.postgres.fields.ranges.DateTimeRangeField(),
        default=list,
        db_default=models.Value("{}"),
        size=None,
        **options,
    )


class Migration(migrations.Migration):
    dependencies = [("ingestion", "0015_embedding_text_digest")]

    operations = [
        migrations.AddField("listing", "occurrences", _occurrences(editable=False)),
        migrations.AddField(
            "listing", "recurrence", models.CharField(editable=False, max_length=100, db_default="")
        ),
        migrations.AddField(
            "listing",
            "withdrawn_dates",
            django.contrib.postgres.fields.ArrayField(
                base_field=models.DateTimeField(),
                default=list,
                db_default=models.Value("{}"),
                editable=False,
                size=None,
            ),
        ),
        migrations.AddField("listingembedding", "occurrences", _occurrences(editable=False)),
        migrations.RunSQL(TRIGGERS, UNDO_TRIGGERS),
    ]
