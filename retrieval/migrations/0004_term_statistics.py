# The spelling vocabulary again, over the widened audience column (see 0003), and the
# document frequencies for the lexical stage's ranking (retrieval/pg/lexical.py):
# how many active listings of each audience hold each lexeme, and how many listings that
# audience has. Per audience, so a judged collection's statistics never weigh a public
# search's terms, nor another collection's, nor the other way round.

from importlib import import_module

from django.db import migrations

# The view as 0003 dropped it: stated once, there.
VOCABULARY = import_module("retrieval.migrations.0003_vocabulary_off_audience").VOCABULARY

STATISTICS = """
CREATE MATERIALIZED VIEW retrieval_term_statistics AS
WITH active AS (SELECT audience, search_vector FROM ingestion_listing WHERE status = 'active')
SELECT terms.audience, terms.lexeme, terms.documents_with_term, corpus.documents
FROM (SELECT a.audience, lexeme, count(*) AS documents_with_term
      FROM active a, unnest(tsvector_to_array(a.search_vector)) AS lexeme
      GROUP BY a.audience, lexeme) AS terms
JOIN (SELECT audience, count(*) AS documents FROM active GROUP BY audience) AS corpus
  USING (audience);
CREATE UNIQUE INDEX retrieval_term_statistics_lexeme
    ON retrieval_term_statistics (audience, lexeme);
"""


class Migration(migrations.Migration):
    dependencies = [
        ("retrieval", "0003_vocabulary_off_audience"),
        ("ingestion", "0005_audience_per_evaluation_set"),
    ]

    operations = [
        migrations.RunSQL(VOCABULARY, "DROP MATERIALIZED VIEW retrieval_vocabulary"),
        migrations.RunSQL(STATISTICS, "DROP MATERIALIZED VIEW retrieval_term_statistics"),
    ]
