"""The venues of the most listings, which the counts on the filters offer
(retrieval/pg/facets.py), found on an index of the suggestions' view rather than by
sorting every text in it (one row per distinct title and venue: about as many rows as
listings)."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("retrieval", "0008_suggestions")]

    operations = [
        migrations.RunSQL(
            "CREATE INDEX retrieval_suggestion_most_listed"
            " ON retrieval_suggestion (kind, listings DESC, key)",
            "DROP INDEX retrieval_suggestion_most_listed",
        )
    ]
