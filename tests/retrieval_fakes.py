"""Injected implementations of the retrieval seams, for contract tests: they answer,
stall until cancelled, or fail, and record what happened to them. No sleeping: a stalled
stage waits on an event that only cancellation ends."""

import asyncio
import time
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from retrieval.admission import AdmissionLimit
from retrieval.deadline import Deadline
from retrieval.hybrid import Dependencies
from retrieval.types import CachedRanking, Candidate, Query, StageTimeoutError


class StageProbe:
    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.cancelled = asyncio.Event()
        self.calls = 0

    async def stall(self) -> None:
        try:
            await asyncio.Event().wait()  # never set: only cancellation ends this
        except asyncio.CancelledError:
            self.cancelled.set()
            raise


class FixedLexical:
    """Answers with fixed ids, fails, or stalls until cancelled."""

    def __init__(self, ids: list[int], *, stall: bool = False, fail: bool = False) -> None:
        self.ids, self.stall, self.fail, self.probe = ids, stall, fail, StageProbe()

    async def search(self, query: Query, limit: int, deadline: Deadline) -> list[Candidate]:
        self.probe.calls += 1
        self.probe.started.set()
        if self.stall:
            await self.probe.stall()
        if self.fail:
            raise RuntimeError("lexical index unavailable")
        return [Candidate(i, 1.0 / (rank + 1)) for rank, i in enumerate(self.ids[:limit])]


class FixedVector:
    """Answers with fixed ids of one generation, fails, or stalls until cancelled."""

    def __init__(
        self,
        ids: list[int],
        *,
        stall: bool = False,
        fail: bool = False,
        server_timeout: bool = False,
        generation: int = 1,
    ) -> None:
        self.ids, self.stall, self.fail, self.generation = ids, stall, fail, generation
        self.server_timeout = server_timeout
        self.probe = StageProbe()

    async def search(
        self, embedding: npt.NDArray[np.float32], generation: int, limit: int, deadline: Deadline
    ) -> list[Candidate]:
        self.probe.calls += 1
        self.probe.started.set()
        if self.stall:
            await self.probe.stall()
        if self.fail:
            raise RuntimeError("vector index unavailable")
        if self.server_timeout:
            raise StageTimeoutError("canceling statement due to statement timeout")
        if generation != self.generation:
            return []
        return [Candidate(i, 1.0 - rank / 100) for rank, i in enumerate(self.ids[:limit])]


class ZeroEmbedder:
    async def embed(self, text: str) -> npt.NDArray[np.float32]:
        return np.zeros(3, dtype=np.float32)


class MemoryCache:
    def __init__(self) -> None:
        self.entries: dict[str, CachedRanking] = {}
        self.puts = 0

    async def get(self, key: str, deadline: Deadline) -> CachedRanking | None:
        return self.entries.get(key)

    async def put(self, key: str, ranking: CachedRanking) -> None:
        self.puts += 1
        self.entries[key] = ranking


@dataclass
class Gate:
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
    gate: Gate | None = None,
    slots: AdmissionLimit | None = None,
    warm: WarmRecorder | None = None,
    generation: int | None = 1,
) -> Dependencies:
    async def active(deadline: Deadline) -> int | None:
        return generation

    return Dependencies(
        lexical=lexical,
        vector=vector,
        embedder=ZeroEmbedder(),
        cache=cache or MemoryCache(),
        active_generation=active,
        breaker=gate or Gate(),
        admission=slots or AdmissionLimit(10),
        warm=warm or WarmRecorder(),
        clock=time.monotonic,
    )
