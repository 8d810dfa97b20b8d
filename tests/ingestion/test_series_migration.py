"""Listings of one occurrence each become series by migration (issue 33, item 5), over
real Postgres: a database migrated from before series keeps its editors' withdrawals and
aliases, the records other sources merged into a date and their provenance, gets one
listing per series with its dates, which the calendar's next poll then updates rather
than duplicates; a new index generation is built and activated when complete."""

from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest
from django.db import connection, transaction
from django.db.migrations.executor import MigrationExecutor

from ingestion import generations
from ingestion.embedding import DIMENSIONS, MODEL_NAME
from ingestion.indexing import embed_pending_batch
from ingestion.models import IndexGeneration, Listing, Source, SourceRecord
from ingestion.parsers.calendar import parse_calendar
from ingestion.upsert import apply_drafts

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("ingestion", "0017_generation_activated_when_complete")]
FIRST = datetime(2027, 3, 2, 19, 30, tzinfo=UTC)  # a Tuesday
DATES = [FIRST + timedelta(weeks=k) for k in range(4)]
LENGTH = timedelta(hours=2)


def _migrate(targets: list[tuple[str, str]]) -> MigrationExecutor:
    executor = MigrationExecutor(connection)
    executor.migrate(targets)
    return executor


def _stamp(moment: datetime) -> str:
    return moment.strftime("%Y%m%dT%H%M%SZ")


def _before_series(apps: Any) -> None:
    """The quiz as it was stored: a listing per date. The second date is also in a feed
    (merged into it); an editor withdrew the third; its calendar cancelled the fourth."""
    source_model = apps.get_model("ingestion", "Source")
    listing_model = apps.get_model("ingestion", "Listing")
    record_model = apps.get_model("ingestion", "SourceRecord")
    calendar = source_model.objects.create(name="Crown calendar", kind="calendar", url="/x")
    feed = source_model.objects.create(name="Listings feed", kind="feed", url="/y")
    for k, start in enumerate(DATES):
        listing = listing_model.objects.create(
            title="Pub quiz" if k != 1 else "The Crown pub quiz",
            venue="The Crown",
            starts_at=start,
            ends_at=start + LENGTH,
            aliases=["Quiz night"] if k == 1 else [],
            status="withdrawn" if k >= 2 else "active",
            withdrawn_by_editor=k == 2,
            source_kinds=["calendar"],
        )
        record_model.objects.create(
            source=calendar,
            external_id=f"quiz/{_stamp(start)}",
            content_hash=f"hash-{k}",
            listing=listing,
            withdrawn=k == 3,
            data={"title": listing.title, "starts_at": start.isoformat()},
        )
        if k == 1:
            record_model.objects.create(
                source=feed, external_id="feed-quiz", content_hash="f", listing=listing
            )
    generation_model = apps.get_model("ingestion", "IndexGeneration")
    generation = generation_model.objects.create(
        embedding_model=MODEL_NAME,
        dimensions=DIMENSIONS,
        text_pipeline_version=generations.TEXT_PIPELINE_VERSION,
        state="active",
    )
    embedding_model = apps.get_model("ingestion", "ListingEmbedding")
    for listing in listing_model.objects.filter(status="active"):
        embedding_model.objects.create(
            listing=listing,
            generation=generation,
            embedding=np.ones(DIMENSIONS, dtype=np.float32),
            content_version=listing.content_version,
            embedded_at=FIRST,
        )


def _poll_again(calendar: Source) -> None:
    """The calendar's next version: the series as the parser now reads it, all four
    dates (its fourth, cancelled, now on again), one draft."""
    payload = (
        "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//test//EN\r\nBEGIN:VEVENT\r\n"
        f"UID:quiz\r\nSUMMARY:Pub quiz\r\nLOCATION:The Crown\r\nDTSTART:{_stamp(FIRST)}\r\n"
        f"DTEND:{_stamp(FIRST + LENGTH)}\r\nRRULE:FREQ=WEEKLY;COUNT=4\r\n"
        "END:VEVENT\r\nEND:VCALENDAR\r\n"
    ).encode()
    result = parse_calendar(
        payload, window_start=FIRST - timedelta(days=1), window_end=FIRST + timedelta(weeks=8)
    )
    with transaction.atomic():
        apply_drafts(calendar, result.drafts, FIRST)


def test_occurrence_listings_become_one_series_without_losing_anything() -> None:
    latest = list(MigrationExecutor(connection).loader.graph.leaf_nodes())
    executor = _migrate(BEFORE)
    try:
        _before_series(executor.loader.project_state(BEFORE).apps)
    finally:
        _migrate(latest)

    (quiz,) = Listing.objects.filter(venue="The Crown")
    # The first date still shown is kept; the second's other title and alias join it.
    assert (quiz.title, quiz.status, quiz.aliases) == (
        "Pub quiz",
        "active",
        ["Quiz night", "The Crown pub quiz"],
    )
    assert [(o.lower, o.upper) for o in quiz.occurrences] == [
        (start, start + LENGTH) for start in DATES[:2]
    ]
    assert quiz.withdrawn_dates == [DATES[2]]
    assert (quiz.starts_at, quiz.ends_at) == (DATES[0], DATES[1] + LENGTH)
    records = {(r.source.kind, r.external_id): r for r in SourceRecord.objects.all()}
    assert set(records) == {("calendar", "quiz"), ("feed", "feed-quiz")}
    assert {r.listing_id for r in records.values()} == {quiz.pk}
    assert records[("calendar", "quiz")].content_hash == ""
    assert quiz.source_kinds == ["calendar", "feed"]
    building = IndexGeneration.objects.get(state=IndexGeneration.State.BUILDING)
    assert building.activate_when_complete

    # The next poll finds the series' record: the same listing, the rule in words, and
    # the date an editor withdrew still out; the one the calendar restored back in.
    _poll_again(Source.objects.get(kind=Source.Kind.CALENDAR))
    (quiz,) = Listing.objects.filter(venue="The Crown")
    assert quiz.recurrence == "every Tuesday"
    assert [o.lower for o in quiz.occurrences] == [DATES[0], DATES[1], DATES[3]]

    # Built in the background and activated when complete.
    while embed_pending_batch():
        pass
    generations.mark_complete_generations_ready()
    building.refresh_from_db()
    assert building.state == IndexGeneration.State.ACTIVE
