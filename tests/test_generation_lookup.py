"""The active-generation lookup: cached for a second, and one query for a burst of
searches that all find the cached value stale (the query itself is a fake here: the seam
is the point; the real statement runs in every search test)."""

import asyncio

import pytest

from retrieval import generation
from retrieval.deadline import Deadline
from retrieval.generation import ActiveGeneration, GenerationLookup
from tests.factories import FakeClock

ROW = (7, "sentence-transformers/all-MiniLM-L6-v2", 384)


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
    clock.advance(generation.TTL_S)
    assert await lookup.active(Deadline.after(1000)) == ActiveGeneration(*ROW)
    assert queries == 2
