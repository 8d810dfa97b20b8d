"""The active-generation lookup: cached for a second, one query for a burst of searches
that find no value yet, and a stale value answered at once while one query refreshes it
(the query itself is a fake here: the seam is the point; the real statement runs in every
search test)."""

import asyncio

import pytest

from retrieval.bounds.deadline import Deadline
from retrieval.pg import generation
from retrieval.pg.generation import ActiveGeneration, GenerationLookup
from tests.factories import FakeClock

ROW = (7, "sentence-transformers/all-MiniLM-L6-v2", 384, "halfvec")


async def test_a_burst_of_stale_lookups_shares_one_query(monkeypatch: pytest.MonkeyPatch) -> None:
    queries, answer = 0, asyncio.Event()

    async def one_query(*args: object, **kwargs: object) -> list[tuple[object, ...]]:
        nonlocal queries
        queries += 1
        await answer.wait()
        return [ROW]

    monkeypatch.setattr(generation, "fetch_with_local_settings", one_query)
    clock = FakeClock()
    lookup = GenerationLookup(clock=clock)
    burst = [asyncio.create_task(lookup.active(Deadline.after(1000))) for _ in range(20)]
    await asyncio.sleep(0)  # every lookup has found the value stale and is waiting
    answer.set()
    assert set(await asyncio.gather(*burst)) == {ActiveGeneration(*ROW)}
    assert queries == 1
    assert await lookup.active(Deadline.after(1000)) == ActiveGeneration(*ROW)  # cached
    assert queries == 1


async def test_a_stale_value_answers_at_once_while_one_query_refreshes_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rows: list[tuple[object, ...]] = [ROW]
    answer = asyncio.Event()
    answer.set()
    queries = 0

    async def query(*args: object, **kwargs: object) -> list[tuple[object, ...]]:
        nonlocal queries
        queries += 1
        await answer.wait()
        return rows

    monkeypatch.setattr(generation, "fetch_with_local_settings", query)
    clock = FakeClock()
    lookup = GenerationLookup(clock=clock)
    assert await lookup.active(Deadline.after(1000)) == ActiveGeneration(*ROW)
    answer.clear()  # the next query hangs until the test answers it
    rows = [(8, *ROW[1:])]  # a new generation was activated
    clock.advance(generation.TTL_S)
    stale = [await lookup.active(Deadline.after(1000)) for _ in range(5)]
    assert stale == [ActiveGeneration(*ROW)] * 5  # none waited for the query
    await asyncio.sleep(0)  # the refresh starts, and waits for its answer
    assert queries == 2  # one refresh for all of them
    answer.set()
    await asyncio.sleep(0)  # the refresh completes
    await asyncio.sleep(0)
    assert await lookup.active(Deadline.after(1000)) == ActiveGeneration(8, *ROW[1:])
    assert queries == 2


async def test_a_forgotten_value_is_waited_for(monkeypatch: pytest.MonkeyPatch) -> None:
    rows: list[tuple[object, ...]] = [ROW]

    async def query(*args: object, **kwargs: object) -> list[tuple[object, ...]]:
        return rows

    monkeypatch.setattr(generation, "fetch_with_local_settings", query)
    lookup = GenerationLookup(clock=FakeClock())
    assert await lookup.active(Deadline.after(1000)) == ActiveGeneration(*ROW)
    rows = []  # no active generation any more
    lookup.forget()
    assert await lookup.active(Deadline.after(1000)) is None
