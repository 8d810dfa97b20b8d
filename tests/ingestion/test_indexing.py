"""Embedding listings for live generations with the real model, and generation lifecycle."""

import io
import threading

import psycopg
import pytest
from django.core.management import call_command
from django.db import connection
from django.utils import timezone
from pytest_django import DjangoAssertNumQueries

from ingestion import generations
from ingestion.embedding import DIMENSIONS, MODEL_NAME, get_embedder
from ingestion.indexing import embed_pending_batch, pending_count
from ingestion.models import IndexGeneration, Listing, ListingEmbedding
from ingestion.upsert import apply_draft
from tests.conftest import wait_until, waiting_on_a_lock
from tests.factories import draft, undated_listings

pytestmark = pytest.mark.django_db


def _nearest(generation: IndexGeneration, query: str) -> list[str]:
    vector = "[" + ",".join(f"{x:.6f}" for x in get_embedder().embed_query(query)) + "]"
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT l.title FROM ingestion_listing_embedding e"
            f" JOIN ingestion_listing l ON l.id = e.listing_id"
            f" WHERE e.generation_id = %s"
            f" ORDER BY e.embedding::vector({DIMENSIONS}) <=> %s::vector({DIMENSIONS})",
            [generation.pk, vector],
        )
        return [row[0] for row in cursor.fetchall()]


def test_listings_are_embedded_for_active_and_building_generations() -> None:
    active = generations.ensure_active_generation(MODEL_NAME, DIMENSIONS)
    building = generations.create_generation(MODEL_NAME, DIMENSIONS)
    undated_listings(
        "Chamber music in the crypt", "Five-a-side football league", "Sourdough baking class"
    )
    assert embed_pending_batch(batch_size=4) == 4
    assert embed_pending_batch(batch_size=4) == 2
    assert embed_pending_batch() == 0
    assert ListingEmbedding.objects.filter(generation=active).count() == 3
    assert ListingEmbedding.objects.filter(generation=building).count() == 3
    assert _nearest(active, "string quartet concert")[0] == "Chamber music in the crypt"
    assert _nearest(building, "learn to bake bread")[0] == "Sourdough baking class"


def test_a_changed_listing_is_embedded_again_and_withdrawn_ones_are_skipped() -> None:
    active = generations.ensure_active_generation(MODEL_NAME, DIMENSIONS)
    undated_listings("Morning yoga", "Evening pilates")
    embed_pending_batch()
    listing = Listing.objects.get(title="Morning yoga")
    apply_draft(
        listing.records.get().source,
        draft("id-0", title="Sunrise meditation", venue="", starts_at=None),
        timezone.now(),
    )
    Listing.objects.filter(title="Evening pilates").update(status=Listing.Status.WITHDRAWN)
    assert pending_count(active.pk) == 1
    assert embed_pending_batch() == 1
    stored = ListingEmbedding.objects.get(listing=listing, generation=active)
    assert stored.content_version == 2
    assert _nearest(active, "mindfulness")[0] == "Sunrise meditation"


# Committed transactions, as in production: Postgres refuses CREATE INDEX in a transaction
# that still has deferred foreign-key checks pending, which pytest's wrapping one would.
@pytest.mark.django_db(transaction=True)
def test_build_activate_rollback_and_retire_from_the_command_line() -> None:
    first = generations.ensure_active_generation(MODEL_NAME, DIMENSIONS)
    undated_listings("Jazz brunch", "Puppet theatre")
    embed_pending_batch()
    out = io.StringIO()
    call_command("generations", "build", "--inline", "--activate", stdout=out)
    second = IndexGeneration.objects.latest("pk")
    assert "100.0%" in out.getvalue()
    assert generations.active_generation() == second
    assert generations.progress(second) == (2, 2)

    call_command("generations", "rollback", stdout=io.StringIO())
    assert generations.active_generation() == first

    call_command("generations", "retire", str(second.pk), stdout=io.StringIO())
    second.refresh_from_db()
    assert second.state == IndexGeneration.State.RETIRED
    assert not ListingEmbedding.objects.filter(generation=second).exists()
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT 1 FROM pg_indexes WHERE indexname = %s", [generations.hnsw_index_name(second)]
        )
        assert cursor.fetchone() is None


@pytest.mark.django_db(transaction=True)
def test_retiring_while_a_reader_holds_the_table_blocks_no_vector_search(
    test_database_url: str,
) -> None:
    """A transaction that has read the embeddings (a long search, a backup) is still open
    when a generation is retired. The retirement waits for it; searches started meanwhile
    must not wait behind the retirement."""
    active = generations.ensure_active_generation(MODEL_NAME, DIMENSIONS)
    undated_listings("Jazz brunch")
    retiring = generations.create_generation(MODEL_NAME, DIMENSIONS)
    embed_pending_batch()
    with (
        psycopg.connect(test_database_url) as reader,
        psycopg.connect(test_database_url, autocommit=True) as search,
    ):
        reader.execute("SELECT count(*) FROM ingestion_listing_embedding")
        retirement = threading.Thread(target=_retire_and_close, args=(retiring,))
        retirement.start()
        wait_until(
            lambda: waiting_on_a_lock(test_database_url, "DROP INDEX%"),
            10,
            "the retirement to wait for the open reader",
        )
        search.execute("SET lock_timeout = '1s'")
        found = search.execute(
            "SELECT count(*) FROM ingestion_listing_embedding WHERE generation_id = %s",
            [active.pk],
        ).fetchone()
        assert found == (1,)
        reader.rollback()
        retirement.join(timeout=10)
    assert not retirement.is_alive()
    assert not ListingEmbedding.objects.filter(generation=retiring).exists()


def _retire_and_close(generation: IndexGeneration) -> None:
    try:
        generations.retire(generation)
    finally:
        connection.close()  # this thread's own connection


def test_the_generation_list_is_one_query_however_many_generations(
    django_assert_num_queries: DjangoAssertNumQueries,
) -> None:
    generations.ensure_active_generation(MODEL_NAME, DIMENSIONS)
    generations.create_generation(MODEL_NAME, DIMENSIONS)
    undated_listings("Jazz brunch")
    embed_pending_batch()
    out = io.StringIO()
    with django_assert_num_queries(1):
        call_command("generations", "list", stdout=out)
    assert out.getvalue().count("1/1 embedded") == 2


def test_the_active_generation_cannot_be_retired() -> None:
    active = generations.ensure_active_generation(MODEL_NAME, DIMENSIONS)
    with pytest.raises(ValueError, match="active"):
        generations.retire(active)
