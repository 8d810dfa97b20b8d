"""The vocabulary behind spelling correction: a materialized view of the words of active
listings' titles, venues and aliases, refreshed in the background. Words of listings added
since the last refresh are corrected to only after the next one; they are still found by
full-text search at once."""

from django.db import connection


def refresh() -> None:
    with connection.cursor() as cursor:
        # CONCURRENTLY: searches keep reading the old contents while the new ones build.
        cursor.execute("REFRESH MATERIALIZED VIEW CONCURRENTLY retrieval_vocabulary")
