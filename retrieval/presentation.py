"""Listings as people read them: times in the listing's own zone, where a listing came from.

Pure functions of a listing's fields, shared by the page and the API so the two never
disagree. Weekday and month names are fixed English words, not strftime's %a and %b,
which follow the process's locale. A stored zone name is never trusted to be valid: an
unknown one falls back to the site's zone rather than failing a response.
"""

from collections.abc import Sequence
from datetime import date, datetime, time, timedelta
from zoneinfo import ZoneInfo

from ingestion.parsers.calendar_time import iana_zone

_WEEKDAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
# An en dash: closed up between two times of one day, spaced between two days.
_TO = "\u2013"
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def listing_zone(zone_name: str, site_zone: ZoneInfo) -> ZoneInfo:
    """The listing's own IANA zone; the site's when the name is blank or unknown."""
    return iana_zone(zone_name) or site_zone


def iso_local(dt: datetime | None, zone: ZoneInfo) -> str | None:
    """ISO 8601 with the offset `dt` has in `zone`."""
    return dt.astimezone(zone).isoformat() if dt is not None else None


def when_text(
    starts_at: datetime | None,
    ends_at: datetime | None,
    zone_name: str,
    all_day: bool,
    *,
    site_zone: ZoneInfo,
    now: datetime,
) -> str:
    """When the event is, in its own zone, as "Sat 6 Dec, 19:30-22:00 GMT" or "Sat 6 - Mon
    8 Dec" (with an en dash); the year only when it is not this year there; "" for an
    undated listing.

    An end not after the start is no end. An all-day end is exclusive, as iCalendar's
    DTEND: an event ending at the next midnight is one day long."""
    if starts_at is None:
        return ""
    zone = listing_zone(zone_name, site_zone)
    this_year = now.astimezone(zone).year
    start = starts_at.astimezone(zone)
    end = ends_at.astimezone(zone) if ends_at is not None and ends_at > starts_at else None
    if all_day:
        return _day_range(start.date(), _last_day(start.date(), end), this_year)
    first_day = _day(start.date(), this_year)
    if end is None:
        return f"{first_day}, {_clock(start)} {start.tzname()}"
    # The zone's abbreviation once at the end, unless the clocks changed in between.
    same_zone_name = start.tzname() == end.tzname()
    opening = _clock(start) if same_zone_name else f"{_clock(start)} {start.tzname()}"
    if end.date() == start.date():
        return f"{first_day}, {opening}{_TO}{_clock(end)} {end.tzname()}"
    last_day = _day(end.date(), this_year)
    return f"{first_day}, {opening} {_TO} {last_day}, {_clock(end)} {end.tzname()}"


def provenance_text(sources: Sequence[tuple[str, str]]) -> str:
    """ "from Barbican calendar · Time Out feed" for (name, kind) pairs: each name with
    its kind unless the name has that word already ("Editorial desk", not "Editorial desk
    editorial"); repeats left out, order kept."""
    labels: dict[str, str] = {}
    for name, kind in sources:
        words = name.split()
        if kind.casefold() not in (word.casefold() for word in words):
            words.append(kind)
        label = " ".join(words)
        labels.setdefault(label.casefold(), label)
    return f"from {' · '.join(labels.values())}" if labels else ""


def _last_day(first_day: date, end: datetime | None) -> date:
    """The last day an all-day event covers: the day before an exclusive midnight end."""
    if end is None:
        return first_day
    # The end is after the start, so a midnight end is at least the next day's.
    return end.date() - timedelta(days=end.time() == time())


def _day_range(first: date, last: date, this_year: int) -> str:
    """ "Sat 6 - Mon 8 Dec", "Sun 30 Nov - Tue 2 Dec" (en dashes): the month and year
    said once when both days share them."""
    if first == last:
        return _day(first, this_year)
    if first.year != last.year:
        return f"{_day(first, this_year)} {_TO} {_day(last, this_year)}"
    opening = f"{_WEEKDAYS[first.weekday()]} {first.day}"
    if first.month != last.month:
        opening += f" {_MONTHS[first.month - 1]}"
    return f"{opening} {_TO} {_day(last, this_year)}"


def _day(day: date, this_year: int) -> str:
    """ "Sat 6 Dec", or "Sat 6 Dec 2026" outside this year."""
    text = f"{_WEEKDAYS[day.weekday()]} {day.day} {_MONTHS[day.month - 1]}"
    return text if day.year == this_year else f"{text} {day.year}"


def _clock(moment: datetime) -> str:
    return f"{moment.hour:02d}:{moment.minute:02d}"
