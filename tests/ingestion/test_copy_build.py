"""A generation built over the active one's vectors (`manage.py generations build
--copy`): a new index (here halfvec over a vector generation) with no text sent to the
model, completed by the sweep like any build."""

import numpy as np
import pytest
from django.db import connection, transaction
from django.test import override_settings
from django.utils import timezone

from ingestion import generations, indexing
from ingestion.embedding import DIMENSIONS, MODEL_NAME, Embedder
from ingestion.indexing import embed_pending_batch
from ingestion.models import IndexGeneration, ListingEmbedding
from ingestion.upsert import apply_draft
from tests.factories import draft, source
from tests.ingestion.test_same_text_embedded_once import TextVectors

pytestmark = pytest.mark.django_db(transaction=True)  # the index is built concurrently


@pytest.fixture
def model(monkeypatch: pytest.MonkeyPatch) -> TextVectors:
    with override_settings(SEARCH_VECTOR_TYPE="vector"):
        generations.ensure_active_generation(MODEL_NAME, DIMENSIONS)
    encoder = TextVectors()
    monkeypatch.setattr(indexing, "get_embedder", lambda: Embedder(encoder, "fake"))
    return encoder


def _rows(generation: IndexGeneration) -> dict[int, tuple[bytes, int]]:
    return {
        e.listing_id: (np.asarray(e.embedding, dtype=np.float32).tobytes(), e.content_version)
        for e in ListingEmbedding.objects.filter(generation=generation)
    }


def test_a_copy_build_indexes_the_active_vectors_without_the_model(model: TextVectors) -> None:
    with transaction.atomic():
        feed = source("a venue")
        for title in ("Organ recital", "Harpsichord session", "Jazz night"):
            apply_draft(feed, draft(title, title=title), timezone.now())
    assert embed_pending_batch() == 3
    asked = len(model.texts)
    active = generations.active_generation()
    assert active is not None

    with override_settings(SEARCH_VECTOR_TYPE="halfvec"):
        copied = generations.copy_build(active)

    assert (copied.vector_type, copied.state) == ("halfvec", IndexGeneration.State.BUILDING)
    assert _rows(copied) == _rows(active)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT i.indisvalid, pg_get_indexdef(i.indexrelid) FROM pg_index i"
            " WHERE i.indexrelid = %s::regclass",
            [generations.hnsw_index_name(copied)],
        )
        valid, definition = cursor.fetchone()
    assert valid
    assert "halfvec_cosine_ops" in definition
    # The sweep finds every listing embedded at its version: nothing for the model, and
    # the generation complete at its end (ingestion/tasks.py's embed_pending).
    embed_pending_batch()
    assert len(model.texts) == asked
    assert generations.mark_complete_generations_ready() == 1
    copied.refresh_from_db()
    assert copied.state == IndexGeneration.State.READY


def test_a_retired_generation_is_no_source(model: TextVectors) -> None:
    retired = generations.create_generation(MODEL_NAME, DIMENSIONS)
    generations.retire(retired)
    with pytest.raises(ValueError, match="no vectors"):
        generations.copy_build(retired)
