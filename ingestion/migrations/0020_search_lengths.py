"""Each listing's length in search tokens per label of its search vector (title A, venue
and aliases B, description C), beside the vector: the lexical stage's BM25 divides a
term's frequency by the document's length against the average (retrieval/pg/lexical.py),
and counting a vector's positions when a search reads it cost 7 ms per 1,000 candidates
at 100,000 listings, against nothing stored.

A generated column cannot read another (search_vector), so the function tokenises the
same fields the same way again; positions as a tsvector keeps them (at most 256 per
lexeme), so that lengths and term frequencies count alike."""

import django.contrib.postgres.fields
from django.db import migrations, models

FUNCTION = """
CREATE FUNCTION listing_search_lengths(title text, venue text, aliases text[], description text)
RETURNS integer[] LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN ARRAY[
    (SELECT coalesce(sum(cardinality(u.positions)), 0)::integer
     FROM unnest(to_tsvector('english'::regconfig, coalesce(title, ''))) AS u),
    (SELECT coalesce(sum(cardinality(u.positions)), 0)::integer
     FROM unnest(to_tsvector('english'::regconfig, coalesce(venue, '') || ' '
                             || coalesce(immutable_array_to_string(aliases, ' '), ''))) AS u),
    (SELECT coalesce(sum(cardinality(u.positions)), 0)::integer
     FROM unnest(to_tsvector('english'::regconfig, coalesce(description, ''))) AS u)
]
"""


class Migration(migrations.Migration):
    dependencies = [("ingestion", "0019_occurrences_in_the_dates_index")]

    operations = [
        migrations.RunSQL(
            FUNCTION, "DROP FUNCTION listing_search_lengths(text, text, text[], text)"
        ),
        migrations.AddField(
            model_name="listing",
            name="search_lengths",
            field=models.GeneratedField(
                db_persist=True,
                expression=models.Func(
                    "title",
                    "venue",
                    "aliases",
                    "description",
                    function="listing_search_lengths",
                    output_field=django.contrib.postgres.fields.ArrayField(
                        base_field=models.IntegerField(), size=3
                    ),
                ),
                output_field=django.contrib.postgres.fields.ArrayField(
                    base_field=models.IntegerField(), size=3
                ),
            ),
        ),
    ]
