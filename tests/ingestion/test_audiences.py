"""A judged collection's documents come in through the real ingestion path, yet a public
search can never return them: not lexically, not by vector, not as a spelling correction,
and de-duplication never merges them into public listings (ingestion.models.Audience)."""

import pytest
from asgiref.sync import sync_to_async
from django.db import connection, transaction
from django.test import AsyncClient
from django.utils import timezone

from ingestion import generations
from ingestion.embedding import DIMENSIONS, MODEL_NAME
from ingestion.indexing import embed_pending_batch
from ingestion.models import Audience, IndexGeneration, Listing, ListingEmbedding, Source
from ingestion.upsert import apply_draft
from retrieval import service
from retrieval.bounds.deadline import Deadline
from retrieval.pg import vocabulary
from retrieval.pg.hydrate import hydrate
from retrieval.pg.lexical import PgLexicalIndex
from retrieval.query.parse import parse_query
from tests.factories import draft
from tests.search_fixtures import index_listings, search_json

JUDGED = Audience.of_evaluation_set("judged")

pytestmark = pytest.mark.django_db(transaction=True)

JUDGED_TITLE = "Aeroelastic models of heated high speed aircraft"


def _evaluation_source() -> Source:
    return Source.objects.create(
        name="evaluation: cranfield",
        kind=Source.Kind.EDITORIAL,
        url="",
        audience=JUDGED,
    )


def _ingest(source: Source, external_id: str, title: str) -> Listing:
    with transaction.atomic():
        apply_draft(
            source,
            draft(external_id, title=title, venue="", description=title, starts_at=None),
            timezone.now(),
        )
    return Listing.objects.get(records__source=source, records__external_id=external_id)


@sync_to_async
def _public_and_judged() -> tuple[Listing, IndexGeneration, IndexGeneration]:
    """The public search fixtures and one judged document, each embedded in its
    audience's generation, and the vocabulary refreshed."""
    index_listings()
    public = generations.active_generation()
    judged_generation = generations.ensure_active_generation(MODEL_NAME, DIMENSIONS, JUDGED)
    judged = _ingest(_evaluation_source(), "1", JUDGED_TITLE)
    while embed_pending_batch():
        pass
    vocabulary.refresh()
    service.forget_searchable_generation()
    assert public is not None
    return judged, public, judged_generation


@pytest.mark.usefixtures("patient_search")  # hybrid is asserted: no budget may run out
async def test_a_public_search_never_returns_a_judged_document(async_client: AsyncClient) -> None:
    judged, _, _ = await _public_and_judged()
    assert judged.audience == JUDGED  # from its source, through the real path
    for q in (JUDGED_TITLE, "aeroelastic aircraft", "how do heated aircraft models behave"):
        body = await search_json(async_client, q=q, timeout_ms="1000")
        assert body["mode"] == "hybrid", body  # both stages answered, and neither had it
        assert judged.pk not in [result["id"] for result in body["results"]]
        # Not a candidate either: hydration's own filter is not what keeps it out.
        found = await PgLexicalIndex().search(parse_query(q, "10"), 30, Deadline.after(1000))
        assert judged.pk not in [c.listing_id for c in found.candidates]
    # Nor shown, were its id ever handed to hydration (a cached ranking, say).
    assert await hydrate([judged.pk], JUDGED_TITLE, 5, Deadline.after(1000)) == []


async def test_a_judged_documents_words_are_never_offered_as_corrections(
    async_client: AsyncClient,
) -> None:
    await _public_and_judged()
    assert not await sync_to_async(_vocabulary_has)("aeroelastic")
    assert await sync_to_async(_vocabulary_has)("sourdough")  # public words are there
    body = await search_json(async_client, q="aeroelastik", timeout_ms="1000")
    assert all(result["title"] != JUDGED_TITLE for result in body["results"])


def _vocabulary_has(word: str) -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM retrieval_vocabulary WHERE word = %s", [word])
        return cursor.fetchone() is not None


async def test_each_audience_is_embedded_in_its_own_generation_only() -> None:
    judged, public, judged_generation = await _public_and_judged()
    embedded = [
        (e.listing_id, e.generation_id) async for e in ListingEmbedding.objects.order_by("pk")
    ]
    public_ids = {
        i async for i in Listing.objects.exclude(pk=judged.pk).values_list("pk", flat=True)
    }
    assert {g for i, g in embedded if i == judged.pk} == {judged_generation.pk}
    assert {g for i, g in embedded if i in public_ids} == {public.pk}
    # Both active at once: activating the judged generation left the public one serving.
    await public.arefresh_from_db()
    assert public.state == judged_generation.state == IndexGeneration.State.ACTIVE


def test_deduplication_never_merges_across_audiences() -> None:
    generations.ensure_active_generation(MODEL_NAME, DIMENSIONS)
    public = Source.objects.create(name="Editorial desk", kind=Source.Kind.EDITORIAL, url="")
    first = _ingest(public, "p1", "Organ recital")
    judged = _ingest(_evaluation_source(), "e1", "Organ recital")
    assert judged.pk != first.pk
    assert (first.audience, judged.audience) == (Audience.PUBLIC, JUDGED)
    second_public = Source.objects.create(name="Other desk", kind=Source.Kind.EDITORIAL, url="")
    assert _ingest(second_public, "p2", "Organ recital").pk == first.pk  # as before, in one
