"""How far the vector index lags behind the listings: the active listings still without an
embedding of their current version in their audience's active generation, and how long
the oldest of them has waited since it was fetched (the lag `ingestion.metrics.VECTOR_LAG`
records once it is embedded). While embedding stalls, that histogram hears nothing; this
is what says so (`/healthz`, the metrics' `ingestion_embeddings_pending`).

Each process asks Postgres at most once every EMBEDDING_LAG_REFRESH_S: the question reads
the embedding candidates (ingestion/pending.py), a handful while a feed runs but every
listing of a generation being built, and when it read two index entries per listing
(26-39 ms at 100,000) a load bench scraping twice a second made it a fifth of a core of
Postgres and 4-10 % fallbacks at 50 searches/s (docs/reliability.md). A figure about
waits of seconds to a minute loses nothing by being a few seconds old, and its oldest
wait is aged by the time since it was read."""

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from django.conf import settings
from django.db import OperationalError, connection, transaction
from psycopg.errors import QueryCanceled

from ingestion.pending import pending_from

# The work queue of the embedding claim (ingestion/embedding_claim.py), narrowed to active
# generations.
_ACTIVE_GENERATIONS = "g.state = 'active'"
PENDING_SQL = (  # constant text, with no values in it
    "SELECT count(*), extract(epoch FROM clock_timestamp() - min(l.fetched_at)) "  # noqa: S608
    f"{pending_from(_ACTIVE_GENERATIONS)}"
)


# Health checks and scrapes read this; behind a lock on the embeddings table (a
# migration's, or a test's) they must say "unknown", not hang.
TIMEOUT = "500ms"


@dataclass(frozen=True)
class EmbeddingLag:
    pending: int
    oldest_s: float | None  # None: nothing pending (or nothing pending was ever fetched)


class _Latest:
    """The last answer this process had, and when (a clock's reading). Callers that come
    while a question is out wait for its answer rather than ask again."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.read_at: float | None = None
        self.lag: EmbeddingLag | None = None

    def forget(self) -> None:
        with self.lock:
            self.read_at, self.lag = None, None


latest = _Latest()


def embedding_lag(clock: Callable[[], float] = time.monotonic) -> EmbeddingLag | None:
    """The lag as of at most EMBEDDING_LAG_REFRESH_S ago; None when Postgres could not say
    within TIMEOUT (kept as the answer too: asked again at once, a locked table would make
    every scrape wait out its timeout)."""
    with latest.lock:
        now = clock()
        if latest.read_at is not None and now - latest.read_at < settings.EMBEDDING_LAG_REFRESH_S:
            lag = latest.lag
            if lag is None or lag.oldest_s is None:
                return lag
            return replace(lag, oldest_s=lag.oldest_s + now - latest.read_at)
        latest.lag, latest.read_at = _read(), now
        return latest.lag


def _read() -> EmbeddingLag | None:
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
