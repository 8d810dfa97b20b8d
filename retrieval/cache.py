"""The result cache in Redis: complete hybrid rankings (ids only) under a key of the
normalised query, k and the active generation.

Invariants: a key names its generation, so an entry of another generation is never
served; only complete hybrid rankings are put; a cache that is unreachable is a miss."""

import asyncio
import hashlib
import json
import logging
import weakref

import redis.asyncio as aioredis
from django.conf import settings
from redis.exceptions import RedisError

from retrieval.types import CachedRanking, Query

log = logging.getLogger(__name__)
_clients: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, aioredis.Redis]" = (
    weakref.WeakKeyDictionary()
)


def cache_key(query: Query, generation: int) -> str:
    digest = hashlib.sha256(query.normalised.encode()).hexdigest()[:32]
    return f"searchsite:results:v1:g{generation}:k{query.k}:{digest}"


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
    async def get(self, key: str) -> CachedRanking | None:
        try:
            raw = await async_redis().get(key)
        except (RedisError, OSError):
            log.warning("result cache unreachable on get")
            return None
        if raw is None:
            return None
        data = json.loads(raw)
        return CachedRanking(data["ranking"], data["generation"], data["created_at"])

    async def put(self, key: str, ranking: CachedRanking) -> None:
        payload = json.dumps(
            {
                "ranking": ranking.ranking,
                "generation": ranking.generation,
                "created_at": ranking.created_at,
            }
        )
        try:
            await async_redis().set(key, payload, ex=settings.SEARCH_CACHE_TTL_S)
        except (RedisError, OSError):
            log.warning("result cache unreachable on put")
