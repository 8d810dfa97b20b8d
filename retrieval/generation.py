"""The active index generation, as the query embedder can use it.

Looked up at most once a second per process: a search must not pay a round trip for a
value that changes a few times a year, and an activation is seen everywhere within a
second. The clock is injectable so tests can move past the cache without sleeping.
"""

import time
from collections.abc import Callable
from dataclasses import dataclass

from retrieval.deadline import Deadline
from retrieval.pg import GENERATION_TAG, fetch_with_local_settings

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

    async def active(self, deadline: Deadline) -> ActiveGeneration | None:
        if self._clock() - self._fetched_at < TTL_S:
            return self._value
        rows = await fetch_with_local_settings(
            GENERATION_TAG,
            "SELECT id, embedding_model, dimensions FROM ingestion_indexgeneration"
            " WHERE state = 'active' AND audience = 'public'",
            {},
            deadline,
        )
        self._value = ActiveGeneration(*rows[0]) if rows else None
        self._fetched_at = self._clock()
        return self._value

    def forget(self) -> None:
        self._fetched_at = float("-inf")
