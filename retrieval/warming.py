"""Background cache warming after a vector timeout: one task per cache key, however many
processes and requests time out on it at once.

The task carries only the cache key; the query text waits in Redis beside it, so it never
appears in a broker message or in Celery's logs.

Invariants: warming is work the search can go without, so it never grows without bound.
At most `MAX_QUEUED` tasks wait (more timeouts are dropped, counted), a task that waited
longer than its de-duplication mark lived expires unrun, and a job the worker drops
(`release`) leaves the key free to be scheduled again by the next timeout.
"""

import asyncio
import dataclasses
import json
from collections.abc import Awaitable, Callable
from datetime import datetime

from celery import current_app
from redis.exceptions import RedisError

from resilience.redis_clients import get_redis
from resilience.token_bucket import TokenBucket
from retrieval import metrics
from retrieval.cache import async_redis
from retrieval.types import DateFilter, Query, SearchFilters

WARM_TASK = "retrieval.tasks.warm_cache"
# The Redis list Celery keeps the warming queue's messages in (searchsite/celery.py).
WARMING_QUEUE = "warming"
DEDUP_TTL_S = 60
JOB_TTL_S = 600
# During a vector stall every distinct query times out, and one warming worker finishes
# a task in milliseconds to its budget: past this many waiting, the task would mostly
# warm an entry for a stall that is over. The check and the publish are two round trips,
# so schedulers racing each other can overshoot it by how many run at once.
MAX_QUEUED = 20

WarmScheduler = Callable[[str, Query], Awaitable[None]]


def _dedup_key(key: str) -> str:
    return f"searchsite:warming:{key}"


def job_key(key: str) -> str:
    return f"searchsite:warm-job:{key}"


async def schedule_warming(key: str, query: Query) -> None:
    client = async_redis()
    try:
        if await client.llen(WARMING_QUEUE) >= MAX_QUEUED:
            metrics.WARMING.labels(event="dropped_queue_full").inc()
            return
        first = await client.set(_dedup_key(key), "1", nx=True, ex=DEDUP_TTL_S)
        if not first:
            metrics.WARMING.labels(event="deduplicated").inc()
            return
        await client.set(job_key(key), job_payload(query), ex=JOB_TTL_S)
    except (RedisError, OSError):
        metrics.WARMING.labels(event="failed").inc()
        return
    # Publishing is a blocking socket write; keep it off the event loop.
    # By name: services never import tasks. `current_app` is the project's app
    # (searchsite/celery.py): Celery's Django fix-up makes it every thread's default.
    # A task still queued when its mark expires is stale: a later timeout may already
    # have scheduled the key again.
    await asyncio.to_thread(current_app.send_task, WARM_TASK, args=[key], expires=DEDUP_TTL_S)
    metrics.WARMING.labels(event="enqueued").inc()


def schedule_warming_unless(skip: Callable[[], bool], rate: TokenBucket) -> WarmScheduler:
    """`schedule_warming`, except while `skip()` is true (the web process shedding load:
    warming is work it can go without), counted as skipped, and beyond `rate`, counted as
    over_rate.

    The rate is the bound on what warming may take from searches. Each warming search
    costs about as much as the search that timed out (an embedding and a vector search,
    on the same two cores), and under load the timeouts come from load: at 45 searches/s,
    warming every one of them took a fifth of a core and made the share of fallbacks
    rise from 36-38 % to 48-64 %, the 503s from 1-5 to 25-46 a step (docs/reliability.md)."""

    async def schedule(key: str, query: Query) -> None:
        if skip():
            metrics.WARMING.labels(event="skipped").inc()
            return
        if not rate.take():
            metrics.WARMING.labels(event="over_rate").inc()
            return
        await schedule_warming(key, query)

    return schedule


def release(key: str) -> None:
    """Forget that `key` is being warmed: the worker dropped its job, and the next
    timeout on it may schedule it again."""
    get_redis().delete(_dedup_key(key))


def job_payload(query: Query) -> str:
    """What waits in Redis beside a warming task: the query, as `load_job` reads it."""
    return json.dumps(dataclasses.asdict(query), default=datetime.isoformat)


def load_job(raw: bytes | str | None) -> Query | None:
    if raw is None:
        return None
    fields = json.loads(raw)
    filters = fields.pop("filters")
    dates = filters.pop("dates")
    del dates["key"]  # made from the rest
    for bound in ("ends_after", "starts_before"):
        if dates[bound] is not None:
            dates[bound] = datetime.fromisoformat(dates[bound])
    kinds = tuple(filters.pop("kinds"))
    return Query(**fields, filters=SearchFilters(dates=DateFilter(**dates), kinds=kinds, **filters))
