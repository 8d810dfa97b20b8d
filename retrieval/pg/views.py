"""Refreshing the materialized views that searches read (the lexical stage's vocabulary
and statistics, the suggestions): on one core, and on beat's schedule only when they may
be stale.

`REFRESH ... CONCURRENTLY` computes a view whole and compares it with what it holds, so
searches go on reading it meanwhile, and costs the same whatever changed: at 100,000
listings about 1.9 s for the vocabulary and statistics and 1.6-2.4 s for the suggestions.
Beside searches at half the capacity limit, the ten seconds that held one such refresh
with Postgres' parallel workers had a p99 about 6.5 times the plain steps', with 9-11 % of
the searches falling back and some turned away; on one core, about 1.6 times and none
falling back at the median (docs/reliability.md, "Refreshing the views beside searches").
So a refresh runs without parallel workers, leaving the other core to searches.

Most of a help-center's minutes change no listing, and beat refreshed the suggestions
every minute and the vocabulary every five regardless. So beat asks first whether any
listing was inserted, updated or deleted since the views' last refresh (Postgres'
cumulative counts of the table's changes) and leaves them as they are while none was and
they are younger than SEARCH_VIEWS_MAX_AGE_S; what depends on the clock alone (a listing
that ended) is checked against the clock when searched anyway. The counts are read before
the refresh and show a change only after its commit, so a change they miss was either
committed in time for this refresh or is seen by the next round. Counts that went back
(statistics reset, a crash) or a record that cannot be read (Redis down) refresh.
"""

import contextlib
import time
from collections.abc import Callable, Sequence

import redis
from django.conf import settings
from django.db import connection, transaction

from resilience import redis_keys
from resilience.redis_clients import fast_redis
from retrieval import metrics

_CHANGES = """
SELECT n_tup_ins + n_tup_upd + n_tup_del FROM pg_stat_user_tables
WHERE relid = 'ingestion_listing'::regclass
"""


def refresh(views: Sequence[str]) -> None:
    """Refresh `views` now, in order, one core's worth of Postgres at a time."""
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL max_parallel_workers_per_gather = 0")
        for view in views:
            cursor.execute(f"REFRESH MATERIALIZED VIEW CONCURRENTLY {view}")


def listing_changes() -> int:
    """The listings' inserts, updates and deletes since the statistics began."""
    with connection.cursor() as cursor:
        cursor.execute(_CHANGES)
        row = cursor.fetchone()
    return int(row[0]) if row else 0


def refresh_if_stale(
    views: Sequence[str],
    *,
    changes: Callable[[], int] = listing_changes,
    clock: Callable[[], float] = time.time,
) -> bool:
    """Refresh `views` unless no listing changed since their last refresh and it is younger
    than SEARCH_VIEWS_MAX_AGE_S; whether they were refreshed."""
    key, now, seen_changes = redis_keys.views_refreshed(views[0]), clock(), changes()
    try:
        last = fast_redis().hgetall(key)
    except redis.RedisError:
        last = {}
    if (
        last
        and int(last[b"changes"]) == seen_changes
        and now - float(last[b"at"]) < settings.SEARCH_VIEWS_MAX_AGE_S
    ):
        metrics.VIEW_ROUNDS.labels(views[0], "unchanged").inc()
        return False
    with metrics.VIEW_REFRESH_SECONDS.labels(views[0]).time():
        refresh(views)
    metrics.VIEW_ROUNDS.labels(views[0], "refreshed").inc()
    # Unrecorded, the next round refreshes again: a cost, never a stale view.
    with contextlib.suppress(redis.RedisError):
        fast_redis().hset(key, mapping={"changes": seen_changes, "at": now})
    return True
