"""What the search box suggests as a visitor types: the titles and venues of public
listings that can still be attended, one row per spelling-insensitive text and kind, in a
materialized view refreshed in the background (retrieval/pg/suggestions.py).

- `key`: the text lower-cased and unaccented, as a query is before it is compared.
  `unaccent()` itself, resolved when the view is made: a refresh runs with a search_path
  of pg_catalog alone, where `immutable_unaccent`'s body cannot find its dictionary.
- `words`: its words for a prefix match (`to_tsquery('simple', 'jazz & cel:*')`), on GIN.
- `listings`: how many listings share the text (the most shared first among equals, and
  first on disk, so that the first texts a match finds are the most shared);
  `until`: when the last of them ends (undated: never), so a suggestion is dropped by the
  query the moment its last listing has ended, not at the next refresh.
"""

from django.db import migrations

CREATE = """
CREATE MATERIALIZED VIEW retrieval_suggestion AS
SELECT mode() WITHIN GROUP (ORDER BY s.text) AS text, s.kind, s.key,
       to_tsvector('simple', s.key) AS words,
       count(*) AS listings,
       max(s.until) AS until
FROM (SELECT t.text, t.kind, lower(unaccent(t.text)) AS key,
             coalesce(l.current_until, 'infinity') AS until
      FROM ingestion_listing l,
           LATERAL (VALUES (l.title, 'title'), (l.venue, 'venue')) AS t(text, kind)
      WHERE l.status = 'active' AND l.audience = 'public'
        AND coalesce(l.current_until, 'infinity') >= now()
        AND btrim(t.text) <> '') AS s
GROUP BY s.kind, s.key
-- The most shared first on disk: the statement ranks the first texts it finds.
ORDER BY count(*) DESC, s.key;
CREATE UNIQUE INDEX retrieval_suggestion_kind_key ON retrieval_suggestion (kind, key);
CREATE INDEX retrieval_suggestion_words ON retrieval_suggestion USING gin (words);
"""


class Migration(migrations.Migration):
    dependencies = [
        ("retrieval", "0007_metric_rollup_to_ops"),
        ("ingestion", "0014_gin_without_pending_lists"),
    ]

    operations = [migrations.RunSQL(CREATE, "DROP MATERIALIZED VIEW retrieval_suggestion")]
