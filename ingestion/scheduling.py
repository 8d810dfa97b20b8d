"""Which sources are due for a poll. Claimed with one conditional UPDATE, so two beat
instances (or a beat that fires twice) never poll a source twice for one interval."""

from django.db import connection
from django.utils import timezone


def claim_due_sources() -> list[int]:
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE ingestion_source"
            " SET next_poll_at = %(now)s + make_interval(secs => poll_interval_s)"
            " WHERE active AND url <> ''"
            " AND (next_poll_at IS NULL OR next_poll_at <= %(now)s)"
            " RETURNING id",
            {"now": timezone.now()},
        )
        return sorted(row[0] for row in cursor.fetchall())
