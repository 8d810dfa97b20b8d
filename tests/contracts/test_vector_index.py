"""The VectorIndex contract (retrieval/protocols.py), run against the fake that hybrid.py's
tests use (tests/retrieval_fakes.py) and against Postgres (retrieval/pg/vector.py):

- only the rows of the generation asked for: each generation answers its own order, a
  generation without rows (never made, or deleted) answers nothing;
- at most `limit` distinct candidates, nearest first;
- only active listings, and withdrawn ones never take a slot: `limit` are still answered;
- a search that has to wait ends with `StageTimeoutError` at its own timeout, and a
  cancelled one leaves nothing running (tests/contracts/stages.py).

Then the Postgres index's own promises: cosine similarity scores, exact query vectors.
"""

import itertools
import math
from collections.abc import AsyncIterator
from typing import Protocol

import numpy as np
import numpy.typing as npt
import pytest
from asgiref.sync import sync_to_async
from django.utils import timezone

from ingestion import generations
from ingestion.models import Listing, ListingEmbedding
from retrieval.bounds.deadline import Deadline
from retrieval.pg import vector as pg_vector
from retrieval.pg.pool import connection
from retrieval.pg.statement import VECTOR_TAG
from retrieval.pg.vector import PgVectorIndex
from retrieval.protocols import VectorIndex
from retrieval.types import Candidate
from tests.contracts.stages import (
    FakeStage,
    PostgresStage,
    Search,
    StageDeadlineContract,
    StageSubject,
    assert_best_first,
)
from tests.retrieval_fakes import FixedVector

DIMS = 8
BUDGET_MS = 1000.0
STEP_RADIANS = 0.1  # between one listing's vector and the next one's, seen from the query


def at_angle(radians: float) -> npt.NDArray[np.float32]:
    """A unit vector `radians` away from QUERY (whose cosine similarity to it is cos)."""
    vector = np.zeros(DIMS, dtype=np.float32)
    vector[0], vector[1] = math.cos(radians), math.sin(radians)
    return vector


QUERY = at_angle(0)


async def vector_search(
    index: VectorIndex,
    embedding: npt.NDArray[np.float32],
    generation: int,
    limit: int,
    budget_ms: float,
) -> list[Candidate]:
    """Every call of the seam goes through here: the one line its signature touches."""
    return await index.search(embedding, generation, limit, Deadline.after(budget_ms))


class VectorSubject(StageSubject, Protocol):
    @property
    def index(self) -> VectorIndex: ...

    async def listings(self, count: int) -> list[int]: ...

    async def generation(self) -> int:
        """A new generation, without rows."""
        ...

    async def embed(self, generation: int, nearest_first: list[int]) -> None:
        """Rows of `generation` for these listings, each STEP_RADIANS farther from QUERY
        than the one before."""
        ...

    async def delete(self, generation: int) -> None:
        """Delete every row of `generation`."""
        ...

    async def withdraw(self, listing_id: int) -> None: ...


class FakeVectorSubject(FakeStage[FixedVector]):
    def __init__(self) -> None:
        super().__init__(FixedVector([], generation=0))
        self._ids = itertools.count(1)

    async def listings(self, count: int) -> list[int]:
        return [next(self._ids) for _ in range(count)]

    async def generation(self) -> int:
        return next(self._ids)

    async def embed(self, generation: int, nearest_first: list[int]) -> None:
        self.index.rankings[generation] = nearest_first  # the fake answers in this order

    async def delete(self, generation: int) -> None:
        del self.index.rankings[generation]

    async def withdraw(self, listing_id: int) -> None:
        self.index.withdrawn.add(listing_id)


class PostgresVectorSubject(PostgresStage):
    def __init__(self, database_url: str) -> None:
        super().__init__(database_url, "ingestion_listing_embedding", VECTOR_TAG)
        self.index = PgVectorIndex()

    async def listings(self, count: int) -> list[int]:
        return [(await Listing.objects.acreate(title=f"Listing {n}")).pk for n in range(count)]

    async def generation(self) -> int:
        made = await sync_to_async(generations.create_generation)("contract-test", DIMS)
        return made.pk

    async def embed(self, generation: int, nearest_first: list[int]) -> None:
        await ListingEmbedding.objects.abulk_create(
            ListingEmbedding(
                listing_id=listing,
                generation_id=generation,
                embedding=at_angle(step * STEP_RADIANS).tolist(),
                content_version=1,
                embedded_at=timezone.now(),
            )
            for step, listing in enumerate(nearest_first)
        )

    async def delete(self, generation: int) -> None:
        await ListingEmbedding.objects.filter(generation_id=generation).adelete()

    async def withdraw(self, listing_id: int) -> None:
        await Listing.objects.filter(pk=listing_id).aupdate(status=Listing.Status.WITHDRAWN)


@pytest.fixture
async def subject(database_url: str | None) -> AsyncIterator[VectorSubject]:
    if database_url is None:
        yield FakeVectorSubject()
        return
    postgres = PostgresVectorSubject(database_url)
    yield postgres
    await postgres.close()


async def embedded(subject: VectorSubject, count: int) -> tuple[list[int], int, int]:
    """`count` listings, nearest first in a first generation and farthest first in a
    second one; the listings and the two generations."""
    listings = await subject.listings(count)
    first, second = await subject.generation(), await subject.generation()
    await subject.embed(first, listings)
    await subject.embed(second, listings[::-1])
    return listings, first, second


class TestVectorIndex(StageDeadlineContract[VectorSubject]):
    async def one_search(self, subject: VectorSubject) -> Search:
        _, first, _ = await embedded(subject, 3)
        return lambda budget_ms: vector_search(subject.index, QUERY, first, 5, budget_ms)

    async def test_it_answers_the_nearest_rows_of_the_generation_asked_first(
        self, subject: VectorSubject
    ) -> None:
        listings, first, second = await embedded(subject, 6)
        for generation, nearest in ((first, listings), (second, listings[::-1])):
            found = await vector_search(subject.index, QUERY, generation, 4, BUDGET_MS)
            assert_best_first(found, 4)
            assert [c.listing_id for c in found] == nearest[:4]
        assert await vector_search(subject.index, QUERY, second + 1, 4, BUDGET_MS) == []

    async def test_withdrawn_listings_never_take_a_slot(self, subject: VectorSubject) -> None:
        listings, first, _ = await embedded(subject, 8)
        for nearest in listings[:4]:
            await subject.withdraw(nearest)
        found = await vector_search(subject.index, QUERY, first, 4, BUDGET_MS)
        assert [c.listing_id for c in found] == listings[4:]

    async def test_a_generation_whose_rows_are_deleted_answers_nothing(
        self, subject: VectorSubject
    ) -> None:
        listings, first, second = await embedded(subject, 4)
        await subject.delete(second)
        assert await vector_search(subject.index, QUERY, second, 4, BUDGET_MS) == []
        found = await vector_search(subject.index, QUERY, first, 4, BUDGET_MS)
        assert [c.listing_id for c in found] == listings


# The Postgres index's own promises.


@pytest.fixture
def postgres(transactional_db: None, test_database_url: str) -> PostgresVectorSubject:
    return PostgresVectorSubject(test_database_url)


async def test_postgres_scores_are_cosine_similarities(postgres: PostgresVectorSubject) -> None:
    _, first, _ = await embedded(postgres, 5)
    found = await vector_search(postgres.index, QUERY, first, 5, BUDGET_MS)
    expected = [math.cos(step * STEP_RADIANS) for step in range(5)]
    assert [c.score for c in found] == pytest.approx(expected, abs=1e-5)


@pytest.mark.django_db  # the test database, reached through retrieval.pg.pool's pool
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
