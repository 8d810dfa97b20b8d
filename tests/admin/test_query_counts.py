"""Pinned query counts, so an N+1 cannot creep in: every admin changelist makes the same
number of queries for a page of 30 rows as for a page of 60, and one ingested batch makes a
fixed number of queries however many items it holds."""

from collections.abc import Callable
from datetime import timedelta

import pytest
from django.db import connection
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from pytest_django import DjangoAssertNumQueries, DjangoCaptureOnCommitCallbacks

from ingestion import generations
from ingestion.batches import apply_parse_result
from ingestion.drafts import BadItem, ParseResult
from ingestion.models import (
    IndexGeneration,
    Listing,
    ListingEmbedding,
    Poll,
    QuarantinedItem,
    Source,
    SourceRecord,
)
from tests.factories import CONCERT_START, draft, source

pytestmark = pytest.mark.django_db

# Queries for one changelist page as a superuser, whatever the number of rows on it: the
# session's user, the page's two counts (filtered and in all), its rows, and the choices of
# filters on plain columns and relations (one each), of the date drill-down (two) and the
# quarantine's counts per source and reason (one). A query per row would make the page of
# 60 differ from the page of 30.
CHANGELIST_QUERIES = {
    "ingestion_source": 5,
    "ingestion_poll": 6,
    "ingestion_listing": 6,
    "ingestion_sourcerecord": 4,
    "ingestion_quarantineditem": 6,
    "ingestion_indexgeneration": 4,
}


def _populate(count: int) -> None:
    """`count` more rows for each changelist, each pointing at rows of the others, so every
    column that follows a relation has something to follow."""
    offset = Source.objects.count()
    kinds = list(Source.Kind)
    now = timezone.now()
    sources = Source.objects.bulk_create(
        Source(name=f"source {offset + n}", kind=kinds[n % len(kinds)], url="/dev/null")
        for n in range(count)
    )
    listings = Listing.objects.bulk_create(
        Listing(title=f"listing {offset + n}", venue="Hall", starts_at=now, fetched_kind="feed")
        for n in range(count)
    )
    SourceRecord.objects.bulk_create(
        SourceRecord(source=s, external_id=f"r{offset + n}", content_hash="h", listing=listing)
        for n, (s, listing) in enumerate(zip(sources, listings, strict=True))
    )
    polls = Poll.objects.bulk_create(
        Poll(source=s, started_at=now, finished_at=now, status=Poll.Status.OK) for s in sources
    )
    QuarantinedItem.objects.bulk_create(
        QuarantinedItem(source=poll.source, poll=poll, position=1, reason="no title")
        for poll in polls
    )
    states = [IndexGeneration.State.BUILDING, IndexGeneration.State.READY]
    generations = IndexGeneration.objects.bulk_create(
        IndexGeneration(
            embedding_model="m", dimensions=3, text_pipeline_version=1, state=states[n % 2]
        )
        for n in range(count)
    )
    ListingEmbedding.objects.bulk_create(
        ListingEmbedding(
            listing=listing, generation=g, embedding=[1, 0, 0], content_version=1, embedded_at=now
        )
        for listing, g in zip(listings, generations, strict=True)
    )


@pytest.mark.parametrize("model", CHANGELIST_QUERIES)
def test_a_changelist_makes_the_same_queries_for_30_rows_as_for_60(
    admin_client: Client, django_assert_num_queries: DjangoAssertNumQueries, model: str
) -> None:
    url = reverse(f"admin:{model}_changelist")
    for rows in (30, 60):
        _populate(30)
        with django_assert_num_queries(CHANGELIST_QUERIES[model]):
            response = admin_client.get(url)
        assert response.status_code == 200
        assert response.context["cl"].result_count == rows


def test_the_generations_changelist_counts_only_current_vectors_of_active_listings(
    admin_client: Client,
) -> None:
    """The progress column's one query means what generations.progress() always meant."""
    now = timezone.now()
    current, stale, withdrawn, _not_embedded = Listing.objects.bulk_create(
        [
            Listing(title="current"),
            Listing(title="stale", content_version=2),
            Listing(title="withdrawn", status=Listing.Status.WITHDRAWN),
            Listing(title="not embedded yet"),
        ]
    )
    generation = IndexGeneration.objects.create(
        embedding_model="m", dimensions=3, text_pipeline_version=1
    )
    ListingEmbedding.objects.bulk_create(
        ListingEmbedding(
            listing=listing,
            generation=generation,
            embedding=[1, 0, 0],
            content_version=1,
            embedded_at=now,
        )
        for listing in (current, stale, withdrawn)
    )
    response = admin_client.get(reverse("admin:ingestion_indexgeneration_changelist"))
    assert "33.3% (1/3)" in response.content.decode()
    assert generations.progress(generation) == (1, 3)


# One ingested batch, whatever its size: the poll inserted, the items' records read and
# locked, each kind of write made once for all items, the poll's counts saved, earlier
# quarantine superseded; and here a SAVEPOINT and its RELEASE, since the test's transaction
# encloses the batch's (in production its BEGIN and COMMIT, which Django does not count).
BATCH_QUERIES = 6
# New items: their time slots locked, duplicates looked for, their listings and their
# records inserted, and, after the commit, whether the listings or their records outgrew
# their statistics (they never do here: `apply_counted` analyses them first); bad ones:
# their quarantine entries inserted.
NEW_AND_BAD_ITEMS_QUERIES = 6
# Changed items: their listings locked, then updated (versions bumped), their records
# updated.
CHANGED_ITEMS_QUERIES = 3


def _batch(size: int, title: str) -> ParseResult:
    return ParseResult(
        drafts=[
            draft(f"item-{n}", title=f"{title} {n}", starts_at=CONCERT_START + timedelta(days=n))
            for n in range(size)
        ]
    )


@pytest.fixture
def apply_counted(
    django_assert_num_queries: DjangoAssertNumQueries,
    django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks,
) -> Callable[[Source, ParseResult, int], Poll]:
    """Applies a batch, its after-commit work included, asserting how many queries it made."""

    def apply(feed: Source, result: ParseResult, queries: int) -> Poll:
        with connection.cursor() as cursor:
            # Statistics to compare with, so that no poll here analyses (a fresh test
            # database has none, and the first poll would).
            cursor.execute("ANALYZE ingestion_listing, ingestion_sourcerecord")
        with django_assert_num_queries(queries), django_capture_on_commit_callbacks(execute=True):
            return apply_parse_result(
                feed, result, fetched_at=timezone.now(), started_at=timezone.now()
            )

    return apply


@pytest.mark.parametrize("size", [5, 50])
def test_a_batch_of_new_and_bad_items_makes_the_same_queries_whatever_its_size(
    apply_counted: Callable[[Source, ParseResult, int], Poll], size: int
) -> None:
    result = _batch(size, "Concert number")
    result.bad.extend(BadItem(n, f"bad-{n}", "no title") for n in range(size))
    poll = apply_counted(source(), result, BATCH_QUERIES + NEW_AND_BAD_ITEMS_QUERIES)
    assert (poll.new, poll.quarantined) == (size, size)
    assert Listing.objects.count() == size
    assert QuarantinedItem.objects.count() == size


@pytest.mark.parametrize("size", [5, 50])
def test_a_batch_of_changed_items_makes_the_same_queries_whatever_its_size(
    apply_counted: Callable[[Source, ParseResult, int], Poll], size: int
) -> None:
    feed = source()
    apply_parse_result(
        feed, _batch(size, "Concert"), fetched_at=timezone.now(), started_at=timezone.now()
    )
    poll = apply_counted(feed, _batch(size, "Concert moved"), BATCH_QUERIES + CHANGED_ITEMS_QUERIES)
    assert poll.updated == size
    assert set(Listing.objects.values_list("content_version", flat=True)) == {2}
    assert set(Listing.objects.values_list("title", flat=True)) == {
        f"Concert moved {n}" for n in range(size)
    }
