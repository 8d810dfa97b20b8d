# Document frequencies for the lexical stage's any-term ranking (retrieval/pg_lexical.py):
# how many active listings of each audience hold each lexeme, and how many listings that
# audience has. Per audience, so a judged collection's statistics never weigh a public
# search's terms, nor the other way round.

from django.db import migrations

VIEW = """
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
    dependencies = [("retrieval", "0002_public_vocabulary")]

    operations = [migrations.RunSQL(VIEW, "DROP MATERIALIZED VIEW retrieval_term_statistics")]
