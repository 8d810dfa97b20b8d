"""Background cache warming after a vector timeout: one task per cache key, however many
processes and requests time out on it at once.

The task carries only the cache key; the query text waits in Redis beside it, so it never
appears in a broker message or in Celery's logs.

Invariants: warming is work the search can go without, so it never grows without bound.
At most `MAX_QUEUED` tasks wait, however many processes schedule at once (more timeouts
are dropped, counted), a task that waited longer than its de-duplication mark lived
expires unrun, and a job the worker drops (`release`) leaves the key free to be scheduled
again by the next timeout.
"""

import asyncio
import dataclasses
import json
import uuid
from collections.abc import Awaitable, Callable
from datetime import datetime

import redis.asyncio as aioredis
from celery import current_app
from redis.exceptions import RedisError

from resilience import redis_keys
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
# warm an entry for a stall that is over.
MAX_QUEUED = 20
# A place in the queue is reserved before the task is published and given back once it
# is: Celery publishes the message itself, so the bound cannot be checked in the same
# command as the push. The check and the reservation are one script, so schedulers racing
# each other, in any number of processes, cannot all see room for one. A reservation whose
# publisher died before giving it back stops counting after this long.
RESERVATION_TTL_MS = 5000
RESERVATIONS = redis_keys.WARMING_RESERVATIONS
_RESERVE = """
local now = redis.call('TIME')
local now_ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now_ms - tonumber(ARGV[2]))
if redis.call('LLEN', KEYS[1]) + redis.call('ZCARD', KEYS[2]) >= tonumber(ARGV[1]) then
  return 0
end
redis.call('ZADD', KEYS[2], now_ms, ARGV[3])
redis.call('PEXPIRE', KEYS[2], ARGV[2])
return 1
"""

WarmScheduler = Callable[[str, Query], Awaitable[None]]


async def schedule_warming(key: str, query: Query) -> None:
    client = async_redis()
    reservation = uuid.uuid4().hex
    try:
        # EVALSHA, the script sent only if the server does not have it yet.
        room = await client.register_script(_RESERVE)(
            keys=[WARMING_QUEUE, RESERVATIONS], args=[MAX_QUEUED, RESERVATION_TTL_MS, reservation]
        )
        if not room:
            metrics.WARMING.labels(event="dropped_queue_full").inc()
            return
        try:
            await _publish(client, key, query)
        finally:
            await client.zrem(RESERVATIONS, reservation)
    except (RedisError, OSError):
        metrics.WARMING.labels(event="failed").inc()


async def _publish(client: aioredis.Redis, key: str, query: Query) -> None:
    first = await client.set(redis_keys.warming_scheduled(key), "1", nx=True, ex=DEDUP_TTL_S)
    if not first:
        metrics.WARMING.labels(event="deduplicated").inc()
        return
    await client.set(redis_keys.warming_job(key), job_payload(query), ex=JOB_TTL_S)
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
    get_redis().delete(redis_keys.warming_scheduled(key))


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
