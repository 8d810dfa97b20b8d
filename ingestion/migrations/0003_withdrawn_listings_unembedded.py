"""Embeddings exist only for listings that can be shown: withdrawing a listing deletes its
vectors in every generation, in the same transaction, however it is withdrawn (a source
withdrawing its records, a merge, an editor). The vector search then needs no join to the
listings to keep withdrawn ones out of its slots (a join cost 0.34 ms at the median and
3.5 ms at p95 of the vector statement at 100,000 listings). Restoring a listing leaves it
without a vector, which is exactly the embedding sweep's work queue."""

from django.db import migrations

FORWARD = """
CREATE FUNCTION ingestion_listing_unembed() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM ingestion_listing_embedding WHERE listing_id = NEW.id;
    RETURN NULL;
END
$$;
CREATE TRIGGER listing_withdrawn_unembed
    AFTER UPDATE OF status ON ingestion_listing
    FOR EACH ROW WHEN (NEW.status <> 'active' AND OLD.status = 'active')
    EXECUTE FUNCTION ingestion_listing_unembed();
DELETE FROM ingestion_listing_embedding e
    USING ingestion_listing l
    WHERE l.id = e.listing_id AND l.status <> 'active';
"""

BACKWARD = """
DROP TRIGGER listing_withdrawn_unembed ON ingestion_listing;
DROP FUNCTION ingestion_listing_unembed();
"""


class Migration(migrations.Migration):
    dependencies = [
        ("ingestion", "0002_title_vector"),
    ]

    operations = [migrations.RunSQL(FORWARD, BACKWARD)]
