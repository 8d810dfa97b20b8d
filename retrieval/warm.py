"""What a warming task does: the full hybrid search with a generous budget, whose
complete result the search itself caches."""

import asyncio
import dataclasses

from django.conf import settings

from resilience.redis_clients import get_redis
from retrieval import metrics
from retrieval.cache import RedisResultCache, close_async_redis
from retrieval.deadline import BudgetPolicy, SearchDeadline, plan_budgets
from retrieval.hybrid import hybrid_search, writes_done
from retrieval.pg import WARMING_CONNECTIONS, close_pool, connections_named
from retrieval.service import dependencies
from retrieval.types import Mode, Query
from retrieval.warming import job_key, load_job


class AlwaysAllow:
    """Warming runs off the request path: no breaker, no admission limit."""

    def allow(self) -> bool:
        return True

    def try_acquire(self) -> "AlwaysAllow":
        return self

    def record(self, *, failed: bool) -> None:
        pass

    def release(self) -> None:
        pass


async def _no_warming(key: str, query: Query) -> None:
    pass


def warm(key: str) -> str:
    query = load_job(get_redis().get(job_key(key)))
    if query is None:
        metrics.WARMING.labels(event="failed").inc()
        return "expired"
    with connections_named(WARMING_CONNECTIONS):
        mode = asyncio.run(_search(query))
    event = "completed" if mode == Mode.HYBRID else "failed"
    metrics.WARMING.labels(event=event).inc()
    return event


async def _search(query: Query) -> Mode:
    gate = AlwaysAllow()
    deps = dataclasses.replace(
        dependencies(),
        breaker=gate,
        admission=gate,
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
    deadline = SearchDeadline.start(plan_budgets(policy, caller_timeout_ms=None))
    try:
        return (await hybrid_search(query, deadline, deps)).mode
    finally:
        await writes_done()  # the result is what this task is for
        await close_pool()  # this loop's: the task's loop ends with it
        await close_async_redis()
