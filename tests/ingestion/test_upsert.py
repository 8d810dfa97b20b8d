"""Drafts become records and canonical listings: idempotent, de-duplicated, withdrawable."""

from datetime import timedelta

import pytest
from django.utils import timezone

from ingestion.models import Listing, SourceRecord
from ingestion.upsert import Outcome, apply_draft
from tests.factories import CONCERT_START, draft, source

pytestmark = pytest.mark.django_db
NOW = timezone.now()


def test_a_new_draft_creates_a_listing_and_a_record() -> None:
    feed = source()
    assert apply_draft(feed, draft(), NOW) == Outcome.NEW
    listing = Listing.objects.get()
    assert listing.title == "Nina Simone tribute"
    assert listing.fetched_at == NOW
    assert listing.records.get().external_id == "item-1"


def test_the_same_draft_again_changes_nothing() -> None:
    feed = source()
    apply_draft(feed, draft(), NOW)
    before = Listing.objects.values().get()
    assert apply_draft(feed, draft(), NOW + timedelta(minutes=5)) == Outcome.UNCHANGED
    assert Listing.objects.values().get() == before
    assert SourceRecord.objects.count() == 1


def test_a_changed_draft_updates_its_listing_and_bumps_the_text_version() -> None:
    feed = source()
    apply_draft(feed, draft(), NOW)
    assert apply_draft(feed, draft(description="Now with strings."), NOW) == Outcome.UPDATED
    listing = Listing.objects.get()
    assert listing.description == "Now with strings."
    assert listing.content_version == 2


def test_a_change_outside_the_embedded_text_keeps_the_version() -> None:
    feed = source()
    apply_draft(feed, draft(), NOW)
    apply_draft(feed, draft(url="https://example.org/tickets"), NOW)
    assert Listing.objects.get().content_version == 1


def test_the_same_concert_from_a_feed_and_a_calendar_is_one_listing() -> None:
    feed, calendar = source("Publisher feed"), source("Venue calendar", "calendar")
    apply_draft(feed, draft("https://paper.example/nina", venue=""), NOW)
    outcome = apply_draft(
        calendar,
        draft(
            "uid-42@bluenote",
            title="Nina Simone Tribute!",
            venue="The Blue Note Jazz Club",
            starts_at=CONCERT_START + timedelta(minutes=15),
        ),
        NOW,
    )
    assert outcome == Outcome.UPDATED
    listing = Listing.objects.get()
    assert {r.source.name for r in listing.records.all()} == {"Publisher feed", "Venue calendar"}
    assert listing.venue == "The Blue Note Jazz Club"  # the feed had none; nothing was blanked


def test_an_alternate_spelling_at_the_same_time_and_venue_is_merged() -> None:
    feed, calendar = source("Publisher feed"), source("Venue calendar", "calendar")
    apply_draft(feed, draft(title="Tchaikovsky: Symphony No. 5"), NOW)
    apply_draft(calendar, draft("uid-1", title="Tschaikowsky Symphony no 5"), NOW)
    assert Listing.objects.count() == 1


def test_different_events_are_not_merged() -> None:
    feed, calendar = source("Publisher feed"), source("Venue calendar", "calendar")
    apply_draft(feed, draft(), NOW)
    apply_draft(calendar, draft("uid-2", starts_at=CONCERT_START + timedelta(days=7)), NOW)
    apply_draft(calendar, draft("uid-3", title="Stand-up comedy night"), NOW)
    apply_draft(
        calendar, draft("uid-4", venue="Royal Albert Hall", title="Nina Simone tribut"), NOW
    )
    assert Listing.objects.count() == 4


def test_two_items_of_one_source_never_merge_with_each_other() -> None:
    feed = source()
    apply_draft(feed, draft("a"), NOW)
    assert apply_draft(feed, draft("b"), NOW) == Outcome.NEW
    assert Listing.objects.count() == 2


def test_a_cancellation_withdraws_the_listing_once_no_source_lists_it() -> None:
    feed, calendar = source("Publisher feed"), source("Venue calendar", "calendar")
    apply_draft(feed, draft("f1"), NOW)
    apply_draft(calendar, draft("c1"), NOW)
    assert apply_draft(calendar, draft("c1", withdrawn=True), NOW) == Outcome.WITHDRAWN
    assert Listing.objects.get().status == Listing.Status.ACTIVE  # the feed still lists it
    assert apply_draft(feed, draft("f1", withdrawn=True), NOW) == Outcome.WITHDRAWN
    assert Listing.objects.get().status == Listing.Status.WITHDRAWN
    assert apply_draft(feed, draft("f1", withdrawn=True), NOW) == Outcome.UNCHANGED


def test_a_cancellation_of_something_never_listed_is_remembered() -> None:
    calendar = source("Venue calendar", "calendar")
    assert apply_draft(calendar, draft("c9", withdrawn=True), NOW) == Outcome.WITHDRAWN
    assert Listing.objects.count() == 0
    assert apply_draft(calendar, draft("c9", withdrawn=True), NOW) == Outcome.UNCHANGED


def test_undated_drafts_merge_only_on_the_same_title() -> None:
    feed, desk = source("Publisher feed"), source("Desk", "editorial")
    apply_draft(feed, draft("f1", title="Museum late: 100% dinosaurs", starts_at=None), NOW)
    same = draft("e1", title="MUSEUM LATE: 100% DINOSAURS", starts_at=None)
    assert apply_draft(desk, same, NOW) == Outcome.UPDATED
    other = draft("e2", title="Museum late: 100_ dinosaurs", starts_at=None)
    assert apply_draft(desk, other, NOW) == Outcome.NEW  # _ and % are not wildcards
    assert Listing.objects.count() == 2


def test_an_item_cancelled_before_it_was_ever_listed_and_restored_is_its_listings() -> None:
    calendar = source("Venue calendar", "calendar")
    apply_draft(calendar, draft("c9", withdrawn=True), NOW)
    assert apply_draft(calendar, draft("c9"), NOW) == Outcome.NEW
    listing = Listing.objects.get()
    assert SourceRecord.objects.get().listing_id == listing.pk
    assert apply_draft(calendar, draft("c9", title="Nina Simone tribute (late show)"), NOW) == (
        Outcome.UPDATED
    )
    assert Listing.objects.get().title == "Nina Simone tribute (late show)"
