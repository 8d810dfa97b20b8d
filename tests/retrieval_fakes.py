"""Injected implementations of the retrieval seams: they answer, stall until cancelled, wait
as behind a lock, or fail, and record what happened to them. No sleeping: a stalled stage
waits on an event that only cancellation (or, behind a lock, its own timeout) ends.

They keep the seams' contracts as the real implementations do (tests/contracts/), so what
tests/retrieval/test_retrieval_contract.py proves with them holds for Postgres and Redis too."""

import asyncio
import hashlib
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from ingestion.embedding import DIMENSIONS
from retrieval.bounds.admission import AdmissionLimit
from retrieval.bounds.deadline import Deadline
from retrieval.protocols import Dependencies
from retrieval.types import (
    DEFAULT_FILTERS,
    CachedRanking,
    Candidate,
    LexicalResult,
    Query,
    SearchFilters,
    StageTimeoutError,
)

_SERVER_TIMEOUT = "canceling statement due to statement timeout"  # Postgres' words


class StageProbe:
    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.cancelled = asyncio.Event()
        self.calls = 0
        self.in_flight = 0  # searches started and not yet ended, however they ended

    @asynccontextmanager
    async def searching(
        self, *, stall: bool, locked: bool, deadline: Deadline
    ) -> AsyncIterator[None]:
        """Count a search in while it runs, having waited as it is told to: until
        cancelled (`stall`, as an HNSW scan its statement_timeout cannot cut), or until
        cancelled or `deadline` passes (`locked`, as a statement waiting on a lock)."""
        self.calls += 1
        self.in_flight += 1
        self.started.set()
        try:
            if stall or locked:
                await self._wait(None if stall else deadline.remaining_ms() / 1000)
            yield
        finally:
            self.in_flight -= 1

    async def _wait(self, timeout_s: float | None) -> None:
        try:
            await asyncio.wait_for(asyncio.Event().wait(), timeout_s)  # never set
        except asyncio.CancelledError:
            self.cancelled.set()
            raise
        except TimeoutError:
            raise StageTimeoutError(_SERVER_TIMEOUT) from None


class FixedLexical:
    """Answers with fixed ids, best first, except those withdrawn since; or stalls until
    cancelled; or, `locked`, waits until cancelled or its deadline passes; or fails."""

    def __init__(
        self, ids: list[int], *, stall: bool = False, locked: bool = False, fail: bool = False
    ) -> None:
        self.ids, self.stall, self.locked, self.fail = ids, stall, locked, fail
        self.probe = StageProbe()
        self.withdrawn: set[int] = set()

    async def search(self, query: Query, limit: int, deadline: Deadline) -> LexicalResult:
        async with self.probe.searching(stall=self.stall, locked=self.locked, deadline=deadline):
            if self.fail:
                raise RuntimeError("lexical index unavailable")
            active = [i for i in self.ids if i not in self.withdrawn]
            return LexicalResult(
                [Candidate(i, 1.0 / (rank + 1)) for rank, i in enumerate(active[:limit])]
            )


class FixedVector:
    """Answers with fixed ids, nearest first, for each generation it holds (`ids` for
    `generation` to begin with), except those withdrawn since; or fails, or stalls until
    cancelled, or, `locked`, waits until cancelled or its deadline passes."""

    def __init__(
        self,
        ids: list[int],
        *,
        stall: bool = False,
        locked: bool = False,
        fail: bool = False,
        server_timeout: bool = False,
        generation: int = 1,
    ) -> None:
        self.rankings: dict[int, list[int]] = {generation: ids}
        self.withdrawn: set[int] = set()
        self.stall, self.locked, self.fail = stall, locked, fail
        self.server_timeout = server_timeout
        self.probe = StageProbe()

    async def search(
        self,
        embedding: npt.NDArray[np.float32],
        generation: int,
        limit: int,
        deadline: Deadline,
        filters: SearchFilters = DEFAULT_FILTERS,
    ) -> list[Candidate]:
        async with self.probe.searching(stall=self.stall, locked=self.locked, deadline=deadline):
            if self.fail:
                raise RuntimeError("vector index unavailable")
            if self.server_timeout:
                raise StageTimeoutError(_SERVER_TIMEOUT)
            ranking = self.rankings.get(generation, [])
            nearest = [i for i in ranking if i not in self.withdrawn][:limit]
            return [Candidate(i, 1.0 - rank / 100) for rank, i in enumerate(nearest)]


class TextSeededEmbedder:
    """A unit vector of the model's dimensions, the same for the same text, as the model's;
    seeded by the text's digest rather than computed from its meaning."""

    async def embed(self, text: str) -> npt.NDArray[np.float32]:
        seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")
        vector = np.random.default_rng(seed).normal(size=DIMENSIONS)
        return (vector / np.linalg.norm(vector)).astype(np.float32)


class MemoryCache:
    """A dict; `unreachable`, it misses and drops writes, as the Redis cache does when
    Redis is down."""

    def __init__(self) -> None:
        self.entries: dict[str, CachedRanking] = {}
        self.puts = 0
        self.unreachable = False

    async def get(self, key: str, deadline: Deadline) -> CachedRanking | None:
        return None if self.unreachable else self.entries.get(key)

    async def put(self, key: str, ranking: CachedRanking) -> None:
        self.puts += 1
        if not self.unreachable:
            self.entries[key] = ranking


@dataclass
class FixedBreaker:
    open_: bool = False
    outcomes: list[bool] = field(default_factory=list)

    def allow(self) -> bool:
        return not self.open_

    def record(self, *, failed: bool) -> None:
        self.outcomes.append(failed)


@dataclass
class WarmRecorder:
    keys: list[str] = field(default_factory=list)

    async def __call__(self, key: str, query: Query) -> None:
        self.keys.append(key)


def dependencies(
    lexical: FixedLexical,
    vector: FixedVector,
    *,
    cache: MemoryCache | None = None,
    breaker: FixedBreaker | None = None,
    slots: AdmissionLimit | None = None,
    warm: WarmRecorder | None = None,
    generation: int | None = 1,
) -> Dependencies:
    async def active(deadline: Deadline) -> int | None:
        return generation

    return Dependencies(
        lexical=lexical,
        vector=vector,
        embedder=TextSeededEmbedder(),
        cache=cache or MemoryCache(),
        searchable_generation_id=active,
        breaker=breaker or FixedBreaker(),
        admission=slots or AdmissionLimit(10),
        warm=warm or WarmRecorder(),
        clock=time.monotonic,
    )
