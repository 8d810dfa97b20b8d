"""The active index generation, as the query embedder can use it.

Looked up at most once a second per process: a search must not pay a round trip for a
value that changes a few times a year, and an activation is seen everywhere within a
second and one lookup. A value older than that still answers at once while one lookup
refreshes it behind the searches (stale while revalidating): waiting for the refresh put
a database round trip, pool wait included, into the vector budget of every search that
arrived during it, once a second. Only a process that has no value yet (its first search,
or after `forget`) waits for the lookup. The clock is injectable so tests can move past
the cache without sleeping.
"""

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass

from ingestion.models import Audience
from resilience.single_flight import SingleFlight
from retrieval.bounds.deadline import Deadline
from retrieval.pg.route import PRIMARY, Route, Server, routed
from retrieval.pg.statement import GENERATION_TAG, fetch_with_local_settings

TTL_S = 1.0


@dataclass(frozen=True)
class ActiveGeneration:
    id: int
    embedding_model: str
    dimensions: int
    vector_type: str  # what its HNSW index holds: the vector stage casts to it


class GenerationLookup:
    """The active generation as `server` sees it: a replica serves a generation only once
    it has replayed its activation (and with it, every vector of it)."""

    def __init__(
        self,
        audience: str = Audience.PUBLIC,
        clock: Callable[[], float] = time.monotonic,
        server: Server = PRIMARY,
    ) -> None:
        self._audience = audience
        self._server = server
        self._clock = clock
        self._value: ActiveGeneration | None = None
        self._fetched_at = float("-inf")
        # The lookup in flight on each event loop: a burst of searches that all find the
        # value stale shares one query, instead of each asking the pool for a connection
        # at once (twenty concurrent searches on a cold pool timed out waiting for them).
        self._fetching: SingleFlight[ActiveGeneration | None] = SingleFlight()

    async def active(self, deadline: Deadline) -> ActiveGeneration | None:
        if self._clock() - self._fetched_at < TTL_S:
            return self._value
        fetching = self._fetching.run(lambda: self._fetch(deadline), name="generation-lookup")
        if self._fetched_at > float("-inf"):
            return self._value  # stale, and being refreshed
        # Shielded: a caller that gives up (its deadline, or its client gone) leaves the
        # shared lookup to the others; the lookup is bounded by its own statement_timeout.
        return await asyncio.wait_for(asyncio.shield(fetching), deadline.remaining_ms() / 1000)

    async def _fetch(self, deadline: Deadline) -> ActiveGeneration | None:
        with routed(Route(self._server, fixed=True)):
            rows = await fetch_with_local_settings(
                GENERATION_TAG,
                "SELECT id, embedding_model, dimensions, vector_type FROM ingestion_indexgeneration"
                " WHERE state = 'active' AND audience = %(audience)s",
                {"audience": self._audience},
                deadline,
            )
        self._value = ActiveGeneration(*rows[0]) if rows else None
        if self._value is not None:
            _VECTOR_TYPES[self._value.id] = self._value.vector_type
        self._fetched_at = self._clock()
        return self._value

    def forget(self) -> None:
        self._fetched_at = float("-inf")


# A generation's vector type is fixed when it is made: kept for the life of the process,
# learnt from each lookup of the active generation, so the vector stage of a search never
# asks for it.
_VECTOR_TYPES: dict[int, str] = {}


async def vector_type(generation: int, deadline: Deadline) -> str:
    """What `generation`'s HNSW index holds, asked of the database only the first time
    for a generation no lookup has seen (a judged collection's, a benchmark's)."""
    known = _VECTOR_TYPES.get(generation)
    if known is None:
        rows = await fetch_with_local_settings(
            GENERATION_TAG,
            "SELECT vector_type FROM ingestion_indexgeneration WHERE id = %(id)s",
            {"id": generation},
            deadline,
        )
        if not rows:  # no such generation: no rows of it to find either way
            return "vector"
        known = _VECTOR_TYPES[generation] = str(rows[0][0])
    return known
