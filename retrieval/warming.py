"""Background cache warming after a vector timeout: one task per cache key, however many
processes and requests time out on it at once.

The task carries only the cache key; the query text waits in Redis beside it, so it never
appears in a broker message or in Celery's logs."""

import asyncio
import dataclasses
import json
from datetime import datetime

from celery import current_app
from redis.exceptions import RedisError

from retrieval import metrics
from retrieval.cache import async_redis
from retrieval.types import DateFilter, Query, SearchFilters

WARM_TASK = "retrieval.tasks.warm_cache"
DEDUP_TTL_S = 60
JOB_TTL_S = 600


def _dedup_key(key: str) -> str:
    return f"searchsite:warming:{key}"


def job_key(key: str) -> str:
    return f"searchsite:warm-job:{key}"


async def schedule_warming(key: str, query: Query) -> None:
    client = async_redis()
    try:
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
    await asyncio.to_thread(current_app.send_task, WARM_TASK, args=[key])
    metrics.WARMING.labels(event="enqueued").inc()


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
