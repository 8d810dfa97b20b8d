"""The background flusher: once a minute (on the minute), and when the process stops, this
process's metric increases (ops/rollups.py) go to Postgres in one statement, which
also deletes the rows past the retention. Never on the search path: searches only
increment their in-memory counters, as they always did; a thread reads them.

Invariants:
- A flush is one statement (a data-modifying CTE: the DELETE and the INSERT), so writing
  costs one round trip however many series grew, and every process's flushes keep the
  table bounded without a separate sweep.
- What a failed flush would have written is not lost: the baseline moves only after a
  write succeeded, so the next flush writes it (stamped with the earlier minute).
- Each process has its own writer, started in that process (a forked Celery child starts
  its own: threads do not survive a fork), whose baseline is the counts at its start, so
  counts a child inherited from its parent are never written twice.
"""

import atexit
import logging
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from django.db import connection

from ops import rollups
from resilience.per_process import PerProcess

logger = logging.getLogger(__name__)

# Two days of minutes: the page's longest window (a day) and the day before it.
RETENTION = timedelta(days=2)

# unnest() of three parallel arrays: one INSERT of any number of rows, in one statement.
_FLUSH = """
WITH expired AS (DELETE FROM retrieval_metric_rollup WHERE minute < %(cutoff)s)
INSERT INTO retrieval_metric_rollup (minute, metric, labels, value)
SELECT %(minute)s, metric, labels::jsonb, value
FROM unnest(%(metrics)s::text[], %(labels)s::text[], %(values)s::float8[])
    AS grown(metric, labels, value)
"""


def minute_of(at: float) -> datetime:
    return datetime.fromtimestamp(at - at % 60, UTC)


class RollupWriter:
    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._lock = threading.Lock()  # the thread's flush and a page's
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None
        self._baseline = rollups.read(rollups.COUNTED)
        self._since = clock()

    def flush(self) -> int:
        """Write what grew since the last flush, under the minute it began in; the rows."""
        with self._lock:
            now = self._clock()
            counted = rollups.read(rollups.COUNTED)
            rows = rollups.increases(self._baseline, counted)
            rows += rollups.levels(rollups.read(rollups.GAUGED))
            if rows:
                _write(rows, minute_of(self._since), minute_of(now) - RETENTION)
            self._baseline, self._since = counted, now
            return len(rows)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="metric-rollups", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop the thread, then write the current minute."""
        self._stopped.set()
        if self._thread is not None:
            self._thread.join()
        self._flush_logged()

    def _run(self) -> None:
        while not self._stopped.wait(self._until_next_minute()):
            self._flush_logged()
            # The thread's own connection: closed between flushes, not held for a minute.
            connection.close()

    def _until_next_minute(self) -> float:
        return 60 - self._clock() % 60

    def _flush_logged(self) -> None:
        try:
            self.flush()
        except Exception:  # the database is down, say: the next flush carries it
            logger.exception("metric roll-ups: flush failed; kept for the next one")


def _write(rows: list[rollups.Row], minute: datetime, cutoff: datetime) -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            _FLUSH,
            {
                "cutoff": cutoff,
                "minute": minute,
                "metrics": [row.metric for row in rows],
                "labels": [row.labels for row in rows],
                "values": [row.value for row in rows],
            },
        )


def _started() -> RollupWriter:
    writer = RollupWriter()
    writer.start()
    atexit.register(writer.stop)
    return writer


# A forked child inherits its parent's writer but not the thread behind it: it starts its
# own, whose baseline is the counts at the fork.
_writer = PerProcess(_started)


def start_in_this_process() -> RollupWriter:
    """This process's writer, started now if it was not; its last flush runs at exit."""
    return _writer.get()


def flush_this_process() -> None:
    """Write this process's increases now (the ops page, so it shows its own process's
    current minute), if it records any."""
    writer = _writer.made()
    if writer is not None:
        writer.flush()


def stop_this_process() -> None:
    """Stop this process's writer, writing its last minute (a Celery pool process that
    the pool stops exits without running atexit)."""
    writer = _writer.forget()
    if writer is not None:
        writer.stop()
