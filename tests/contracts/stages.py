"""What the lexical and the vector stage both promise about time, written once:

- a search that has to wait (in Postgres, on a lock nobody releases) ends with
  `StageTimeoutError` at its own timeout, and leaves nothing running;
- a cancelled search leaves nothing running (in Postgres: the cancel reached the server).

hybrid.py relies on both: it counts the first as the stage's timeout, and cancels a stage it
stops waiting for. Each stage's contract class inherits `StageDeadlineContract`, says how
to make `one_search`, and gives a `subject` fixture keeping `StageSubject`, once for the fake
and once for Postgres.
"""

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, Generic, Protocol, TypeVar

import psycopg
import pytest

from retrieval.types import Candidate, StageTimeoutError
from tests.retrieval_fakes import FixedLexical, FixedVector
from tests.search_fixtures import statements_running

Search = Callable[[float], Coroutine[Any, Any, list[Candidate]]]  # budget_ms -> candidates


class StageSubject(Protocol):
    async def block(self) -> None:
        """From now on, searches have to wait (in Postgres, on a lock nobody releases)."""
        ...

    async def running(self) -> int:
        """How many of this stage's searches are running (in Postgres, its statements in
        pg_stat_activity)."""
        ...


Subject = TypeVar("Subject", bound=StageSubject)


class StageDeadlineContract(Generic[Subject]):
    async def one_search(self, subject: Subject) -> Search:
        """Data for a search that finds something, and that search with a given budget."""
        raise NotImplementedError

    async def test_a_search_that_waits_ends_at_its_own_timeout(self, subject: Subject) -> None:
        search = await self.one_search(subject)
        await search(1000)  # the pool's connections exist before the clock starts
        await subject.block()
        loop = asyncio.get_running_loop()
        started = loop.time()
        with pytest.raises(StageTimeoutError):
            await asyncio.wait_for(search(50), 5)  # TimeoutError instead if it waits on
        assert loop.time() - started < 1.0
        assert await subject.running() == 0

    async def test_a_cancelled_search_leaves_nothing_running(self, subject: Subject) -> None:
        search = await self.one_search(subject)
        await subject.block()
        task = asyncio.create_task(search(60_000))
        await _until(subject, 1, "the search to wait")
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        # Still blocked: only a cancel that reached the server ends the statement.
        await _until(subject, 0, "the search to end")


async def _until(subject: StageSubject, running: int, what: str) -> None:
    """Poll for a state another backend brings about, for at most 10 s."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 10
    while await subject.running() != running:
        assert loop.time() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.01)


def assert_best_first(found: list[Candidate], limit: int) -> None:
    assert len(found) <= limit
    assert len({c.listing_id for c in found}) == len(found)
    scores = [c.score for c in found]
    assert scores == sorted(scores, reverse=True)


FakeIndex = TypeVar("FakeIndex", FixedLexical, FixedVector)


class FakeStage(Generic[FakeIndex]):
    """A fake stage's side of `StageSubject`: `locked`, it waits until cancelled or its
    timeout passes, and its probe counts the searches in flight."""

    def __init__(self, index: FakeIndex) -> None:
        self.index: FakeIndex = index

    async def block(self) -> None:
        self.index.locked = True

    async def running(self) -> int:
        return self.index.probe.in_flight


class PostgresStage:
    """A Postgres stage's side of `StageSubject`: a lock on the table it reads, held by a
    connection of its own until `close`, and its statements (opened by `tag`) in
    pg_stat_activity."""

    def __init__(self, database_url: str, table: str, tag: str) -> None:
        self._url, self._table, self._tag = database_url, table, tag
        self._holder: psycopg.AsyncConnection | None = None

    async def block(self) -> None:
        self._holder = await psycopg.AsyncConnection.connect(self._url)
        await self._holder.execute(f"LOCK TABLE {self._table} IN ACCESS EXCLUSIVE MODE")

    async def running(self) -> int:
        return await statements_running(self._url, self._tag)

    async def close(self) -> None:
        if self._holder is not None:
            await self._holder.rollback()
            await self._holder.close()
