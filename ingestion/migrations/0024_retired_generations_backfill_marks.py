"""The backfill marks of generations retired before their build finished go: they want
nothing, and every embedding claim and settling read through them (a copy build of the
100,000 bench listings retired at once left 100,000). `generations.retire` removes a
generation's marks since; this removes those retired before."""

from django.db import migrations

FORWARD = """
DELETE FROM ingestion_embedding_candidate c
USING ingestion_indexgeneration g
WHERE g.id = c.backfill_generation_id AND g.state = 'retired'
"""


class Migration(migrations.Migration):
    dependencies = [
        ("ingestion", "0023_no_title_trigram_index"),
    ]

    operations = [
        migrations.RunSQL(FORWARD, migrations.RunSQL.noop),
    ]
