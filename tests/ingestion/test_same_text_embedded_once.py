"""A text is embedded once per generation: listings of the same text (the occurrences of
a weekly session, say) are given the vector the first was made with, in the same claim
and in later ones, and the model never sees the text again."""

from collections.abc import Sequence
from datetime import timedelta

import numpy as np
import numpy.typing as npt
import pytest
from django.db import transaction
from django.utils import timezone

from ingestion import generations, indexing
from ingestion.embedding import DIMENSIONS, MODEL_NAME, Embedder
from ingestion.indexing import embed_pending, embed_pending_batch
from ingestion.models import ListingEmbedding
from ingestion.upsert import apply_draft
from tests.factories import CONCERT_START, draft, source

pytestmark = pytest.mark.django_db(transaction=True)  # the sweep's lanes connect on their own


class TextVectors:
    """A vector per text that tells texts apart (its first components are the text's
    bytes), and a record of every text the model was asked for."""

    def __init__(self) -> None:
        self.texts: list[str] = []

    def encode(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        self.texts.extend(texts)
        vectors = np.zeros((len(texts), DIMENSIONS), dtype=np.float32)
        for row, text in enumerate(texts):
            code = np.frombuffer(text.encode()[:DIMENSIONS], dtype=np.uint8)
            vectors[row, : len(code)] = code
        return vectors


@transaction.atomic
def _weekly(title: str, weeks: range, description: str = "Every week in the crypt.") -> None:
    feed = source(f"feed {title} from week {weeks.start}")
    for week in weeks:
        starts = CONCERT_START + timedelta(weeks=week)
        session = draft(f"{title}-{week}", title=title, starts_at=starts, description=description)
        apply_draft(feed, session, timezone.now())


def _vectors() -> dict[int, bytes]:
    rows = ListingEmbedding.objects.all()
    return {e.listing_id: np.asarray(e.embedding, dtype=np.float32).tobytes() for e in rows}


@pytest.fixture
def model(monkeypatch: pytest.MonkeyPatch) -> TextVectors:
    generations.ensure_active_generation(MODEL_NAME, DIMENSIONS)
    encoder = TextVectors()
    monkeypatch.setattr(indexing, "get_embedder", lambda: Embedder(encoder, "fake"))
    return encoder


def test_listings_of_one_text_in_one_claim_are_embedded_once(model: TextVectors) -> None:
    _weekly("Harpsichord session", range(6))
    _weekly("Organ recital", range(1))

    assert embed_pending_batch() == 7

    assert len(model.texts) == 2  # each text once
    vectors = _vectors()
    assert len(vectors) == 7
    assert len(set(vectors.values())) == 2


def test_a_later_listing_of_a_text_already_embedded_is_given_its_vector(
    model: TextVectors,
) -> None:
    _weekly("Harpsichord session", range(2))
    assert embed_pending_batch() == 2
    asked = len(model.texts)
    _weekly("Harpsichord session", range(2, 5))  # more weeks, another poll
    _weekly("Harpsichord session", range(5, 6), description="Now in the nave.")  # not the same

    assert embed_pending(float("inf"), embedder=Embedder(model, "fake")) == 4

    (new,) = model.texts[asked:]  # only the one new text went to the model
    assert new.endswith("Now in the nave.")
    assert len(set(_vectors().values())) == 2
