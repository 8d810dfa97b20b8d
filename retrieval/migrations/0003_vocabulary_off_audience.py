# The vocabulary view reads ingestion_listing.audience, and Postgres cannot alter the type
# of a column a view reads: it is dropped before ingestion widens the column (one audience
# per evaluation set, ingestion 0005) and made again after it (0004).

from django.db import migrations

# As 0002 made it.
VOCABULARY = """
CREATE MATERIALIZED VIEW retrieval_vocabulary AS
SELECT DISTINCT word
FROM ingestion_listing l,
     regexp_split_to_table(
         lower(unaccent(l.title || ' ' || l.venue || ' '
                        || immutable_array_to_string(l.aliases, ' '))),
         '[^[:alnum:]]+'
     ) AS word
WHERE l.status = 'active' AND l.audience = 'public' AND length(word) BETWEEN 3 AND 40;
CREATE UNIQUE INDEX retrieval_vocabulary_word ON retrieval_vocabulary (word);
CREATE INDEX retrieval_vocabulary_trgm ON retrieval_vocabulary USING gin (word gin_trgm_ops);
"""


class Migration(migrations.Migration):
    dependencies = [("retrieval", "0002_public_vocabulary")]
    run_before = [("ingestion", "0005_audience_per_evaluation_set")]

    operations = [
        migrations.RunSQL(
            "DROP MATERIALIZED VIEW retrieval_vocabulary",
            VOCABULARY,
        )
    ]
