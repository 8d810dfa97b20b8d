"""Times in iCalendar payloads: zones, canonical instants, and what a rule costs.

After `localise_event` every DATE-TIME of a VEVENT is timezone-aware, so recurrence
expansion, EXDATE and RECURRENCE-ID matching, and the window all compare instants.
DATE values (all-day events) stay dates until `as_aware` pins them to local midnight.
`recurrence_problem` decides, in bounded time, whether a rule may be expanded at all.
"""

from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta, tzinfo
from functools import lru_cache
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from dateutil.rrule import rrulestr
from icalendar import Calendar, Component, Timezone
from icalendar.prop import vDDDLists, vDDDTypes, vRecur
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


# --- Bounded recurrence -------------------------------------------------------------------
#
# dateutil (under recurring-ical-events) expands a rule from its DTSTART and can't be
# stopped between two occurrences: a dense rule yields millions of them, a rule whose BY*
# parts match no date (FREQ=DAILY;BYMONTH=2;BYMONTHDAY=30) scans day by day to year 9999,
# and FREQ=SECONDLY;BYHOUR=9 steps through all 86,400 seconds of every day. So before
# the library sees a rule we walk it lazily ourselves, pricing each step, in a copy
# moved forward by whole 400-year Gregorian cycles (dates, weekdays and leap days repeat
# exactly, so the copy matches the same dates) until the window ends a century or more
# before year 9999: a scan that finds nothing then stops within those centuries.

GREGORIAN_CYCLE = timedelta(days=146_097)
# The shifted window ends at least this many years before dateutil's horizon (year 9999),
# so a rule with no occurrence in that tail is absurd (no real event skips a century).
TAIL_YEARS = 100
# More occurrences than this between DTSTART and the window end is not a listing.
MAX_SCANNED_OCCURRENCES = 25_000
# RFC 5545's rule parts: dateutil also knows BYEASTER, whose dates don't repeat every 400
# years, and RFC 7529's RSCALE, which the library doesn't implement.
_RFC_RULE_PARTS = {
    "FREQ", "UNTIL", "COUNT", "INTERVAL", "BYSECOND", "BYMINUTE", "BYHOUR", "BYDAY",
    "BYMONTHDAY", "BYYEARDAY", "BYWEEKNO", "BYMONTH", "BYSETPOS", "WKST",
}  # fmt: skip
# Rough dateutil costs in microseconds, measured on a 2-core runner (only ratios matter):
# per occurrence yielded, per calendar day stepped through at each frequency, and per
# hour, minute or second a sub-daily rule with BYHOUR, BYMINUTE or BYSECOND steps
# through without an occurrence, looking for its next time of day.
_US_PER_OCCURRENCE = 2.5
_US_PER_DAY = {
    "YEARLY": 0.12,
    "MONTHLY": 0.25,
    "WEEKLY": 0.7,
    "DAILY": 2.7,
    "HOURLY": 4.2,
    "MINUTELY": 4.2,
    "SECONDLY": 4.2,
}
_STEPS_PER_DAY = {"HOURLY": 24, "MINUTELY": 1440, "SECONDLY": 86_400}
_US_PER_STEP = 0.15


class ExpansionBudget:
    """Estimated microseconds of rule expansion a payload may still spend.

    Deterministic (a count, not a clock), so a payload parses the same way on every
    poll and listings don't flap with machine load. A walk is checked at each occurrence,
    so it overruns by at most one gap between occurrences: for a rule that stops matching,
    the centuries of tail behind the window (under a second even at FREQ=DAILY).
    """

    def __init__(self, microseconds: float) -> None:
        self.remaining = microseconds

    @staticmethod
    def cost(occurrences: int, days: int, us_per_day: float) -> float:
        return max(occurrences * _US_PER_OCCURRENCE, days * us_per_day)


def recurrence_problem(
    event: Component, span: tuple[datetime, datetime], cap: int, budget: ExpansionBudget
) -> str | None:
    """Why the event's RRULEs can't be expanded over `span` within the caps, or None.

    `span` is what the library will query: the window, widened by the event's duration
    and by how far RANGE=THISANDFUTURE overrides move occurrences. Charges the budget for
    the walk and, when the event passes, for the library's own, over the same dates.
    """
    start = when(event, "DTSTART")
    zone: tzinfo = start.tzinfo if isinstance(start, datetime) and start.tzinfo else UTC
    if _wall_clock(start, zone) >= _wall_clock(span[1], zone):
        return None  # dateutil stops at the first occurrence, already past the span
    shift = GREGORIAN_CYCLE * max(0, (9999 - TAIL_YEARS - span[1].year) // 400)
    walk = _Walk(
        start=_wall_clock(start, zone) + shift,
        first=_wall_clock(span[0], zone) + shift,
        stop=_wall_clock(span[1], zone) + shift,
        cap=cap,
    )
    rules = event.get("RRULE")
    for rule in rules if isinstance(rules, list) else [rules] if rules else []:
        problem = _unsupported(rule)
        if problem:
            return problem
        until = rule.get("UNTIL", [None])[0]
        problem = walk.run(
            {key: value for key, value in rule.items() if key not in ("COUNT", "UNTIL")},
            count=max(0, rule.get("COUNT", [0])[0]),  # the library ignores COUNT < 1 too
            until=None if until is None else _wall_clock(until, zone) + shift,
            budget=budget,
        )
        if problem:
            return problem
    return None


def _unsupported(rule: dict[str, Any]) -> str | None:
    freq = rule.get("FREQ", [""])[0]
    if freq not in _US_PER_DAY:
        return f"invalid RRULE: FREQ {freq or 'missing'}"
    if unknown := set(rule) - _RFC_RULE_PARTS:
        return f"invalid RRULE: unsupported {', '.join(sorted(unknown))}"
    if "BYSETPOS" in rule and freq in _STEPS_PER_DAY:
        # When BYSETPOS picks nothing (FREQ=MINUTELY;BYSETPOS=3), dateutil steps through
        # every minute without ever skipping a day: no bound on the walk would hold.
        return f"invalid RRULE: unsupported BYSETPOS with FREQ={freq}"
    return None


class _Walk:
    """Walks shifted copies of an event's rules, counting occurrences in the window."""

    def __init__(self, start: datetime, first: datetime, stop: datetime, cap: int) -> None:
        self.start, self.first, self.stop, self.cap = start, first, stop, cap
        self.in_window = 0  # over all of the event's rules

    def run(
        self, rule: dict[str, Any], count: int, until: datetime | None, budget: ExpansionBudget
    ) -> str | None:
        # COUNT and UNTIL are applied here, not by dateutil: after the last occurrence
        # dateutil still looks for the next candidate, and so must we to know it stops.
        try:
            text = vRecur(rule).to_ical().decode()  # type: ignore[no-untyped-call]  # unannotated in icalendar
            occurrences = rrulestr(text, dtstart=self.start)
        except (ValueError, TypeError) as error:
            return f"invalid RRULE: {error}"
        us_per_day = _us_per_day(rule)
        least = budget.cost(0, (self.stop - self.start).days, us_per_day) * 2
        if least > budget.remaining:
            return _too_costly(least, budget)
        outputs, reached, cost = 0, None, 0.0
        for occurrence in occurrences:
            outputs += 1
            cost = budget.cost(outputs, (occurrence - self.start).days, us_per_day)
            ended = (count and outputs > count) or (until and occurrence > until)
            self.in_window += not ended and self.first <= occurrence < self.stop
            too_many = self.in_window > self.cap or outputs > MAX_SCANNED_OCCURRENCES
            if ended or occurrence >= self.stop or too_many or cost > budget.remaining:
                reached = occurrence
                break
        if reached is None:  # dateutil ran to the end of year 9999 (wall clock, as here)
            cost = budget.cost(outputs, (datetime.max - self.start).days, us_per_day)  # noqa: DTZ901
        budget.remaining -= cost
        if self.in_window > self.cap:
            return f"recurrence produces more than {self.cap} occurrences in the window"
        if outputs > MAX_SCANNED_OCCURRENCES:
            return (
                f"recurrence produces more than {MAX_SCANNED_OCCURRENCES} occurrences"
                " between DTSTART and the window end"
            )
        if reached is None:
            return f"recurrence matches no date in the {TAIL_YEARS}+ years after the window"
        if cost > budget.remaining:  # the library's walk would cost as much again
            return _too_costly(cost * 2, budget)
        budget.remaining -= cost
        return None


def _us_per_day(rule: dict[str, Any]) -> float:
    freq: str = rule["FREQ"][0]
    if freq not in _STEPS_PER_DAY or not {"BYHOUR", "BYMINUTE", "BYSECOND"} & set(rule):
        return _US_PER_DAY[freq]
    interval: int = max(1, rule.get("INTERVAL", [1])[0])
    steps = _STEPS_PER_DAY[freq] / interval
    return _US_PER_DAY[freq] + steps * _US_PER_STEP


def _too_costly(cost: float, budget: ExpansionBudget) -> str:
    return (
        f"recurrence would take about {cost / 1000:.0f} ms to expand;"
        f" the calendar has {max(0, budget.remaining) / 1000:.0f} ms left"
    )


def _wall_clock(value: date, zone: tzinfo) -> datetime:
    """`value` as a naive datetime on the wall clock of `zone` (how dateutil counts)."""
    if not isinstance(value, datetime):
        return datetime.combine(value, time())
    return value.astimezone(zone).replace(tzinfo=None) if value.tzinfo else value
