"""The embedding candidates: every way a (listing, live generation) pair comes to want a
vector marks its listing, and settling the candidates that want nothing never loses a
change made meanwhile (ingestion/models/index.py `EmbeddingCandidate`, migrations/0012)."""

import threading

import psycopg
import pytest
from django.db import connection, transaction
from django.utils import timezone

from ingestion import generations
from ingestion.embedding import DIMENSIONS, MODEL_NAME
from ingestion.indexing import embed_pending_batch, pending_count, settle_candidates
from ingestion.models import EmbeddingCandidate, Listing
from ingestion.upsert import apply_draft
from tests.conftest import wait_until, waiting_on_a_lock
from tests.factories import draft, source, undated_listings

pytestmark = pytest.mark.django_db


def _embedded(*titles: str) -> list[Listing]:
    undated_listings(*titles)
    listings = list(Listing.objects.order_by("pk"))
    while embed_pending_batch():
        pass
    assert not EmbeddingCandidate.objects.exists(), "the sweep's last claim settles them"
    return listings


def test_a_deleted_vector_of_a_live_generation_is_wanted_again() -> None:
    active = generations.ensure_active_generation(MODEL_NAME, DIMENSIONS)
    _, lost = _embedded("Harp recital", "Pottery for beginners")
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM ingestion_listing_embedding WHERE listing_id = %s", [lost.pk])
    assert pending_count(active.pk) == 1
    assert embed_pending_batch() == 1
    assert pending_count(active.pk) == 0


# Committed transactions: a generation's HNSW index cannot be created in the test's wrapping
# transaction once listings with deferred foreign-key checks are in it.
@pytest.mark.django_db(transaction=True)
def test_a_new_generation_wants_every_active_listing_and_a_retired_one_none() -> None:
    generations.ensure_active_generation(MODEL_NAME, DIMENSIONS)
    _embedded("Harp recital", "Pottery for beginners", "Night market")
    Listing.objects.filter(title="Night market").update(status=Listing.Status.WITHDRAWN)
    building = generations.create_generation(MODEL_NAME, DIMENSIONS)
    assert pending_count(building.pk) == 2
    assert embed_pending_batch() == 2
    settle_candidates()
    # Its vectors are deleted after it is retired: they mark nothing.
    generations.retire(building)
    assert not EmbeddingCandidate.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_a_generation_retired_before_its_backfill_leaves_no_marks() -> None:
    """A build given up (retired while still building): its backfill marks want nothing
    any more. Left, they stayed for good, and each sweep's claim and settling read through
    them: 100,000 of them after a build of the bench's listings."""
    generations.ensure_active_generation(MODEL_NAME, DIMENSIONS)
    _embedded("Harp recital", "Pottery for beginners")
    building = generations.create_generation(MODEL_NAME, DIMENSIONS)
    assert EmbeddingCandidate.objects.filter(backfill_generation=building).count() == 2
    generations.retire(building)
    assert not EmbeddingCandidate.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_a_change_while_the_candidates_are_settled_is_kept(test_database_url: str) -> None:
    """Another transaction re-marks a candidate (changing its listing) and holds it
    uncommitted while the candidates are settled. In the settling statement's snapshot
    the listing wants nothing; deleting its candidate anyway, or after waiting for the
    change, would leave the changed listing with an old vector for good."""
    active = generations.ensure_active_generation(MODEL_NAME, DIMENSIONS)
    (listing,) = _embedded("Harp recital")
    with connection.cursor() as cursor:
        cursor.execute("SELECT ingestion_mark_candidates(ARRAY[%s]::bigint[])", [listing.pk])
    with psycopg.connect(test_database_url) as changer:
        changer.execute(
            "UPDATE ingestion_listing SET content_version = content_version + 1 WHERE id = %s",
            [listing.pk],
        )
        settled = threading.Event()

        def settle() -> None:
            try:
                settle_candidates()
            finally:
                connection.close()
                settled.set()

        settler = threading.Thread(target=settle)
        settler.start()
        waited: list[bool] = []

        def done_or_waiting() -> bool:
            waited.append(waiting_on_a_lock(test_database_url, "%ingestion_embedding_candidate%"))
            return settled.is_set() or waited[-1]

        wait_until(done_or_waiting, timeout_s=10, what="settling to finish or wait")
        changer.commit()
        settler.join(timeout=10)
    assert not any(waited), "settling waited on a candidate another transaction holds"
    assert EmbeddingCandidate.objects.filter(listing_id=listing.pk).exists()
    assert pending_count(active.pk) == 1


@pytest.mark.django_db(transaction=True)
def test_a_generation_s_backfill_is_claimed_after_the_listings_written_meanwhile() -> None:
    """A new generation marks every listing for its backfill; a listing written while it
    is built, or just before, is claimed first, in every generation it wants, and is no
    longer the backfill's to claim (migrations/0013)."""
    active = generations.ensure_active_generation(MODEL_NAME, DIMENSIONS)
    _embedded("Harp recital", "Pottery for beginners", "Night market")
    Listing.objects.filter(title="Night market").update(content_version=2)
    building = generations.create_generation(MODEL_NAME, DIMENSIONS)
    marked = dict(EmbeddingCandidate.objects.values_list("listing__title", "backfill_generation"))
    assert marked == {
        "Harp recital": building.pk,
        "Pottery for beginners": building.pk,
        "Night market": None,
    }
    with transaction.atomic():  # as a poll applies it
        late = draft("late", title="Jazz brunch", starts_at=None)
        apply_draft(source(name="late feed"), late, timezone.now())
    Listing.objects.filter(title="Harp recital").update(content_version=2)
    assert (
        EmbeddingCandidate.objects.get(listing__title="Harp recital").backfill_generation_id is None
    )
    # The three written listings want six vectors, the backfill one more.
    assert embed_pending_batch(batch_size=6) == 6
    assert pending_count(active.pk) == 0
    unbuilt = Listing.objects.exclude(listingembedding__generation=building)
    assert list(unbuilt.values_list("title", flat=True)) == ["Pottery for beginners"]


@pytest.mark.django_db(transaction=True)
def test_a_listing_two_backfills_want_is_wanted_in_both() -> None:
    """A backfill mark is checked in its own generation only: a listing a second
    generation marks before the first has its vector must not lose the first's."""
    generations.ensure_active_generation(MODEL_NAME, DIMENSIONS)
    _embedded("Harp recital")
    first = generations.create_generation(MODEL_NAME, DIMENSIONS)
    second = generations.create_generation(MODEL_NAME, DIMENSIONS)
    assert pending_count(first.pk) == 1
    assert pending_count(second.pk) == 1
    assert embed_pending_batch() == 2
    assert pending_count(first.pk) == pending_count(second.pk) == 0
