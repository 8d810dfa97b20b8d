"""Venue calendars (iCalendar) to listing drafts: one draft per event in a window.

Input items are events: each VEVENT series (a master with its RRULE, RDATE and EXDATE,
plus its RECURRENCE-ID overrides, grouped by UID) is expanded by recurring-ical-events
within [window_start, window_end), and becomes one draft with its occurrences in the
window (calendar_series.py); a one-off event overlapping the window is a draft of its
own. A VEVENT that can't be read (no DTSTART, a broken date, an unknown TZID, DTEND
before DTSTART...) is one bad item, and so is a series that can't be expanded within the
caps; the other events still parse. Positions are VEVENT indexes: a series' is its
master's (or, without one in the payload, its first override's).

Expansion is bounded before the library runs: at most `max_occurrences_per_event` in
the window, and a deterministic budget of dateutil work per payload (recurrence_budget).

External ids must survive re-polls, because they are how a listing is found again:
  - an event, one-off or series, is its UID alone, so moving it to another day, or
    moving, adding or cancelling one of a series' dates, updates the listing;
  - an event without UID gets "nouid:" + a hash of its summary, start and location:
    the fields a reader would use to tell two events apart, and ones a re-export keeps.
"""

import hashlib
import re
from collections import defaultdict
from datetime import UTC, date, datetime, timedelta
from urllib.parse import urlsplit
from zoneinfo import ZoneInfo

from icalendar import Component
from recurring_ical_events import EventAdapter, Occurrence, Series

from ingestion.drafts import BadItem, ListingDraft, ParseResult
from ingestion.parsers.calendar_payload import whole_calendars
from ingestion.parsers.calendar_series import one_series, rule_in_words
from ingestion.parsers.calendar_time import (
    as_aware,
    calendar_zones,
    iana_name,
    iana_zone,
    localise_event,
    utc_stamp,
    when,
)
from ingestion.parsers.recurrence_budget import ExpansionBudget, recurrence_problem

MAX_DESCRIPTION_CHARS = 5000
# About one second of recurrence expansion per payload (see ExpansionBudget).
EXPANSION_BUDGET_US = 1_000_000
# Properties without which, if icalendar could not parse them, an event means nothing.
_ESSENTIAL = {"DTSTART", "DTEND", "DURATION", "RRULE", "RDATE", "EXDATE", "RECURRENCE-ID"}
# Properties RFC 5545 allows once per VEVENT; twice leaves the event ambiguous.
_SINGLE = ("UID", "DTSTART", "DTEND", "DURATION", "RECURRENCE-ID")
_VEVENT_BLOCK = re.compile(rb"^BEGIN:VEVENT\s*?$.*?^END:VEVENT\s*?$", re.I | re.M | re.S)


class _Event(EventAdapter):  # type: ignore[misc]  # recurring-ical-events is untyped
    """A VEVENT that passed validation, with where it came from."""

    def __init__(self, component: Component, position: int, zone: ZoneInfo, raw: str) -> None:
        super().__init__(component)
        self.component = component
        self.position = position
        self.zone = zone
        self.raw = raw  # the VEVENT as the payload spelled it, for editors


class _Occurrence(Occurrence):  # type: ignore[misc]  # recurring-ical-events is untyped
    """The library's occurrence, keeping its event reachable (the library's is private)."""

    def __init__(self, event: _Event, start: date | None = None, end: date | None = None) -> None:
        super().__init__(event, start, end)
        self.event = event


class _Series(Series):  # type: ignore[misc]  # recurring-ical-events is untyped
    """The library's series, making `_Occurrence`s (its documented extension point)."""

    def occurrence(
        self, adapter: _Event, start: date | None = None, end: date | None = None
    ) -> _Occurrence:
        return _Occurrence(adapter, start, end)


def parse_calendar(
    payload: bytes,
    *,
    window_start: datetime,
    window_end: datetime,
    max_occurrences_per_event: int = 500,
    max_items: int = 20000,
    default_timezone: str = "UTC",
) -> ParseResult:
    """Drafts for the occurrences of the payload's events in [window_start, window_end)."""
    default_zone = iana_zone(default_timezone)
    if default_zone is None or window_start.tzinfo is None or window_end.tzinfo is None:
        raise ValueError("needs aware window bounds and an IANA default_timezone")
    if window_start >= window_end:
        raise ValueError("the window must end after it starts")
    window = (window_start.astimezone(UTC), window_end.astimezone(UTC))
    payload = payload.removeprefix(b"\xef\xbb\xbf")  # a UTF-8 BOM, which icalendar skips
    result = ParseResult()
    series: dict[str, list[_Event]] = defaultdict(list)
    for event in _valid_events(payload, default_zone, max_items, result):
        series[str(event.uid)].append(event)
    budget = ExpansionBudget(EXPANSION_BUDGET_US)
    for uid, events in series.items():
        first = events[0]
        try:
            items = _occurrences(uid, events, window, max_occurrences_per_event, budget)
        except _UnexpandableError as error:
            items = [BadItem(first.position, uid, str(error), first.raw)]
        except Exception as error:  # a library failure on one series must not lose the rest
            reason = f"cannot expand: {type(error).__name__}: {error}"
            items = [BadItem(first.position, uid, reason, first.raw)]
        for item in items:
            result.add(item)
    return result


class _UnexpandableError(Exception):
    """A series that can't become drafts; its message is the bad item's reason."""


def _valid_events(
    payload: bytes, default_zone: ZoneInfo, max_items: int, result: ParseResult
) -> list[_Event]:
    """The VEVENTs that can be read, localised; the others go to `result.bad`."""
    calendars = whole_calendars(payload, max_items)
    raw_blocks = [
        match.group().decode(errors="replace") for match in _VEVENT_BLOCK.finditer(payload)
    ]
    synthetic_uids: dict[str, int] = {}
    valid: list[_Event] = []
    position = 0
    for calendar in calendars:
        zones = calendar_zones(calendar, default_zone)
        zone = zones.floating
        for component in calendar.walk("VEVENT"):
            raw = raw_blocks[position] if position < len(raw_blocks) else ""
            uid = _text(component, "UID")
            try:
                problem = _unreadable(component) or localise_event(component, zones)
                problem = problem or _backwards(component, zone)
            except Exception as error:  # odd values icalendar let through: one bad item
                problem = f"cannot read: {type(error).__name__}: {error}"
            if not problem and not uid:
                uid = _synthetic_uid(component, zone)
                if uid in synthetic_uids:
                    twin = synthetic_uids[uid]
                    problem = f"no UID, and the same summary, start and place as VEVENT {twin}"
                synthetic_uids.setdefault(uid, position)
                component["UID"] = uid
            if problem:
                result.bad.append(BadItem(position, uid or None, problem, raw))
            else:
                valid.append(_Event(component, position, zone, raw))
            position += 1
    return valid


def _unreadable(component: Component) -> str | None:
    for name, message in component.errors:
        if name in _ESSENTIAL:
            return f"invalid {name}: {message}"
    if "DTSTART" not in component:
        return "no DTSTART"
    for name in _SINGLE:
        if isinstance(component.get(name), list):
            return f"{name} appears more than once"
    if not _text(component, "SUMMARY") and "RECURRENCE-ID" not in component:
        return "no SUMMARY"  # an override may leave its title to the master
    return None


def _backwards(component: Component, zone: ZoneInfo) -> str | None:
    start = as_aware(when(component, "DTSTART"), zone)
    if "DTEND" in component and as_aware(when(component, "DTEND"), zone) < start:
        return "DTEND is before DTSTART"
    if "DURATION" in component and when(component, "DURATION") < timedelta(0):
        return "DURATION is negative"
    return None


def _occurrences(
    uid: str,
    events: list[_Event],
    window: tuple[datetime, datetime],
    cap: int,
    budget: ExpansionBudget,
) -> list[ListingDraft | BadItem]:
    """The event's draft: a one-off's, or its series' with the occurrences in the window
    (calendar_series.py); a bad item if untitled."""
    masters = [event for event in events if not event.is_modification()]
    # The library scans a wider span than the window: back by the event's duration, and
    # both ways by how far RANGE=THISANDFUTURE overrides move their occurrences.
    reaches = [e.extend_query_span_by for e in events if e in masters or e.this_and_future]
    span = (
        window[0] - max((before for before, _ in reaches), default=timedelta(0)),
        window[1] + max((after for _, after in reaches), default=timedelta(0)),
    )
    for event in masters:  # all of them: the library keeps the one with the highest SEQUENCE
        problem = recurrence_problem(event.component, span, cap, budget)
        if problem:
            raise _UnexpandableError(problem)
    occurrences = sorted(_Series(events).between(*window))
    if len(occurrences) > cap:
        raise _UnexpandableError(f"recurrence produces more than {cap} occurrences in the window")
    master = max(masters, key=lambda event: event.sequence, default=None)
    recurring = len(events) > 1 or bool(master and {"RRULE", "RDATE"} & set(master.component))
    drafts = [_draft(occurrence, uid, master) for occurrence in occurrences]
    if not recurring or not drafts:
        return [
            draft if draft.title else BadItem(draft.position, uid, "no SUMMARY", event.raw)
            for draft, event in zip(drafts, (o.event for o in occurrences), strict=True)
        ]
    # The series' words are its master's, whichever of its dates fall in the window, else
    # (no master in the payload) the first override's.
    template = _draft(_Occurrence(master), uid, master) if master else drafts[0]
    if not template.title:
        return [BadItem(template.position, uid, "no SUMMARY", (master or events[0]).raw)]
    return [one_series(uid, drafts, template, _rule_in_words(master, events))]


def _rule_in_words(master: _Event | None, events: list[_Event]) -> str:
    """The master's rule in words, unless an override moves every date from one on
    (RANGE=THISANDFUTURE): the rule then no longer says when the series is."""
    if master is None or any(event.this_and_future for event in events):
        return ""
    return rule_in_words(master.component, as_aware(when(master.component, "DTSTART"), master.zone))


def _draft(occurrence: _Occurrence, uid: str, master: _Event | None) -> ListingDraft:
    """One occurrence as if it were a one-off: a series' drafts are folded into one."""
    event = occurrence.event
    component = event.component
    zone = event.zone
    fallback = master.component if master else component

    def text(name: str) -> str:
        return _text(component, name) or _text(fallback, name)

    starts_at, ends_at = as_aware(occurrence.start, zone), as_aware(occurrence.end, zone)
    all_day = not isinstance(occurrence.start, datetime)
    if all_day and ends_at <= starts_at:  # DTEND on the start day: a producer's slip
        ends_at = as_aware(occurrence.start + timedelta(days=1), zone)
    return ListingDraft(
        external_id=uid,
        title=" ".join(text("SUMMARY").split()),
        position=event.position,
        description=text("DESCRIPTION")[:MAX_DESCRIPTION_CHARS],
        venue=" ".join(text("LOCATION").split()),
        starts_at=starts_at,
        ends_at=ends_at,
        timezone=iana_name(occurrence.start, zone),
        url=_web_url(text("URL")),
        all_day=all_day,
        withdrawn=any(_text(c, "STATUS").upper() == "CANCELLED" for c in (component, fallback)),
    )


def _text(component: Component, name: str) -> str:
    value = component.get(name)
    if isinstance(value, list):  # a repeated property: the first one wins
        value = value[0] if value else None
    return "" if value is None else str(value).strip()


def _web_url(value: str) -> str:
    parts = urlsplit(value)
    return value if parts.scheme.lower() in ("http", "https") and parts.netloc else ""


def _synthetic_uid(component: Component, zone: ZoneInfo) -> str:
    key = "\x1f".join(
        (
            _text(component, "SUMMARY"),
            utc_stamp(when(component, "DTSTART"), zone),
            _text(component, "LOCATION"),
        )
    )
    return "nouid:" + hashlib.sha256(key.encode()).hexdigest()[:32]
