"""The schema runs on a real PostgreSQL with the extensions the design depends on."""

from typing import Any

import pytest
from django.db import IntegrityError, connection, transaction
from django.test import override_settings

from ingestion import generations
from ingestion.models import IndexGeneration, Listing
from retrieval.pg.vector import _statement
from retrieval.query.filters import parameters, shape
from retrieval.types import DEFAULT_FILTERS, SearchFilters

pytestmark = pytest.mark.django_db


def _extension_versions() -> dict[str, str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT extname, extversion FROM pg_extension")
        return dict(cursor.fetchall())


def test_it_runs_on_postgresql_with_pgvector_and_pg_trgm() -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT version()")
        assert cursor.fetchone()[0].startswith("PostgreSQL ")
    extensions = _extension_versions()
    major, minor = (int(part) for part in extensions["vector"].split(".")[:2])
    assert (major, minor) >= (0, 8)
    assert "pg_trgm" in extensions
    assert "unaccent" in extensions


def _search(terms: str) -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT title FROM ingestion_listing "
            "WHERE search_vector @@ websearch_to_tsquery('english', %s) "
            "ORDER BY ts_rank(search_vector, websearch_to_tsquery('english', %s)) DESC, id",
            [terms, terms],
        )
        return [row[0] for row in cursor.fetchall()]


def test_it_indexes_title_venue_aliases_and_description_with_weights() -> None:
    Listing.objects.create(title="Harbour lights", description="A jazz night on the pier")
    Listing.objects.create(title="Jazz at the Arches", venue="The Arches")
    Listing.objects.create(title="Late show", venue="Hall", aliases=["Jazz Cellar"])

    # Searchable as soon as the row exists: the tsvector is a stored generated column.
    assert _search("harbour") == ["Harbour lights"]
    assert _search("cellar") == ["Late show"]
    # Title (A) outranks alias (B), which outranks description (C).
    assert _search("jazz") == ["Jazz at the Arches", "Late show", "Harbour lights"]


def test_it_updates_the_search_vector_when_a_listing_changes() -> None:
    listing = Listing.objects.create(title="Opening night")
    listing.title = "Closing night"
    listing.save()
    assert _search("closing") == ["Closing night"]
    assert _search("opening") == []


def test_listings_have_full_text_indexes_and_no_trigram_index_that_nothing_reads() -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT indexdef FROM pg_indexes WHERE tablename = 'ingestion_listing'")
        definitions = " ".join(row[0] for row in cursor.fetchall())
    assert "USING gin (search_vector)" in definitions
    # Every new listing paid for one (ingestion/migrations/0023_no_title_trigram_index.py).
    assert "gin_trgm_ops" not in definitions


def test_the_database_allows_only_one_active_generation() -> None:
    first = generations.create_generation("model-a", 3)
    generations.activate(first)
    second = generations.create_generation("model-b", 3)
    with pytest.raises(IntegrityError), transaction.atomic():
        IndexGeneration.objects.filter(pk=second.pk).update(state=IndexGeneration.State.ACTIVE)


def test_activation_switches_the_active_generation_and_keeps_the_old_one_ready() -> None:
    first = generations.create_generation("model-a", 3)
    generations.activate(first)
    second = generations.create_generation("model-b", 3)
    generations.activate(second)
    first.refresh_from_db()
    assert generations.active_generation() == second
    assert first.state == IndexGeneration.State.READY


def test_a_generations_hnsw_index_is_built_as_configured() -> None:
    with override_settings(SEARCH_HNSW_M=8, SEARCH_HNSW_EF_CONSTRUCTION=40):
        generation = generations.create_generation("model-a", 3)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT reloptions FROM pg_class WHERE relname = %s",
            [generations.hnsw_index_name(generation)],
        )
        assert sorted(cursor.fetchone()[0]) == ["ef_construction=40", "m=8"]


def test_each_generation_gets_its_own_hnsw_index_over_its_rows_only() -> None:
    small = generations.create_generation("model-a", 3)
    large = generations.create_generation("model-b", 4)
    listing = Listing.objects.create(title="Vector night")
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO ingestion_listing_embedding (listing_id, generation_id, embedding,"
            " content_version, embedded_at)"
            " VALUES (%s, %s, '[1,0,0]', 1, now()), (%s, %s, '[0,1,0,0]', 1, now())",
            [listing.pk, small.pk, listing.pk, large.pk],
        )
        cursor.execute(
            "SELECT indexdef FROM pg_indexes WHERE indexname = %s",
            [generations.hnsw_index_name(small)],
        )
        definition = cursor.fetchone()[0]
        assert "hnsw" in definition
        assert f"generation_id = {small.pk}" in definition


@pytest.mark.parametrize("vector_type", ["vector", "halfvec"])
@pytest.mark.parametrize("filters", [DEFAULT_FILTERS, SearchFilters(venue="Hall")])
def test_the_vector_stage_reads_its_generations_index_of_either_type(
    vector_type: str, filters: SearchFilters
) -> None:
    with override_settings(SEARCH_VECTOR_TYPE=vector_type):
        generation = generations.create_generation("model-a", 3)
    index = generations.hnsw_index_name(generation)
    statement, _ = _statement(3, generation.vector_type, generation.pk, shape(filters))
    with connection.cursor() as cursor:
        cursor.execute("SELECT indexdef FROM pg_indexes WHERE indexname = %s", [index])
        assert f"{vector_type}_cosine_ops" in cursor.fetchone()[0]
        # On an empty table only a planner told that other paths are dear takes the index,
        # and then only one whose expression the statement matches.
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute("SET LOCAL enable_bitmapscan = off")
        cursor.execute("SET LOCAL enable_sort = off")
        values: dict[str, Any] = {"embedding": "[1,0,0]", "limit": 5, **parameters(filters)}
        cursor.execute(f"EXPLAIN {statement}", values)
        plan = " ".join(row[0] for row in cursor.fetchall())
    assert f"Index Scan using {index}" in plan


def test_ensure_active_generation_creates_one_only_once() -> None:
    first = generations.ensure_active_generation("model-a", 3)
    again = generations.ensure_active_generation("model-a", 3)
    assert first == again
    assert IndexGeneration.objects.count() == 1
