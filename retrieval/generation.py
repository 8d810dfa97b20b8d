"""The active index generation, as the query embedder can use it.

Looked up at most once a second per process: a search must not pay a round trip for a
value that changes a few times a year, and an activation is seen everywhere within a
second. The clock is injectable so tests can move past the cache without sleeping.
"""

import time
from collections.abc import Callable
from dataclasses import dataclass

from retrieval.pg import connection

TTL_S = 1.0


@dataclass(frozen=True)
class ActiveGeneration:
    id: int
    embedding_model: str
    dimensions: int


class GenerationLookup:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._value: ActiveGeneration | None = None
        self._fetched_at = float("-inf")

    async def active(self, timeout_s: float) -> ActiveGeneration | None:
        if self._clock() - self._fetched_at < TTL_S:
            return self._value
        async with connection(timeout_s) as conn:
            cursor = await conn.execute(
                "SELECT id, embedding_model, dimensions FROM ingestion_indexgeneration"
                " WHERE state = 'active'"
            )
            row = await cursor.fetchone()
        self._value = ActiveGeneration(*row) if row else None
        self._fetched_at = self._clock()
        return self._value

    def forget(self) -> None:
        self._fetched_at = float("-inf")
