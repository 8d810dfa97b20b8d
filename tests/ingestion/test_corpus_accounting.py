"""Every file of the shared feed and calendar corpora through the real pipeline, checked
against counts that do not come from our parsers.

Feeds: a file holds as many items as it has elements named item or entry, counted by
expat (xml.etree) where expat can read the file, and otherwise by the standard library's
HTML tokenizer, which reads on through what expat refuses (ill-formed XML, HTML entities,
encodings expat lacks). Each poll counts that many items, its outcomes add up to them,
and each is a source record or a quarantined item. A file rejected whole (the rejections
test_feed_corpus lists by hand, with their reasons) is one quarantined item.

Calendars: each VEVENT series of a file (the UIDs of its BEGIN:VEVENT blocks, read line
by line, and each block without one) reaches the listings or the quarantine, within a
window wide enough for every occurrence in the corpora, and nothing reaches them that no
VEVENT holds. Their occurrences have no second implementation to count against, so in
the default window a calendar poll must at least count what the parser found.
"""

import codecs
import re
from collections import Counter
from datetime import UTC, datetime
from html.parser import HTMLParser
from pathlib import Path
from xml.etree import ElementTree
from xml.etree.ElementTree import ParseError

import pytest
from pytest_django.fixtures import Settings

from ingestion.drafts import PayloadError
from ingestion.models import Poll, Source
from ingestion.parsing import parse_payload
from ingestion.polling import ingest_payload
from tests.conftest import SHARED_DATA

if not SHARED_DATA.is_dir():
    pytest.skip(f"shared corpora not found at {SHARED_DATA}", allow_module_level=True)

from tests.ingestion.test_calendar_corpus import CALENDARS
from tests.ingestion.test_calendar_corpus import FILES as CALENDAR_FILES
from tests.ingestion.test_feed_corpus import CORPORA as FEED_CORPORA
from tests.ingestion.test_feed_corpus import FEEDS, corpus_inputs, expected_rejection

pytestmark = [pytest.mark.slow, pytest.mark.django_db]
FEED_FILES = [path for corpus in FEED_CORPORA for path in corpus_inputs(corpus)]
COUNTS = ("new", "updated", "unchanged", "withdrawn", "quarantined")
# A fixed "now": the calendar window, and so each file's item count, must not depend on
# the day the suite runs.
FIXED_NOW = datetime(2026, 6, 1, tzinfo=UTC)
# feedparser reads CDF's <ITEM> and an <item> inside an Atom feed as entries too.
ENTRY_NAMES = {"item", "entry"}
# Days around FIXED_NOW that hold every occurrence of the calendar corpora (1997-2024).
WIDE_WINDOW_DAYS = 100 * 365
# Series with no occurrence at all, so in neither the listings nor the quarantine: every
# date their RRULE gives before its UNTIL is one of their EXDATEs (checked by hand).
ALL_OCCURRENCES_EXCLUDED = {
    "recurring-ical-events-calendars/recurring_ical_events/test/calendars/"
    "issue_173_only_modifications_error.ics": {
        "2uehf184etp8kcp1jua3lga37g_R20230117T080000@google.com",
        "2uehf184etp8kcp1jua3lga37g_R20230606T070000@google.com",
        "4bpovm9kuobbeu3nk5f7u6fsnv_R20240610T110000@google.com",
        "4bpovm9kuobbeu3nk5f7u6fsnv_R20240812T110000@google.com",
        "4bpovm9kuobbeu3nk5f7u6fsnv_R20241014T110000@google.com",
        "5fka040k5vf2jfn5sgle115496_R20240730T080000@google.com",
    },
}
# VEVENTs without a UID and without an occurrence: an UNTIL before DTSTART is how
# Confluence marks a deleted event (recurring-ical-events' own test expects none).
UIDLESS_WITHOUT_OCCURRENCES = {
    "recurring-ical-events-calendars/recurring_ical_events/test/calendars/"
    "issue_117_until_before_dtstart.ics": 1,
}


class _EntryTags(HTMLParser):
    """Start tags named item or entry, whatever their case or namespace prefix."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.count = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag.rpartition(":")[2] in ENTRY_NAMES:
            self.count += 1


def _decoded(payload: bytes) -> str:
    """Text for the tokenizer: UTF-32 and UTF-16 by their mark or by the zero bytes around
    the first "<" (XML 1.0, appendix F); anything else as UTF-8, which keeps the ASCII
    markup of every 8-bit encoding."""
    if payload.startswith((codecs.BOM_UTF32_LE, codecs.BOM_UTF32_BE)):
        return payload.decode("utf-32", errors="replace")
    if payload.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return payload.decode("utf-16", errors="replace")
    for codec, opening in (
        ("utf-32-be", b"\0\0\0<"),
        ("utf-32-le", b"<\0\0\0"),
        ("utf-16-be", b"\0<"),
        ("utf-16-le", b"<\0"),
    ):
        if payload.startswith(opening):
            return payload.decode(codec, errors="replace")
    return payload.decode("utf-8", errors="replace")


def feed_entries(payload: bytes) -> tuple[int, str]:
    """The payload's item and entry elements, and which tool counted them."""
    try:
        # An entity declaration is never expanded here: the tokenizer counts those files.
        if "<!ENTITY" in _decoded(payload).upper():
            raise ValueError("entity declarations are left to the tokenizer")
        root = ElementTree.fromstring(payload)  # noqa: S314  # trusted test corpora, entities refused above
    # Ill-formed, a codec expat lacks, or an entity declaration.
    except (ParseError, ValueError, LookupError):
        tokenizer = _EntryTags()
        tokenizer.feed(_decoded(payload))
        tokenizer.close()
        return tokenizer.count, "tokenizer"
    names = (element.tag.rpartition("}")[2].lower() for element in root.iter())
    return sum(name in ENTRY_NAMES for name in names), "expat"


def _ingest(kind: str, number: int, path: Path) -> tuple[Source, Poll]:
    source = Source.objects.create(name=f"{kind}-{number}", kind=kind, url=str(path))
    return source, ingest_payload(source, path.read_bytes(), started_at=FIXED_NOW)


def _accounted(poll: Poll) -> tuple[int, int]:
    """(the poll's items, its outcomes' sum)."""
    return poll.items, sum(getattr(poll, name) for name in COUNTS)


def test_every_feed_item_is_accounted_for() -> None:
    mismatches: list[str] = []
    tools: Counter[str] = Counter()
    for number, path in enumerate(FEED_FILES):
        source, poll = _ingest(Source.Kind.FEED, number, path)
        rejected = bool(expected_rejection(path))
        if rejected:
            expected, tool = 1, "rejected whole"
        else:
            expected, tool = feed_entries(path.read_bytes())
        tools[tool] += 1
        stored = source.records.count() + source.quarantine.count()
        items, outcomes = _accounted(poll)
        if not (items == outcomes == stored == expected) or rejected != (
            poll.status == Poll.Status.REJECTED
        ):
            mismatches.append(
                f"{path.relative_to(FEEDS)}: {tool} counted {expected}; poll {poll.status}"
                f" items={items} outcomes={outcomes}; stored={stored}"
            )
    assert not mismatches, "\n".join(mismatches[:30])
    # Every file went one of three explicit ways; most are well-formed.
    assert tools["expat"] > 2000
    assert tools["tokenizer"] > 250
    assert tools.total() == len(FEED_FILES) > 2500


_UID = re.compile(r"UID(?:;[^:]*)?:(.*)", re.I)


def vevent_uids(payload: bytes) -> tuple[set[str], int]:
    """The UIDs of the payload's VEVENTs, and how many VEVENTs have none, read from its
    lines with their folding undone (RFC 5545, 3.1) and blank lines skipped, as icalendar
    skips them."""
    lines: list[str] = []
    for line in payload.decode("utf-8", errors="replace").splitlines():
        if line[:1] in (" ", "\t") and lines:
            lines[-1] += line[1:]
        elif line.strip():
            lines.append(line.strip())
    uids: set[str] = set()
    without, has_uid = 0, False
    components: list[str] = []  # the BEGIN:s open at this line, innermost last
    for line in lines:
        keyword, _, value = line.partition(":")
        if keyword.upper() == "BEGIN":
            components.append(value.upper())
            has_uid = has_uid and value.upper() != "VEVENT"
        elif keyword.upper() == "END" and components:
            if components.pop() == "VEVENT" and not has_uid:
                without += 1
        elif components[-1:] == ["VEVENT"] and (uid := _UID.fullmatch(line)):
            uids.add(uid.group(1))  # the event's own, not an alarm's inside it
            has_uid = True
    return uids, without


def test_every_calendar_series_reaches_the_listings_or_the_quarantine(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("ingestion.parsing.timezone.now", lambda: FIXED_NOW)
    settings.CALENDAR_WINDOW_PAST_DAYS = settings.CALENDAR_WINDOW_FUTURE_DAYS = WIDE_WINDOW_DAYS
    mismatches: list[str] = []
    outcomes: Counter[str] = Counter()
    for number, path in enumerate(CALENDAR_FILES):
        source, poll = _ingest(Source.Kind.CALENDAR, number, path)
        outcomes[poll.status] += 1
        name = str(path.relative_to(CALENDARS))
        if poll.status == Poll.Status.REJECTED:
            if poll.items != 1 or source.quarantine.count() != 1:
                mismatches.append(f"{name}: rejected, but {poll.items} items")
            continue
        uids, without_uid = vevent_uids(path.read_bytes())
        ids = list(source.records.values_list("external_id", flat=True))
        ids += source.quarantine.values_list("external_id", flat=True)
        # An event's id, one-off or series, is its UID.
        missing = uids - set(ids)
        missing -= ALL_OCCURRENCES_EXCLUDED.get(name, set())
        invented = {i for i in ids if i and not i.startswith("nouid:") and i not in uids}
        # Each UID-less series has a synthetic id; one that cannot be read is quarantined
        # with none.
        uidless = len({i for i in ids if i.startswith("nouid:")})
        uidless += sum(not i for i in ids)
        without_uid -= UIDLESS_WITHOUT_OCCURRENCES.get(name, 0)
        if uidless != without_uid:
            mismatches.append(f"{name}: {without_uid} VEVENTs without UID, {uidless} reached")
        if missing or invented:
            mismatches.append(f"{name}: missing {sorted(missing)}, invented {sorted(invented)}")
    assert not mismatches, "\n".join(mismatches[:30])
    assert outcomes[Poll.Status.OK] > 250


def _expected_items(kind: str, payload: bytes) -> int:
    try:
        return parse_payload(kind, payload).items
    except PayloadError:
        return 1


def test_every_calendar_poll_counts_what_the_parser_found(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("ingestion.parsing.timezone.now", lambda: FIXED_NOW)
    mismatches: list[str] = []
    total = 0
    for number, path in enumerate(CALENDAR_FILES):
        _, poll = _ingest(Source.Kind.CALENDAR, number, path)
        items, outcomes = _accounted(poll)
        expected = _expected_items(Source.Kind.CALENDAR, path.read_bytes())
        if not (items == outcomes == expected):
            mismatches.append(f"{path}: items={items} counted={outcomes} parser={expected}")
        total += items
    assert not mismatches, "\n".join(mismatches[:20])
    assert len(CALENDAR_FILES) > 100
    assert total > 100
