# Each term's count of titles beside its count of listings: the lexical stage reads a
# common query's pool of title matches in the table's order when the titles' shares say
# that is cheaper than the index (retrieval/pg/lexical.py, SEQUENTIAL_COST). Title lexemes
# are among the search vector's, so every title term has its row.

from importlib import import_module

from django.db import migrations

_UNIQUE = """
CREATE UNIQUE INDEX retrieval_term_statistics_lexeme
    ON retrieval_term_statistics (audience, lexeme);
"""

WITH_TITLES = """
DROP MATERIALIZED VIEW retrieval_term_statistics;
CREATE MATERIALIZED VIEW retrieval_term_statistics AS
WITH active AS (
    SELECT audience, search_vector, title_vector FROM ingestion_listing WHERE status = 'active'
),
titles AS (
    SELECT a.audience, lexeme, count(*) AS titles_with_term
    FROM active a, unnest(tsvector_to_array(a.title_vector)) AS lexeme
    GROUP BY a.audience, lexeme
)
SELECT terms.audience, terms.lexeme, terms.documents_with_term,
       coalesce(titles.titles_with_term, 0) AS titles_with_term, corpus.documents
FROM (SELECT a.audience, lexeme, count(*) AS documents_with_term
      FROM active a, unnest(tsvector_to_array(a.search_vector)) AS lexeme
      GROUP BY a.audience, lexeme) AS terms
LEFT JOIN titles USING (audience, lexeme)
JOIN (SELECT audience, count(*) AS documents FROM active GROUP BY audience) AS corpus
  USING (audience);
"""

# The view as 0004 made it.
WITHOUT_TITLES = import_module("retrieval.migrations.0004_term_statistics").STATISTICS


class Migration(migrations.Migration):
    dependencies = [("retrieval", "0012_budget_conditions")]

    operations = [
        migrations.RunSQL(
            [WITH_TITLES, _UNIQUE],
            ["DROP MATERIALIZED VIEW retrieval_term_statistics", WITHOUT_TITLES],
        )
    ]
