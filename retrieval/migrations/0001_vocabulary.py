# The words of listing titles, venues and aliases, for spelling correction.

from django.db import migrations

CREATE = """
CREATE MATERIALIZED VIEW retrieval_vocabulary AS
SELECT DISTINCT word
FROM ingestion_listing l,
     regexp_split_to_table(
         lower(unaccent(l.title || ' ' || l.venue || ' '
                        || immutable_array_to_string(l.aliases, ' '))),
         '[^[:alnum:]]+'
     ) AS word
WHERE l.status = 'active' AND length(word) BETWEEN 3 AND 40;
CREATE UNIQUE INDEX retrieval_vocabulary_word ON retrieval_vocabulary (word);
CREATE INDEX retrieval_vocabulary_trgm ON retrieval_vocabulary USING gin (word gin_trgm_ops);
"""


class Migration(migrations.Migration):
    initial = True
    dependencies = [("ingestion", "0002_title_vector")]
    operations = [migrations.RunSQL(CREATE, "DROP MATERIALIZED VIEW retrieval_vocabulary")]
