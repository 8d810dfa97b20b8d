"""What a warming task does: the full hybrid search with a generous budget, whose
complete result the search itself caches.

Invariants: a warming search never runs while the vector breaker is open or half-open
(it would wait on what the breaker keeps searches from, and could take the half-open
probe from a real search), nor behind a lock on the tables it reads, which it gives up on
after `LOCK_WAIT_MS` instead of its whole budget; and it never tells the breaker of its
outcome, which has a budget no request has. A job dropped for either reason is counted
and leaves its key free to be scheduled again. Every task of a process runs on one event
loop, kept in a thread of its own, so its connections outlive the task
(retrieval/warming/kept_loop.py).
"""

import dataclasses

from django.conf import settings
from psycopg.errors import LockNotAvailable

from resilience import redis_keys
from resilience.awaiting import writes_done
from resilience.redis_clients import get_redis
from retrieval import metrics
from retrieval.bounds.admission import Unlimited
from retrieval.bounds.breaker_gate import NeverOpen
from retrieval.bounds.deadline import BudgetPolicy, Deadline, SearchDeadline
from retrieval.cache import RedisResultCache
from retrieval.hybrid import hybrid_search
from retrieval.pg.pool import WARMING_CONNECTIONS, connections_named
from retrieval.pg.statement import fetch_with_local_settings
from retrieval.service import dependencies, vector_breaker
from retrieval.types import Mode, Query
from retrieval.warming.kept_loop import KeptLoop
from retrieval.warming.schedule import load_job, release

# A stalled table is usually locked for seconds (a migration, a rebuild): a warming
# search behind it would hold its worker for its whole budget, one distinct query after
# another. This long is enough to get a lock nobody holds.
LOCK_WAIT_MS = 100
LOCK_PROBE_TAG = "searchsite:warming-probe"
# Every table the search reads: the listings (lexical stage, hydration), their embeddings
# and the lexical stage's term statistics and vocabulary. The statement plans to nothing,
# but opening the tables takes their locks. A lock taken just after it still holds the
# search up to its budget: that is why warming has a worker of its own.
_LOCK_PROBE = (
    "SELECT 1 FROM ingestion_listing, ingestion_listing_embedding,"
    " retrieval_term_statistics, retrieval_corpus_statistics, retrieval_vocabulary WHERE false"
)


async def _no_warming(key: str, query: Query) -> None:
    pass


tasks_loop = KeptLoop("warming-loop")


def warm(key: str) -> str:
    query = load_job(get_redis().get(redis_keys.warming_job(key)))
    if query is None:
        metrics.WARMING.labels(event="failed").inc()
        return "expired"
    if vector_breaker().state() != "closed":
        return _dropped(key, "dropped_breaker_open")
    mode = tasks_loop.run(_warm_unless_locked(query))
    if mode is None:
        return _dropped(key, "dropped_stalled")
    event = "completed" if mode == Mode.HYBRID else "failed"
    metrics.WARMING.labels(event=event).inc()
    return event


def _dropped(key: str, event: str) -> str:
    release(key)
    metrics.WARMING.labels(event=event).inc()
    return event


async def _warm_unless_locked(query: Query) -> Mode | None:
    """The search's mode, or None when a table it reads is locked."""
    # The loop's pool is opened by its first task: in this context, its connections named.
    with connections_named(WARMING_CONNECTIONS):
        try:
            await fetch_with_local_settings(
                LOCK_PROBE_TAG,
                _LOCK_PROBE,
                {},
                Deadline.after(settings.SEARCH_WARMING_BUDGET_MS),
                local={"lock_timeout": f"{LOCK_WAIT_MS}ms"},
            )
        except LockNotAvailable:
            return None
        return await search_unaccounted(query)


async def search_unaccounted(query: Query) -> Mode:
    """`query` searched as warming does: the warming budget for each stage, the result
    cached, and no outcome told to the vector breaker or the admission limit."""
    deps = dataclasses.replace(
        dependencies(),
        breaker=NeverOpen(),
        admission=Unlimited(),
        warm=_no_warming,
        cache=RedisResultCache(rewrite_after_s=0),  # writing the result is the point
    )
    budget = settings.SEARCH_WARMING_BUDGET_MS
    policy = BudgetPolicy(
        objective_ms=budget,
        caller_cap_ms=budget,
        reserve_ms=0,
        vector_budget_ms=budget,
        min_vector_ms=0,
    )
    deadline = SearchDeadline.planned(policy)
    try:
        return (await hybrid_search(query, deadline, deps)).mode
    finally:
        await writes_done()  # the result is what this search is for
