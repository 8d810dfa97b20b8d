"""The lexical stage's vocabulary, two materialized views refreshed in the background:
the words of active listings' titles, venues and aliases behind spelling correction, and
each lexeme's document frequency per audience behind any-term ranking
(retrieval/pg/lexical.py). Words of listings added since the last refresh are corrected to
only after the next one, and weigh as rare terms until then; they are still found by
full-text search at once."""

from django.db import connection

VIEWS = ("retrieval_vocabulary", "retrieval_term_statistics", "retrieval_corpus_statistics")


def refresh() -> None:
    with connection.cursor() as cursor:
        for view in VIEWS:
            # CONCURRENTLY: searches keep reading the old contents while the new ones build.
            cursor.execute(f"REFRESH MATERIALIZED VIEW CONCURRENTLY {view}")
