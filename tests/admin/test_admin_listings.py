"""The listings admin (issue 13, item 2) as an editor uses it: finding listings, their
provenance, withdrawing and restoring with a reason, merging and splitting after a page
that says what will happen, and what the vector search knows of a listing's text. Every
page's query count is pinned with a few hundred rows (item 7)."""

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.contrib.admin.models import LogEntry
from django.contrib.contenttypes.models import ContentType
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from pytest_django import DjangoAssertNumQueries, DjangoCaptureOnCommitCallbacks

from ingestion import generations, merging, tasks
from ingestion.embedding import DIMENSIONS, MODEL_NAME
from ingestion.models import IndexGeneration, Listing, ListingEmbedding, Source, SourceRecord
from ingestion.upsert import apply_draft
from tests.admin_pages import EDITORS, client_of
from tests.factories import draft, source

pytestmark = pytest.mark.django_db

CHANGELIST = "admin:ingestion_listing_changelist"
PAST, FUTURE = datetime(2020, 5, 1, 19, tzinfo=UTC), datetime(2031, 5, 1, 19, tzinfo=UTC)


@pytest.fixture
def editor() -> Client:
    return client_of(EDITORS)


def _listing(
    title: str, *, feed: Source | None = None, external_id: str | None = None, **fields: Any
) -> Listing:
    """A listing ingested the usual way, from one record of `feed` (a new feed if none)."""
    apply_draft(
        feed or source(title), draft(external_id or title, title=title, **fields), timezone.now()
    )
    return Listing.objects.get(records__external_id=external_id or title)


def _shown(client: Client, **params: str) -> set[str]:
    """The titles the changelist shows for `params` (a search, filters)."""
    response = client.get(reverse(CHANGELIST), params)
    assert response.status_code == 200
    return {listing.title for listing in response.context["cl"].result_list}


def _change_page(client: Client, listing: Listing) -> str:
    response = client.get(reverse("admin:ingestion_listing_change", args=[listing.pk]))
    assert response.status_code == 200
    return response.content.decode()


def _act(client: Client, action: str, listings: list[Listing], **form: str) -> Any:
    selected = [listing.pk for listing in listings]
    return client.post(
        reverse(CHANGELIST), {"action": action, "_selected_action": selected, **form}
    )


def _embed(listing: Listing, generation: IndexGeneration, version: int) -> None:
    vector = [1.0] + [0.0] * (DIMENSIONS - 1)
    ListingEmbedding.objects.create(
        listing=listing,
        generation=generation,
        embedding=vector,
        content_version=version,
        embedded_at=timezone.now(),
    )


def test_it_finds_a_listing_by_its_title_venue_or_an_alias(editor: Client) -> None:
    _listing("Organ recital", venue="St Mary's church", aliases=("Bach by candlelight",))
    _listing("Jazz brunch", venue="Blue Note")
    assert _shown(editor, q="recital") == {"Organ recital"}
    assert _shown(editor, q="mary") == {"Organ recital"}
    assert _shown(editor, q="candlelight") == {"Organ recital"}
    assert _shown(editor, q="blue note") == {"Jazz brunch"}


def test_it_filters_by_source_kind_and_status(editor: Client) -> None:
    _listing("Organ recital")
    calendar = source("Blue Note", kind=Source.Kind.CALENDAR)
    _listing("Jazz brunch", feed=calendar)
    Listing.objects.filter(title="Organ recital").update(status=Listing.Status.WITHDRAWN)
    assert _shown(editor, source_kind="calendar") == {"Jazz brunch"}
    assert _shown(editor, source_kind="feed") == {"Organ recital"}
    assert _shown(editor, status__exact="withdrawn") == {"Organ recital"}


def test_it_filters_upcoming_past_and_undated_listings(editor: Client) -> None:
    _listing("Last year's fair", starts_at=PAST)
    _listing("Next year's fair", starts_at=FUTURE)
    _listing("An exhibition on now", starts_at=PAST, ends_at=FUTURE)
    _listing("Walking tour on request", starts_at=None)
    assert _shown(editor, when="upcoming") == {"Next year's fair", "An exhibition on now"}
    assert _shown(editor, when="past") == {"Last year's fair"}
    assert _shown(editor, when="undated") == {"Walking tour on request"}


def test_it_filters_listings_changed_in_the_last_hour(editor: Client) -> None:
    _listing("Organ recital")
    _listing("Jazz brunch")
    two_hours_ago = timezone.now() - timedelta(hours=2)
    Listing.objects.filter(title="Jazz brunch").update(updated_at=two_hours_ago)
    assert _shown(editor, fresh="hour") == {"Organ recital"}


def test_it_filters_by_what_the_active_generation_holds_of_each_listing(editor: Client) -> None:
    current, stale, missing, elsewhere = (
        _listing(title) for title in ("Current", "Stale", "Missing", "Only in a new generation")
    )
    active = generations.ensure_active_generation(MODEL_NAME, DIMENSIONS)
    building = generations.create_generation(MODEL_NAME, DIMENSIONS)
    _embed(current, active, 1)
    Listing.objects.filter(pk=stale.pk).update(content_version=2)
    _embed(stale, active, 1)
    _embed(elsewhere, building, 1)
    assert _shown(editor, embedded="current") == {"Current"}
    assert _shown(editor, embedded="stale") == {"Stale"}
    assert _shown(editor, embedded="missing") == {"Missing", "Only in a new generation"}
    assert missing.pk  # listed only as not embedded


def test_a_listing_shows_its_records_with_links_to_their_sources(editor: Client) -> None:
    feed, calendar = source("Courier"), source("Blue Note", kind=Source.Kind.CALENDAR)
    merging.merge(
        _listing("Organ recital", feed=feed, external_id="courier-17"),
        _listing("Jazz brunch", feed=calendar, external_id="ics-4"),
    )
    page = _change_page(editor, Listing.objects.get())
    for linked in (feed, calendar):
        assert reverse("admin:ingestion_source_change", args=[linked.pk]) in page
    assert "courier-17" in page
    assert "ics-4" in page


def test_it_says_which_generations_have_embedded_the_current_text(editor: Client) -> None:
    listing = _listing("Organ recital")
    active = generations.ensure_active_generation(MODEL_NAME, DIMENSIONS)
    building = generations.create_generation(MODEL_NAME, DIMENSIONS)
    _embed(listing, active, 1)
    page = _change_page(editor, listing)
    assert f"{active}: its current text (version 1)" in page
    assert f"{building}: not embedded yet" in page

    Listing.objects.filter(pk=listing.pk).update(content_version=2)  # as an edit does
    page = _change_page(editor, listing)
    assert f"{active}: an older text (version 1 of 2), to be redone" in page


def test_withdrawing_asks_why_first_and_keeps_the_reason(editor: Client) -> None:
    listing = _listing("Organ recital")
    asked = _act(editor, "withdraw", [listing])
    assert asked.status_code == 200
    assert "admin/ingestion/listing_status.html" in [t.name for t in asked.templates]
    assert "Organ recital" in asked.content.decode()
    assert "This field is required" not in asked.content.decode()  # asked, not scolded
    no_reason = _act(editor, "withdraw", [listing], confirmed="yes", reason="")
    assert no_reason.status_code == 200  # asked again
    listing.refresh_from_db()
    assert listing.status == Listing.Status.ACTIVE

    done = _act(editor, "withdraw", [listing], confirmed="yes", reason="Cancelled by the venue")
    assert done.status_code == 302
    listing.refresh_from_db()
    assert listing.status == Listing.Status.WITHDRAWN
    assert "Withdrawn: Cancelled by the venue (editors-member" in _change_page(editor, listing)


def test_a_listing_an_editor_withdrew_stays_withdrawn_when_its_source_changes_it(
    editor: Client,
) -> None:
    feed = source("Publisher feed")
    listing = _listing("Organ recital", feed=feed, external_id="organ")
    _act(editor, "withdraw", [listing], confirmed="yes", reason="Cancelled by the venue")
    apply_draft(feed, draft("organ", title="Organ recital (new date)"), timezone.now())
    listing.refresh_from_db()
    assert (listing.title, listing.status) == ("Organ recital (new date)", "withdrawn")

    _act(editor, "restore", [listing], confirmed="yes", reason="On again")
    apply_draft(feed, draft("organ", title="Organ recital, moved"), timezone.now())
    listing.refresh_from_db()
    assert listing.status == Listing.Status.ACTIVE
    # A listing its source withdrew comes back with the source's next version, as ever.
    apply_draft(feed, draft("organ", title="Organ recital, moved", withdrawn=True), timezone.now())
    listing.refresh_from_db()
    assert listing.status == Listing.Status.WITHDRAWN
    apply_draft(feed, draft("organ", title="Organ recital, on"), timezone.now())
    listing.refresh_from_db()
    assert listing.status == Listing.Status.ACTIVE


def test_restoring_queues_the_embedding_once_committed_and_logs_the_reason(
    editor: Client, django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks
) -> None:
    listing = _listing("Organ recital")
    already = _listing("Jazz brunch")
    Listing.objects.filter(pk=listing.pk).update(status=Listing.Status.WITHDRAWN)
    with django_capture_on_commit_callbacks() as callbacks:
        response = _act(editor, "restore", [listing, already], confirmed="yes", reason="Back on")
    assert response.status_code == 302
    assert callbacks == [tasks.schedule_embedding]  # restored: no vector until re-embedded
    listing.refresh_from_db()
    assert listing.status == Listing.Status.ACTIVE
    assert list(LogEntry.objects.values_list("object_id", "change_message")) == [
        (str(listing.pk), "Restored: Back on")  # not the one that was never withdrawn
    ]


def test_merging_shows_what_will_happen_before_it_happens(editor: Client) -> None:
    feed, calendar = source("Courier"), source("Blue Note", kind=Source.Kind.CALENDAR)
    keep = _listing("Organ recital", feed=feed, external_id="courier-17", aliases=("Bach",))
    other = _listing("Organ evening", feed=calendar, external_id="ics-4")
    asked = _act(editor, "merge_listings", [other, keep])
    assert asked.status_code == 200
    page = asked.content.decode()
    assert "The oldest listing is kept: <strong>Organ recital</strong>" in page
    assert "ics-4" in page  # the record that moves
    assert "Its aliases afterwards: Bach, Organ evening." in page
    assert Listing.objects.count() == 2  # nothing merged yet

    assert _act(editor, "merge_listings", [other, keep], confirmed="yes").status_code == 302
    merged = Listing.objects.get()
    assert (merged.pk, merged.aliases) == (keep.pk, ["Bach", "Organ evening"])
    assert set(merged.records.values_list("external_id", flat=True)) == {"courier-17", "ics-4"}


def test_splitting_shows_what_will_happen_and_does_just_that(editor: Client) -> None:
    feed, calendar = source("Courier"), source("Blue Note", kind=Source.Kind.CALENDAR)
    kept = merging.merge(
        _listing("Organ recital", feed=feed, external_id="courier-17"),
        _listing("Organ evening", feed=calendar, external_id="ics-4"),
    )
    records = list(SourceRecord.objects.order_by("pk"))
    changelist = reverse("admin:ingestion_sourcerecord_changelist")
    form = {"action": "split_records", "_selected_action": [r.pk for r in records]}
    asked = editor.post(changelist, form)
    assert asked.status_code == 200
    page = asked.content.decode()
    assert "a new listing, “Organ recital”" in page  # the first record splits off
    assert "not split: it is its listing&#x27;s last record" in page  # the second stays
    assert f"“Organ recital” (#{kept.pk}) from Blue Note" in page
    assert Listing.objects.count() == 1

    assert editor.post(changelist, {**form, "confirmed": "yes"}).status_code == 302
    assert Listing.objects.count() == 2
    left = Listing.objects.get(pk=kept.pk)
    assert (left.title, list(left.records.values_list("external_id", flat=True))) == (
        "Organ evening",
        ["ics-4"],
    )


def test_a_listing_a_record_leaves_is_rebuilt_from_its_latest_remaining_record(
    editor: Client,
) -> None:
    feed, calendar, desk = (
        source("Courier"),
        source("Blue Note", kind=Source.Kind.CALENDAR),
        source("Listings desk", kind=Source.Kind.EDITORIAL),
    )
    kept = merging.merge(
        merging.merge(
            _listing("Organ recital", feed=feed, external_id="courier-17"),
            _listing("Organ evening", feed=calendar, external_id="ics-4"),
        ),
        _listing("Bach by candlelight", feed=desk, external_id="desk-9"),  # the latest
    )
    first = SourceRecord.objects.get(external_id="courier-17")
    changelist = reverse("admin:ingestion_sourcerecord_changelist")
    form = {"action": "split_records", "_selected_action": [first.pk]}
    page = editor.post(changelist, form).content.decode()
    assert f"“Organ recital” (#{kept.pk}) from Listings desk (editorial) desk-9" in page

    editor.post(changelist, {**form, "confirmed": "yes"})
    assert Listing.objects.get(pk=kept.pk).title == "Bach by candlelight"


def _many_listings(count: int, records_each: int = 1) -> list[Listing]:
    """`count` listings with `records_each` records each (two sources, so both kinds show),
    embedded in the active generation, and a second generation being built: made in bulk,
    as no test needs them ingested."""
    active = generations.ensure_active_generation(MODEL_NAME, DIMENSIONS)
    generations.create_generation(MODEL_NAME, DIMENSIONS)  # before the rows its index covers
    feed, calendar = source("Courier"), source("Blue Note", kind=Source.Kind.CALENDAR)
    listings = Listing.objects.bulk_create(
        Listing(title=f"Listing {n}", venue="Hall", starts_at=FUTURE) for n in range(count)
    )
    SourceRecord.objects.bulk_create(
        SourceRecord(
            source=feed if n % 2 else calendar,
            external_id=f"{listing.pk}-{n}",
            content_hash="-",
            listing=listing,
        )
        for listing in listings
        for n in range(records_each)
    )
    vector = [1.0] + [0.0] * (DIMENSIONS - 1)
    ListingEmbedding.objects.bulk_create(
        ListingEmbedding(
            listing=listing,
            generation=active,
            embedding=vector,
            content_version=1,
            embedded_at=timezone.now(),
        )
        for listing in listings
    )
    return listings


@pytest.mark.parametrize(
    "params",
    [{}, {"q": "listing 1"}, {"embedded": "current", "source_kind": "feed", "when": "upcoming"}],
)
def test_the_changelist_is_a_fixed_number_of_queries(
    editor: Client, django_assert_num_queries: DjangoAssertNumQueries, params: dict[str, str]
) -> None:
    _many_listings(300, records_each=2)
    # The user and their permissions (own and group's), the two counts (filtered and all),
    # the page, and the date hierarchy's range and days: none per row.
    with django_assert_num_queries(8):
        response = editor.get(reverse(CHANGELIST), params)
    assert response.status_code == 200
    assert len(response.context["cl"].result_list) == 100  # a full page


def test_a_listings_change_page_is_a_fixed_number_of_queries(
    editor: Client, django_assert_num_queries: DjangoAssertNumQueries
) -> None:
    [listing] = _many_listings(1, records_each=200)
    ContentType.objects.clear_cache()  # counted the same whichever tests ran before
    # The user, the listing, the permissions (two), its content type, the records with
    # their sources, the live generations with its version in each, its last status change.
    with django_assert_num_queries(8):
        response = editor.get(reverse("admin:ingestion_listing_change", args=[listing.pk]))
    assert response.status_code == 200
    assert response.content.decode().count("/admin/ingestion/source/") >= 200
