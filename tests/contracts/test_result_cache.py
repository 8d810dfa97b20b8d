"""The ResultCache contract (retrieval/protocols.py), run against the fake that hybrid.py's
tests use (tests/retrieval_fakes.py) and against Redis (retrieval/cache.py):

- a miss is None, and a put is read back whole;
- an entry is never served under another generation's key;
- an unreachable cache is a miss, and a put to it is no error: it is an optimisation.

Then the Redis cache's own promise: it writes a key again only after a while.
"""

from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Protocol

import pytest
from django.test import override_settings

from retrieval.bounds.deadline import Deadline
from retrieval.cache import RedisResultCache, cache_key, close_async_redis
from retrieval.protocols import ResultCache
from retrieval.types import CachedRanking, Query
from tests.conftest import free_port
from tests.factories import FakeClock
from tests.retrieval_fakes import MemoryCache

QUERY = Query("jazz night", "jazz night", 5, "short")
ENTRY = CachedRanking([3, 1, 2], 7, 1_700_000_000.5)


async def cache_get(cache: ResultCache, key: str) -> CachedRanking | None:
    """Every read of the seam goes through here: the one line its signature touches."""
    return await cache.get(key, Deadline.after(1000))


async def cache_put(cache: ResultCache, key: str, ranking: CachedRanking) -> None:
    await cache.put(key, ranking)


class CacheSubject(Protocol):
    @property
    def cache(self) -> ResultCache: ...

    def unreachable(self) -> AbstractAsyncContextManager[None]:
        """While entered, the cache cannot be reached (in Redis: nothing listens where the
        client connects)."""
        ...


class FakeCacheSubject:
    def __init__(self) -> None:
        self.cache = MemoryCache()

    @asynccontextmanager
    async def unreachable(self) -> AsyncIterator[None]:
        self.cache.unreachable = True
        try:
            yield
        finally:
            self.cache.unreachable = False


class RedisCacheSubject:
    def __init__(self) -> None:
        self.cache = RedisResultCache()

    @asynccontextmanager
    async def unreachable(self) -> AsyncIterator[None]:
        await close_async_redis()  # the next client is made for the closed port
        try:
            with override_settings(REDIS_URL=f"redis://127.0.0.1:{free_port()}/0"):
                yield
        finally:
            await close_async_redis()


@pytest.fixture(params=["fake", "redis"])
def subject(request: pytest.FixtureRequest) -> CacheSubject:
    return FakeCacheSubject() if request.param == "fake" else RedisCacheSubject()


class TestResultCache:
    async def test_a_miss_is_none_and_a_put_is_read_back_whole(self, subject: CacheSubject) -> None:
        key = cache_key(QUERY, 7)
        assert await cache_get(subject.cache, key) is None
        await cache_put(subject.cache, key, ENTRY)
        assert await cache_get(subject.cache, key) == ENTRY

    async def test_an_entry_is_never_served_under_another_generations_key(
        self, subject: CacheSubject
    ) -> None:
        await cache_put(subject.cache, cache_key(QUERY, 7), ENTRY)
        assert await cache_get(subject.cache, cache_key(QUERY, 8)) is None

    async def test_an_unreachable_cache_is_a_miss_and_takes_puts_without_error(
        self, subject: CacheSubject
    ) -> None:
        key, other_key = cache_key(QUERY, 7), cache_key(QUERY, 8)
        await cache_put(subject.cache, key, ENTRY)
        async with subject.unreachable():
            assert await cache_get(subject.cache, key) is None
            await cache_put(subject.cache, other_key, ENTRY)
        assert await cache_get(subject.cache, key) == ENTRY  # reachable again, still there


# The Redis cache's own promise.


async def test_the_redis_cache_writes_a_key_again_only_after_a_while() -> None:
    clock = FakeClock()
    cache = RedisResultCache(60, clock=clock)
    key = cache_key(QUERY, 1)
    await cache_put(cache, key, CachedRanking([1, 2], 1, 1.0))
    await cache_put(cache, key, CachedRanking([2, 1], 1, 2.0))  # 0 s later: not written
    assert await cache_get(cache, key) == CachedRanking([1, 2], 1, 1.0)
    clock.advance(60)
    await cache_put(cache, key, CachedRanking([2, 1], 1, 3.0))
    assert await cache_get(cache, key) == CachedRanking([2, 1], 1, 3.0)
