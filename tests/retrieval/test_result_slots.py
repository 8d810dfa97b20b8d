"""Withdrawn listings never take result slots: not in the vector stage, not in a cached
ranking, not at hydration. With withdrawn listings nearest to the query, a search still
returns k results, on real Postgres, pgvector, Valkey and the real model."""

import time

import numpy as np
import pytest
from asgiref.sync import sync_to_async
from django.db import transaction
from django.test import AsyncClient
from django.utils import timezone

from ingestion import generations
from ingestion.embedding import DIMENSIONS, MODEL_NAME, get_embedder
from ingestion.indexing import embed_pending_batch
from ingestion.models import Listing
from ingestion.upsert import apply_draft
from retrieval import service
from retrieval.bounds.deadline import Deadline
from retrieval.cache import RedisResultCache, cache_key
from retrieval.pg.vector import PgVectorIndex
from retrieval.query.parse import parse_query
from retrieval.types import CachedRanking
from tests.conftest import first_search_answered
from tests.factories import draft, source
from tests.search_fixtures import embeddings_locked, search_json

pytestmark = pytest.mark.django_db(transaction=True)

WITHDRAWN_JAZZ = [f"Jazz night {n}" for n in range(10)]
ACTIVE_NEARBY = ["Blues evening at the cellar", "Swing band dance", "Saxophone quartet concert"]
OTHERS = ["Sourdough baking class", "Children's science fair", "Pottery workshop"]


@sync_to_async
def _listings_with_withdrawn_nearest() -> dict[str, int]:
    """Ten "Jazz night" listings, withdrawn after they were embedded, nearer to "jazz
    night" than anything else; three active ones near them in meaning but without the
    word; three far away. Title -> id."""
    generations.ensure_active_generation(MODEL_NAME, DIMENSIONS)
    with transaction.atomic():
        feed = source()
        for number, title in enumerate(WITHDRAWN_JAZZ + ACTIVE_NEARBY + OTHERS):
            apply_draft(
                feed,
                draft(f"l{number}", title=title, description="", venue="", starts_at=None),
                timezone.now(),
            )
    while embed_pending_batch():
        pass
    Listing.objects.filter(title__in=WITHDRAWN_JAZZ).update(status=Listing.Status.WITHDRAWN)
    service.forget_searchable_generation()
    return dict(Listing.objects.values_list("title", "pk"))


def _withdrawn(ids: list[int], by_title: dict[str, int]) -> set[int]:
    return set(ids) & {by_title[title] for title in WITHDRAWN_JAZZ}


async def test_the_vector_stage_returns_only_listings_that_can_be_shown() -> None:
    by_title = await _listings_with_withdrawn_nearest()
    generation = (await sync_to_async(generations.active_generation)()).pk  # type: ignore[union-attr]
    nearest = np.asarray(get_embedder().embed_query(WITHDRAWN_JAZZ[0]), dtype=np.float32)
    found = await PgVectorIndex().search(nearest, generation, 4, Deadline.after(1000))
    ids = [c.listing_id for c in found]
    assert len(ids) == 4
    assert not _withdrawn(ids, by_title)


@pytest.mark.usefixtures("patient_search")
async def test_a_search_still_returns_k_results_when_withdrawn_listings_are_nearest(
    async_client: AsyncClient,
) -> None:
    by_title = await _listings_with_withdrawn_nearest()
    body = await search_json(async_client, q="jazz night", k="3", timeout_ms="1000")
    ids = [result["id"] for result in body["results"]]
    assert len(ids) == 3, body
    assert not _withdrawn(ids, by_title)


async def test_a_cached_ranking_skips_listings_withdrawn_since_it_was_cached(
    async_client: AsyncClient, test_database_url: str
) -> None:
    by_title = await _listings_with_withdrawn_nearest()
    generation = (await sync_to_async(generations.active_generation)()).pk  # type: ignore[union-attr]
    # Cached while the jazz nights were still active: they head the ranking.
    ranking = [by_title[t] for t in WITHDRAWN_JAZZ[:4] + ACTIVE_NEARBY]
    query = parse_query("swing saxophone blues", "3")
    await RedisResultCache().put(
        cache_key(query, generation), CachedRanking(ranking, generation, time.time())
    )
    # The active generation and the pool, first looked up within the vector budget: on a
    # loaded machine that can take longer (CI's once did: no generation in time, no cache).
    await first_search_answered(async_client)
    async with embeddings_locked(test_database_url):
        body = await search_json(async_client, q=query.text, k="3")
    assert body["mode"] == "cache_fallback", body
    ids = [result["id"] for result in body["results"]]
    assert sorted(ids) == sorted(by_title[t] for t in ACTIVE_NEARBY)
