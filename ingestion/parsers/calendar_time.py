"""Times in iCalendar payloads: zones and canonical instants.

After `localise_event` every DATE-TIME of a VEVENT is timezone-aware, so recurrence
expansion, EXDATE and RECURRENCE-ID matching, and the window all compare instants.
DATE values (all-day events) stay dates until `as_aware` pins them to local midnight.
What a rule costs to expand is recurrence_budget.py's.
"""

from dataclasses import dataclass
from datetime import UTC, date, datetime, time, tzinfo
from functools import lru_cache
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from icalendar import Calendar, Component, Timezone
from icalendar.prop import vDDDLists, vDDDTypes
from icalendar.timezone import tzid_from_tzinfo

from ingestion.parsers.windows_zones import windows_zone

# The properties whose values are dates or date-times (RRULE's UNTIL is handled apart).
DATE_PROPERTIES = ("DTSTART", "DTEND", "RECURRENCE-ID", "RDATE", "EXDATE")

# A localised value (date, aware datetime or RDATE period) and why it could not be.
Localised = tuple[Any, str | None]


def when(component: Component, name: str) -> Any:
    """The value of a date, date-time or duration property (`.dt`).

    icalendar types `component[name]` as any property type; these three all have `.dt`.
    """
    prop: Any = component[name]
    return prop.dt


@lru_cache(maxsize=512)  # bounded: the names come from payloads
def iana_zone(name: str) -> ZoneInfo | None:
    """The IANA zone called `name`, or None: unknown names and path-like junk alike."""
    try:
        return ZoneInfo(name.strip())
    except (ZoneInfoNotFoundError, ValueError, OSError):  # "America" is a directory
        return None


@dataclass(frozen=True)
class CalendarZones:
    """What one VCALENDAR's times are in: floating ones, and those with a TZID."""

    floating: ZoneInfo
    utc_is_local: bool  # X-WR-TIMEZONE named `floating` (see localise_event)
    defined: dict[str, tzinfo]  # the calendar's own VTIMEZONE blocks, by TZID


def calendar_zones(calendar: Calendar, default: ZoneInfo) -> CalendarZones:
    """The calendar's zones; floating times in X-WR-TIMEZONE's, or else in `default`.

    X-WR-TIMEZONE is Google's and Apple's way of saying where a calendar lives; it is
    not RFC 5545, so an unknown value falls back to the default rather than failing.
    """
    named = calendar.get("X-WR-TIMEZONE")
    zone = iana_zone(str(named)) if named else None
    defined: dict[str, tzinfo] = {}
    for block in calendar.walk("VTIMEZONE"):
        # Built afresh, not looked up: icalendar's cache may hold another calendar's.
        built = _built_zone(block) if isinstance(block, Timezone) else None
        if built:
            defined.setdefault(str(block["TZID"]), built)
    return CalendarZones(zone or default, zone is not None, defined)


def _built_zone(block: Timezone) -> tzinfo | None:
    try:
        zone: tzinfo = block.to_tz(lookup_tzid=False)
    except Exception:  # a block icalendar let through but can't build: its TZID is unknown
        return None
    return zone


def localise_event(event: Component, zones: CalendarZones) -> str | None:
    """Make the event's date-times aware in place; return why it can't be, or None.

    Floating times are read in `zones.floating`. With X-WR-TIMEZONE (`utc_is_local`), UTC
    times are also moved to that zone: Google exports weekly 19:30 London events as
    19:30Z in winter, and only recurring them in London keeps them at 19:30 after the
    clocks change (the convention the x-wr-timezone package implements).
    """
    for name in DATE_PROPERTIES:
        values = event.get(name)
        for prop in values if isinstance(values, list) else [values]:
            if isinstance(prop, vDDDTypes):
                items = [prop]
            elif isinstance(prop, vDDDLists):
                items = prop.dts
            else:
                continue
            for item in items:
                tzid = item.params.get("TZID") or prop.params.get("TZID")
                item.dt, problem = _localise(item.dt, tzid and str(tzid), zones)
                if problem:
                    return problem
    _localise_until(event, zones.floating)
    return None


def _localise(value: Any, tzid: str | None, zones: CalendarZones) -> Localised:
    if isinstance(value, tuple):  # an RDATE period: (start, end or duration)
        start, problem = _localise(value[0], tzid, zones)
        end, _ = _localise(value[1], tzid, zones)
        return (start, end), problem
    if not isinstance(value, datetime):
        return value, None
    if tzid and not isinstance(value.tzinfo, ZoneInfo) and not _is_utc(value.tzinfo):
        # icalendar gives IANA names their ZoneInfo. Any other zone it gave came from a
        # VTIMEZONE it caches process-wide by TZID, keeping the first one seen: perhaps
        # another calendar's. So the TZID is read again here, first as a Windows zone
        # name (an id or a display name: IANA has the zone's history where Outlook's
        # VTIMEZONE holds only this year's rule), then as this calendar's own block.
        # A TZID that is neither names a zone nobody defined: guessing would move events.
        local = windows_zone(tzid) or zones.defined.get(tzid)
        if local is None:
            problem = "no VTIMEZONE defines it, and it is no IANA or Windows zone name"
            return value, f"unknown TZID {tzid!r}: {problem}"
        return value.replace(tzinfo=local), None
    if value.tzinfo is None:
        return value.replace(tzinfo=zones.floating), None
    if zones.utc_is_local and _is_utc(value.tzinfo):
        return value.astimezone(zones.floating), None
    return value, None


def _localise_until(event: Component, zone: ZoneInfo) -> None:
    """A floating UNTIL is in the event's wall time; dateutil wants it in UTC."""
    start = when(event, "DTSTART")
    local: tzinfo = start.tzinfo if isinstance(start, datetime) and start.tzinfo else zone
    rules = event.get("RRULE")
    for rule in rules if isinstance(rules, list) else [rules] if rules else []:
        until = rule.get("UNTIL")
        if until and isinstance(until[0], datetime) and until[0].tzinfo is None:
            rule["UNTIL"] = [until[0].replace(tzinfo=local).astimezone(UTC)]


def _is_utc(zone: tzinfo | None) -> bool:
    return zone is UTC or tzid_from_tzinfo(zone) in {"UTC", "Etc/UTC", "Z"}


def iana_name(value: date, zone: ZoneInfo) -> str:
    """The IANA name of the zone `value` is given in ('' for a custom VTIMEZONE)."""
    if not isinstance(value, datetime) or value.tzinfo is None:
        return zone.key
    if isinstance(value.tzinfo, ZoneInfo):
        return value.tzinfo.key
    if _is_utc(value.tzinfo):
        return "UTC"
    tzid = tzid_from_tzinfo(value.tzinfo)
    return tzid if tzid and iana_zone(tzid) else ""


def as_aware(value: date, zone: ZoneInfo) -> datetime:
    """A DATE becomes local midnight in `zone`; date-times are already aware."""
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=zone)
    return datetime.combine(value, time(), tzinfo=zone)


def utc_stamp(value: date, zone: ZoneInfo) -> str:
    """Canonical text for an instant: 20250330T183000Z, or 20250330 for a DATE.

    Used in external ids, so it must not depend on how the source spelled the zone.
    """
    if not isinstance(value, datetime):
        return value.strftime("%Y%m%d")
    return as_aware(value, zone).astimezone(UTC).strftime("%Y%m%dT%H%M%SZ")
