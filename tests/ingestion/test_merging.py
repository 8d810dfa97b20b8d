"""Editors merge listings and split a wrong merge."""

import pytest
from django.utils import timezone

from ingestion import merging
from ingestion.models import Listing, SourceRecord
from ingestion.upsert import apply_draft
from tests.factories import draft, source

pytestmark = pytest.mark.django_db
NOW = timezone.now()


def test_merge_moves_records_and_keeps_the_other_title_as_an_alias() -> None:
    feed, calendar = source("Publisher feed"), source("Venue calendar", "calendar")
    apply_draft(feed, draft("f1", title="Jazz at noon"), NOW)
    apply_draft(calendar, draft("c1", title="Lunchtime jazz session", venue="Crypt"), NOW)
    keep, other = Listing.objects.order_by("pk")
    merged = merging.merge(keep, other)
    assert merged.records.count() == 2
    assert "Lunchtime jazz session" in merged.aliases
    assert not Listing.objects.filter(pk=other.pk).exists()
    assert merged.content_version == 2


def test_split_rebuilds_both_listings_from_their_records() -> None:
    feed, calendar = source("Publisher feed"), source("Venue calendar", "calendar")
    apply_draft(feed, draft("f1", title="Nina Simone tribute"), NOW)
    apply_draft(calendar, draft("c1", title="Nina Simone Tribute", description="Other show"), NOW)
    listing = Listing.objects.get()
    wrong = SourceRecord.objects.get(external_id="c1")
    new = merging.split(wrong)
    listing.refresh_from_db()
    assert new.description == "Other show"
    assert listing.description == "An evening of songs."
    assert list(listing.records.values_list("external_id", flat=True)) == ["f1"]
    # The split record keeps its own listing on the next poll.
    apply_draft(calendar, draft("c1", title="Nina Simone Tribute", description="Moved"), NOW)
    new.refresh_from_db()
    assert new.description == "Moved"
    assert Listing.objects.count() == 2


def test_a_record_without_a_listing_cannot_be_split() -> None:
    apply_draft(source(), draft(withdrawn=True), NOW)  # withdrawn before it was ever listed
    with pytest.raises(ValueError, match="no listing"):
        merging.split(SourceRecord.objects.get())


def test_a_lone_record_cannot_be_split() -> None:
    feed = source()
    apply_draft(feed, draft(), NOW)
    with pytest.raises(ValueError, match="only record"):
        merging.split(SourceRecord.objects.get())
