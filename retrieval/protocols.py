"""The seams of retrieval. Postgres and Redis implement them; contract tests inject
implementations that stall, fail or answer at will (tests/retrieval/test_retrieval_contract.py), and
each seam has one contract suite run against its fake and its real implementation
(tests/contracts/).

Every stage is a coroutine that must stop its work when cancelled: a real implementation
cancels its SQL on the server, not just the Python side."""

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import numpy.typing as npt

from retrieval.bounds.deadline import Deadline
from retrieval.types import (
    DEFAULT_FILTERS,
    CachedRanking,
    Candidate,
    LexicalResult,
    Query,
    SearchFilters,
)


class LexicalIndex(Protocol):
    async def search(self, query: Query, limit: int, deadline: Deadline) -> LexicalResult:
        """Best lexical candidates first, active listings passing `query.filters` only;
        all of its statements together end by `deadline` (enforced server-side)."""
        ...


class VectorIndex(Protocol):
    async def search(
        self,
        embedding: npt.NDArray[np.float32],
        generation: int,
        limit: int,
        deadline: Deadline,
        filters: SearchFilters = DEFAULT_FILTERS,
    ) -> list[Candidate]:
        """Nearest active listings of `generation` only that pass `filters`, by
        `deadline` (enforced server-side)."""
        ...


class QueryEmbedder(Protocol):
    async def embed(self, text: str) -> npt.NDArray[np.float32]: ...


class ResultCache(Protocol):
    async def get(self, key: str, deadline: Deadline) -> CachedRanking | None:
        """None on a miss, and also when the cache is unreachable or cannot answer by
        `deadline`: it is an optimisation."""
        ...

    async def put(self, key: str, ranking: CachedRanking) -> None: ...


class VectorGate(Protocol):  # the vector stage's breaker, as a search asks and tells it
    def allow(self) -> bool: ...

    def record(self, *, failed: bool) -> None: ...


class Held(Protocol):
    def release(self) -> None: ...


class Admission(Protocol):  # the bound on in-flight vector searches
    def try_acquire(self) -> Held | None: ...


@dataclass
class Dependencies:
    lexical: LexicalIndex
    vector: VectorIndex
    embedder: QueryEmbedder
    cache: ResultCache
    searchable_generation_id: Callable[[Deadline], Awaitable[int | None]]
    breaker: VectorGate
    admission: Admission
    warm: Callable[[str, Query], Awaitable[None]]  # schedule cache warming for a key
    clock: Callable[[], float] = time.monotonic
    # Whether this search's vector stage is watched past its budget, for the what-if of a
    # looser one (ops/whatif.py): a small sample, never while the breaker or door are not
    # at ease.
    watch_past_budget: Callable[[], bool] = lambda: False
