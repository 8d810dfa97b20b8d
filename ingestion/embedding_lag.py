"""How far the vector index lags behind the listings: the active listings still without an
embedding of their current version in their audience's active generation, and how long
the oldest of them has waited since it was fetched (the lag `ingestion.metrics.VECTOR_LAG`
records once it is embedded). While embedding stalls, that histogram hears nothing; this
is what says so (`/healthz`, the metrics' `ingestion_embeddings_pending`)."""

from dataclasses import dataclass

from django.db import OperationalError, connection, transaction
from psycopg.errors import QueryCanceled

# The work queue of ingestion/indexing.py's claim, narrowed to active generations.
PENDING_SQL = """
    SELECT count(*), extract(epoch FROM clock_timestamp() - min(l.fetched_at))
    FROM ingestion_listing l
    JOIN ingestion_indexgeneration g ON g.state = 'active' AND g.audience = l.audience
    LEFT JOIN ingestion_listing_embedding e ON e.listing_id = l.id AND e.generation_id = g.id
    WHERE l.status = 'active' AND (e.listing_id IS NULL OR e.content_version < l.content_version)
"""


# Health checks and scrapes read this; behind a lock on the embeddings table (a
# migration's, or a test's) they must say "unknown", not hang.
TIMEOUT = "500ms"


@dataclass(frozen=True)
class EmbeddingLag:
    pending: int
    oldest_s: float | None  # None: nothing pending (or nothing pending was ever fetched)


def embedding_lag() -> EmbeddingLag | None:
    """The lag now; None when Postgres could not say within TIMEOUT."""
    try:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute("SELECT set_config('statement_timeout', %s, true)", [TIMEOUT])
            cursor.execute(PENDING_SQL)
            pending, oldest = cursor.fetchone()
    except OperationalError as exc:
        if isinstance(exc.__cause__, QueryCanceled):  # the timeout
            return None
        raise
    return EmbeddingLag(int(pending), float(oldest) if oldest is not None else None)
