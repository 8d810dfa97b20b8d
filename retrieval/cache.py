"""The result cache in Redis: complete hybrid rankings (ids only) under a key of the
normalised query, its filters, k and the active generation.

Invariants: a key names its generation, so an entry of another generation is never
served; only complete hybrid rankings are put; a cache that is unreachable, or that cannot
answer by the search's deadline, is a miss.

A process that wrote a key less than `rewrite_after_s` ago does not write it again: a
popular query would otherwise cost a Redis write per search (0.3-0.5 ms of the event
loop's time at the median, measured), for an entry that only ever serves fallbacks and
whose ids are re-read from Postgres and merged with fresh lexical hits when it does."""

import asyncio
import dataclasses
import hashlib
import json
import logging
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable

import redis.asyncio as aioredis
from django.conf import settings
from redis.exceptions import RedisError

from resilience import redis_keys
from retrieval.bounds.deadline import Deadline
from retrieval.types import CachedRanking, Query

log = logging.getLogger(__name__)
_clients: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, aioredis.Redis]" = (
    weakref.WeakKeyDictionary()
)


def cache_key(query: Query, generation: int) -> str:
    # The filters are part of what was asked: the same words under another filter are
    # another ranking. (The page is not: every page is a slice of the one ranking.)
    asked = f"{query.normalised}\x00{query.filters.key}"
    digest = hashlib.sha256(asked.encode()).hexdigest()[:32]
    return redis_keys.cached_ranking(generation, query.k, digest)


def async_redis() -> aioredis.Redis:
    """One client per event loop: its connections belong to the loop that opened them."""
    loop = asyncio.get_running_loop()
    client = _clients.get(loop)
    if client is None:
        client = aioredis.Redis.from_url(
            settings.REDIS_URL, socket_timeout=0.05, socket_connect_timeout=0.05
        )
        _clients[loop] = client
    return client


async def close_async_redis() -> None:
    loop = asyncio.get_running_loop()
    client = _clients.pop(loop, None)
    if client is not None:
        await client.aclose()


class RedisResultCache:
    def __init__(
        self,
        rewrite_after_s: float = 60.0,
        *,
        remember: int = 10_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._rewrite_after_s = rewrite_after_s
        self._remember = remember
        self._clock = clock
        self._written: OrderedDict[str, float] = OrderedDict()  # key -> when, oldest first

    async def get(self, key: str, deadline: Deadline) -> CachedRanking | None:
        try:
            async with asyncio.timeout(deadline.remaining_ms() / 1000):
                raw = await async_redis().get(key)
        except (RedisError, OSError, TimeoutError):
            log.warning("result cache unreachable on get")
            return None
        if raw is None:
            return None
        return CachedRanking(**json.loads(raw))

    async def put(self, key: str, ranking: CachedRanking) -> None:
        now = self._clock()
        written_at = self._written.get(key)
        if written_at is not None and now - written_at < self._rewrite_after_s:
            return
        payload = json.dumps(dataclasses.asdict(ranking))
        try:
            await async_redis().set(key, payload, ex=settings.SEARCH_CACHE_TTL_S)
        except (RedisError, OSError):
            log.warning("result cache unreachable on put")
            return
        self._written[key] = now
        self._written.move_to_end(key)
        if len(self._written) > self._remember:
            self._written.popitem(last=False)
