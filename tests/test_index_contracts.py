"""The retrieval seams' contracts (retrieval/protocols.py), run against the real Postgres and
Redis implementations, and against the injected ones wherever a promise applies to them too.

- Lexical and vector indexes: at most `limit` distinct candidates, best first; the vector
  index never returns another generation's rows; a search waiting on a lock ends with
  `StageTimeoutError` at its server-side timeout, and a cancelled search leaves nothing
  running in Postgres.
- Result caches: a miss is None, a put is read back whole, and an unreachable cache is a
  miss, never an error.
"""

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable

import numpy as np
import psycopg
import pytest
from asgiref.sync import sync_to_async
from django.test import override_settings

from ingestion import generations
from ingestion.models import Listing, ListingEmbedding
from retrieval import pg_lexical, pg_vector, vocabulary
from retrieval.cache import RedisResultCache, close_async_redis
from retrieval.deadline import Deadline
from retrieval.pg import LEXICAL_TAG, VECTOR_TAG, connection
from retrieval.pg_lexical import PgLexicalIndex
from retrieval.pg_vector import PgVectorIndex
from retrieval.protocols import ResultCache
from retrieval.types import CachedRanking, Candidate, Query, StageTimeoutError
from tests.factories import FakeClock
from tests.retrieval_fakes import FixedLexical, FixedVector, MemoryCache

pytestmark = pytest.mark.django_db(transaction=True)

DIMS = 8
FESTIVAL = Query("festival", "festival", 10, "short")


def _unit(seed: int) -> np.ndarray:
    vector = np.random.default_rng(seed).normal(size=DIMS).astype(np.float32)
    return vector / np.linalg.norm(vector)


@sync_to_async
def _listings(descriptions_only: int, in_titles: int) -> tuple[list[int], list[int]]:
    """Listings matching "festival" only in their description, made first (so a scan in
    physical order meets them first), then listings with it in their title."""
    body = [
        Listing.objects.create(title=f"Walk {n}", description="A walk to the festival.").pk
        for n in range(descriptions_only)
    ]
    titled = [
        Listing.objects.create(title=f"Festival night {n}", description="Music.").pk
        for n in range(in_titles)
    ]
    return body, titled


@sync_to_async
def _embedded(count: int) -> tuple[int, int]:
    """`count` listings with vectors in one generation and the same listings in another;
    returns the two generations' ids."""
    first = generations.create_generation("contract-test", DIMS)
    second = generations.create_generation("contract-test", DIMS)
    for n in range(count):
        listing = Listing.objects.create(title=f"Listing {n}")
        for generation in (first, second):
            ListingEmbedding.objects.create(
                listing=listing,
                generation=generation,
                embedding=_unit(n).tolist(),
                content_version=1,
                embedded_at=listing.created_at,
            )
    return first.pk, second.pk


def _assert_best_first(found: list[Candidate], limit: int) -> None:
    assert len(found) <= limit
    assert len({c.listing_id for c in found}) == len(found)
    scores = [c.score for c in found]
    assert scores == sorted(scores, reverse=True)


# Lexical indexes.


async def test_the_lexical_contract_holds_for_the_injected_index() -> None:
    found = await FixedLexical([4, 2, 9, 1]).search(FESTIVAL, 3, Deadline.after(100))
    _assert_best_first(found, 3)


async def test_postgres_lexical_results_are_limited_and_best_first() -> None:
    await _listings(descriptions_only=4, in_titles=4)
    found = await PgLexicalIndex().search(FESTIVAL, 5, Deadline.after(1000))
    _assert_best_first(found, 5)
    assert len(found) == 5


async def test_when_matches_exceed_the_pool_title_matches_are_the_ones_ranked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _, titled = await _listings(descriptions_only=6, in_titles=3)
    monkeypatch.setattr(pg_lexical, "POOL", 3)
    found = await PgLexicalIndex().search(FESTIVAL, 10, Deadline.after(1000))
    assert sorted(c.listing_id for c in found) == sorted(titled)


async def test_when_matches_fit_in_the_pool_every_match_is_ranked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    body, titled = await _listings(descriptions_only=2, in_titles=2)
    monkeypatch.setattr(pg_lexical, "POOL", 4)  # no title match may take a second place
    found = await PgLexicalIndex().search(FESTIVAL, 10, Deadline.after(1000))
    assert sorted(c.listing_id for c in found) == sorted(body + titled)
    assert {c.listing_id for c in found[:2]} == set(titled)  # title weight ranks first


async def test_the_prepared_statements_answer_as_the_statements_they_stand_for(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    await _listings(descriptions_only=3, in_titles=3)
    await sync_to_async(vocabulary.refresh)()
    for query in (FESTIVAL, Query("festivl walk", "festivl walk", 10, "short")):
        prepared = await PgLexicalIndex().search(query, 10, Deadline.after(1000))
        async with connection(1) as conn:
            cursor = await conn.execute("SELECT name FROM pg_prepared_statements")
            names = {row[0] for row in await cursor.fetchall()}
        assert {name for name, _ in pg_lexical._PREPARED.values()} <= names
        with monkeypatch.context() as patched:
            patched.setattr(
                pg_lexical, "_PREPARED", dict.fromkeys(pg_lexical._PREPARED, ("none", ""))
            )
            assert await PgLexicalIndex().search(query, 10, Deadline.after(1000)) == prepared
        assert prepared  # the second query is answered through spelling correction


# Vector indexes.


async def test_the_vector_contract_holds_for_the_injected_index() -> None:
    index = FixedVector([5, 3, 8], generation=1)
    _assert_best_first(await index.search(_unit(0), 1, 2, Deadline.after(100)), 2)
    assert await index.search(_unit(0), 2, 2, Deadline.after(100)) == []


async def test_postgres_vector_results_are_nearest_first_and_of_one_generation_only() -> None:
    first, second = await _embedded(12)
    index = PgVectorIndex()
    found = await index.search(_unit(3), first, 5, Deadline.after(1000))
    _assert_best_first(found, 5)
    assert found[0].score == pytest.approx(1.0, abs=1e-5)  # the listing made from seed 3
    ids_first = {c.listing_id for c in found}
    assert ids_first == {
        c.listing_id for c in await index.search(_unit(3), second, 5, Deadline.after(1000))
    }
    assert await index.search(_unit(3), second + 1, 5, Deadline.after(1000)) == []
    await ListingEmbedding.objects.filter(generation_id=second).adelete()
    assert await index.search(_unit(3), second, 5, Deadline.after(1000)) == []
    assert {
        c.listing_id for c in await index.search(_unit(3), first, 5, Deadline.after(1000))
    } == ids_first


async def test_postgres_reads_back_every_query_vector_value_exactly() -> None:
    values = np.concatenate(
        [
            np.random.default_rng(7).normal(size=380),
            [1e-38, -3.4e38, 1 / 3, -0.0],  # tiny, huge, no short decimal, signed zero
        ]
    ).astype(np.float32)
    async with connection(1.0) as conn:
        cursor = await conn.execute("SELECT %s::vector::real[]", [pg_vector.vector_text(values)])
        row = await cursor.fetchone()
    assert row is not None
    assert np.array_equal(np.asarray(row[0], dtype=np.float32), values)


# Both indexes, against a lock nobody releases.

Search = Callable[[float], Awaitable[list[Candidate]]]


@pytest.fixture
async def lock(test_database_url: str) -> AsyncIterator[Callable[[str], Awaitable[None]]]:
    holder = await psycopg.AsyncConnection.connect(test_database_url)

    async def take(table: str) -> None:
        await holder.execute(f"LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE")

    yield take
    await holder.rollback()
    await holder.close()


async def _stage(kind: str) -> tuple[str, str, Search]:
    """The table a stage reads, the tag of its statements, and a search with a given
    server-side timeout."""
    if kind == "lexical":
        await _listings(descriptions_only=1, in_titles=1)
        return (
            "ingestion_listing",
            LEXICAL_TAG,
            lambda timeout_ms: PgLexicalIndex().search(FESTIVAL, 5, Deadline.after(timeout_ms)),
        )
    first, _ = await _embedded(3)
    return (
        "ingestion_listing_embedding",
        VECTOR_TAG,
        lambda timeout_ms: PgVectorIndex().search(_unit(1), first, 5, Deadline.after(timeout_ms)),
    )


async def _running(url: str, tag: str) -> int:
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as observer:
        cursor = await observer.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
            " AND pid <> pg_backend_pid() AND state = 'active' AND query LIKE %s",
            [f"/* {tag} */%"],
        )
        row = await cursor.fetchone()
    return int(row[0]) if row else 0


@pytest.mark.parametrize("kind", ["lexical", "vector"])
async def test_a_search_waiting_on_a_lock_ends_at_its_server_side_timeout(
    kind: str, lock: Callable[[str], Awaitable[None]], test_database_url: str
) -> None:
    table, tag, search = await _stage(kind)
    await search(1000)  # the pool's connections exist before the clock starts
    await lock(table)
    started = asyncio.get_running_loop().time()
    with pytest.raises(StageTimeoutError):
        await asyncio.wait_for(search(50), 5)  # TimeoutError instead if the server waits on
    assert asyncio.get_running_loop().time() - started < 1.0
    assert await _running(test_database_url, tag) == 0


@pytest.mark.parametrize("kind", ["lexical", "vector"])
async def test_a_cancelled_search_leaves_nothing_running(
    kind: str, lock: Callable[[str], Awaitable[None]], test_database_url: str
) -> None:
    table, tag, search = await _stage(kind)
    await lock(table)
    task = asyncio.create_task(search(60_000))
    await _until(lambda n: n == 1, test_database_url, tag, "the search to wait on the lock")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    # The lock is still held: only a cancel that reached the server ends the statement.
    await _until(lambda n: n == 0, test_database_url, tag, "the statement to end")


async def _until(wanted: Callable[[int], bool], url: str, tag: str, what: str) -> None:
    """Poll pg_stat_activity for a state another backend brings about, for at most 10 s."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 10
    while not wanted(await _running(url, tag)):
        assert loop.time() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.01)


# Result caches.


@pytest.fixture(params=["memory", "redis"])
def cache(request: pytest.FixtureRequest) -> ResultCache:
    return MemoryCache() if request.param == "memory" else RedisResultCache()


async def test_a_cache_misses_then_returns_what_was_put(cache: ResultCache) -> None:
    key = "searchsite:results:contract"
    assert await cache.get(key, Deadline.after(1000)) is None
    entry = CachedRanking([3, 1, 2], 7, 1_700_000_000.5)
    await cache.put(key, entry)
    assert await cache.get(key, Deadline.after(1000)) == entry


async def test_the_redis_cache_writes_a_key_again_only_after_a_while() -> None:
    clock = FakeClock()
    cache = RedisResultCache(60, clock=clock)
    key = "searchsite:results:rewrite"
    await cache.put(key, CachedRanking([1, 2], 1, 1.0))
    await cache.put(key, CachedRanking([2, 1], 1, 2.0))  # 0 s later: not written
    assert await cache.get(key, Deadline.after(1000)) == CachedRanking([1, 2], 1, 1.0)
    clock.advance(60)
    await cache.put(key, CachedRanking([2, 1], 1, 3.0))
    assert await cache.get(key, Deadline.after(1000)) == CachedRanking([2, 1], 1, 3.0)


async def test_an_unreachable_redis_cache_is_a_miss_not_an_error() -> None:
    await close_async_redis()
    with override_settings(REDIS_URL="unix:///nonexistent/redis.sock"):
        cache = RedisResultCache()
        await cache.put("searchsite:results:contract", CachedRanking([1], 1, 0.0))
        assert await cache.get("searchsite:results:contract", Deadline.after(1000)) is None
        await close_async_redis()
