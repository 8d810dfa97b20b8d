# Per audience, how many active listings it has and their average length per label of the
# search vector (ingestion 0020): with each term's document frequency
# (retrieval_term_statistics), what the lexical stage's BM25 needs (retrieval/pg/lexical.py).
# A view of its own, so that a term no listing had at the last refresh still finds the
# corpus' size, and counts as the rarest term rather than as a common one.

from django.db import migrations

STATISTICS = """
CREATE MATERIALIZED VIEW retrieval_corpus_statistics AS
SELECT audience, count(*) AS documents,
       ARRAY[avg(search_lengths[1]), avg(search_lengths[2]), avg(search_lengths[3])]::float8[]
           AS average_lengths
FROM ingestion_listing WHERE status = 'active' GROUP BY audience;
CREATE UNIQUE INDEX retrieval_corpus_statistics_audience
    ON retrieval_corpus_statistics (audience);
"""


class Migration(migrations.Migration):
    dependencies = [
        ("retrieval", "0009_top_venues"),
        ("ingestion", "0020_search_lengths"),
    ]

    operations = [
        migrations.RunSQL(STATISTICS, "DROP MATERIALIZED VIEW retrieval_corpus_statistics"),
    ]
