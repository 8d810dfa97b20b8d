"""The listing table's GIN indexes keep no pending list (migration 0014): a search scans
such a list whole, and merging it (autovacuum's ANALYZE, or the insert that finds it full)
held up every lexical statement while a feed ran. An index added without
`fastupdate=False` fails here."""

import pytest
from django.db import connection

pytestmark = pytest.mark.django_db


def test_every_gin_index_of_the_listing_table_takes_inserts_directly() -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.relname, coalesce('fastupdate=off' = ANY(c.reloptions), false)"
            " FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid"
            " JOIN pg_am a ON a.oid = c.relam"
            " WHERE i.indrelid = 'ingestion_listing'::regclass AND a.amname = 'gin'"
        )
        without_pending_list = dict(cursor.fetchall())
    # Full text, title text, venue terms, source kinds (the title's trigrams went in 0023).
    assert len(without_pending_list) == 4, without_pending_list
    assert all(without_pending_list.values()), without_pending_list
