"""Payloads through the real parsers into the database: accounting, de-duplication,
quarantine and bad input."""

import time
import tracemalloc
from contextlib import nullcontext

import pytest
from django.utils import timezone

from ingestion.demo import DEMO_DIR
from ingestion.drafts import PayloadError
from ingestion.models import Listing, Poll, QuarantinedItem, Source
from ingestion.parsing import parse_payload
from ingestion.polling import ingest_payload
from tests.factories import source

pytestmark = pytest.mark.django_db

COUNTS = ("new", "updated", "unchanged", "withdrawn", "quarantined")

ENTITY_BOMB = b"""<?xml version="1.0"?>
<!DOCTYPE rss [
 <!ENTITY a "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa">
 <!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">
 <!ENTITY c "&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;">
 <!ENTITY d "&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;">
 <!ENTITY e "&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;">
 <!ENTITY f "&e;&e;&e;&e;&e;&e;&e;&e;&e;&e;&e;&e;&e;&e;&e;&e;&e;&e;&e;&e;">
]>
<rss version="2.0"><channel><title>&f;</title>
<item><title>&f;</title><guid>1</guid></item></channel></rss>"""

SECONDLY_CALENDAR = b"""BEGIN:VCALENDAR
VERSION:2.0
PRODID:-//test//EN
BEGIN:VEVENT
UID:forever@example
DTSTAMP:20260101T000000Z
DTSTART:20260101T000000Z
RRULE:FREQ=SECONDLY
SUMMARY:Every second, forever
END:VEVENT
BEGIN:VEVENT
UID:fine@example
DTSTAMP:20260101T000000Z
DTSTART;TZID=Europe/London:20270301T190000
SUMMARY:Quiz night
LOCATION:The Anchor
END:VEVENT
END:VCALENDAR
"""


def _ingest(src: Source, payload: bytes, name: str = "") -> Poll:
    return ingest_payload(src, payload, started_at=timezone.now(), name_hint=name)


def _ingest_measured(src: Source, payload: bytes) -> tuple[Poll, float, int]:
    """Ingest once for the time (tracemalloc slows Python down many times over) and parse
    again under tracemalloc for the peak memory."""
    started = time.perf_counter()
    poll = _ingest(src, payload)
    elapsed = time.perf_counter() - started
    tracemalloc.start()
    try:
        with pytest.raises(PayloadError) if poll.status == Poll.Status.REJECTED else nullcontext():
            parse_payload(src.kind, payload)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return poll, elapsed, peak


def _assert_adds_up(poll: Poll) -> None:
    assert poll.items == sum(getattr(poll, name) for name in COUNTS), poll.__dict__


def test_the_demo_feed_and_calendar_share_the_concert() -> None:
    feed = source("Courier", Source.Kind.FEED)
    calendar = source("Blue Note", Source.Kind.CALENDAR)
    feed_poll = _ingest(feed, (DEMO_DIR / "publisher-feed.xml").read_bytes())
    calendar_poll = _ingest(calendar, (DEMO_DIR / "venue-calendar.ics").read_bytes())
    assert (feed_poll.status, feed_poll.new) == (Poll.Status.OK, 4)
    assert calendar_poll.updated == 1  # the concert joined the feed's listing
    _assert_adds_up(feed_poll)
    _assert_adds_up(calendar_poll)
    concert = Listing.objects.get(title__icontains="nina simone")
    assert sorted(r.source.kind for r in concert.records.all()) == ["calendar", "feed"]


def test_an_unchanged_payload_writes_nothing_new() -> None:
    feed = source("Courier", Source.Kind.FEED)
    payload = (DEMO_DIR / "publisher-feed.xml").read_bytes()
    _ingest(feed, payload)
    stamps = list(Listing.objects.order_by("pk").values_list("updated_at", flat=True))
    again = _ingest(feed, payload)
    assert (again.items, again.unchanged) == (4, 4)
    assert list(Listing.objects.order_by("pk").values_list("updated_at", flat=True)) == stamps


def test_an_entity_bomb_is_quarantined_quickly_in_bounded_memory() -> None:
    feed = source("Hostile", Source.Kind.FEED)
    good = source("Courier", Source.Kind.FEED)
    poll, elapsed, peak = _ingest_measured(feed, ENTITY_BOMB)
    assert poll.status == Poll.Status.REJECTED
    assert (poll.items, poll.quarantined) == (1, 1)
    assert elapsed < 1.0
    assert peak < 20 * 1024 * 1024
    item = QuarantinedItem.objects.get(source=feed)
    assert "entit" in item.reason.lower()
    assert _ingest(good, (DEMO_DIR / "publisher-feed.xml").read_bytes()).new == 4


def test_an_endless_secondly_rule_is_quarantined_and_the_good_event_kept() -> None:
    calendar = source("Pub calendar", Source.Kind.CALENDAR)
    poll, elapsed, peak = _ingest_measured(calendar, SECONDLY_CALENDAR)
    assert elapsed < 2.0
    assert peak < 50 * 1024 * 1024
    assert (poll.new, poll.quarantined) == (1, 1)
    _assert_adds_up(poll)
    assert Listing.objects.get().title == "Quiz night"
    bad = QuarantinedItem.objects.get()
    assert bad.external_id.startswith("forever@example")
    assert bad.position is not None


def test_bad_editorial_records_are_quarantined_and_good_ones_ingested() -> None:
    desk = source("Desk", Source.Kind.EDITORIAL)
    payload = (
        b'[{"id": "a", "title": "Choir concert", "start": "2027-01-09T19:00:00+00:00"},'
        b' {"id": "b", "title": ""},'
        b' {"id": "c", "title": "Bad time", "start": "next tuesday"}]'
    )
    poll = _ingest(desk, payload, "records.json")
    assert (poll.items, poll.new, poll.quarantined) == (3, 1, 2)
    reasons = dict(QuarantinedItem.objects.values_list("external_id", "reason"))
    assert "title" in reasons["b"]
    assert "start" in reasons["c"]


def test_a_new_snapshot_supersedes_earlier_quarantine_entries() -> None:
    desk = source("Desk", Source.Kind.EDITORIAL)
    _ingest(desk, b'[{"id": "b", "title": ""}]', "records.json")
    _ingest(desk, b'[{"id": "b", "title": "Fixed upstream"}]', "records.json")
    assert not QuarantinedItem.objects.filter(resolved_at=None).exists()


def test_a_payload_that_is_no_feed_at_all_is_rejected_with_its_reason() -> None:
    feed = source("Broken", Source.Kind.FEED)
    poll = _ingest(feed, b"<html><body>Gateway timeout</body></html>")
    assert poll.status == Poll.Status.REJECTED
    assert poll.error
    assert QuarantinedItem.objects.get(source=feed).reason == poll.error
