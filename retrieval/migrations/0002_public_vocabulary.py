# Spelling corrections come from public listings only: a judged collection's words
# (ingestion.models.Audience) must never be offered to the public as "did you mean".
# A migration states the view whole, as it was then, so history never moves under it.

from django.db import migrations

VIEW = """
DROP MATERIALIZED VIEW retrieval_vocabulary;
CREATE MATERIALIZED VIEW retrieval_vocabulary AS
SELECT DISTINCT word
FROM ingestion_listing l,
     regexp_split_to_table(
         lower(unaccent(l.title || ' ' || l.venue || ' '
                        || immutable_array_to_string(l.aliases, ' '))),
         '[^[:alnum:]]+'
     ) AS word
WHERE {condition} AND length(word) BETWEEN 3 AND 40;
CREATE UNIQUE INDEX retrieval_vocabulary_word ON retrieval_vocabulary (word);
CREATE INDEX retrieval_vocabulary_trgm ON retrieval_vocabulary USING gin (word gin_trgm_ops);
"""


class Migration(migrations.Migration):
    dependencies = [
        ("retrieval", "0001_vocabulary"),
        ("ingestion", "0004_audiences"),
    ]

    operations = [
        migrations.RunSQL(
            VIEW.format(condition="l.status = 'active' AND l.audience = 'public'"),
            VIEW.format(condition="l.status = 'active'"),
        )
    ]
