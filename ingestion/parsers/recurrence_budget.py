"""What a recurrence rule costs to expand, decided in bounded time before the library
expands it: `recurrence_problem` says whether a rule may be expanded at all, charging an
`ExpansionBudget` shared by one payload.

dateutil (under recurring-ical-events) expands a rule from its DTSTART and can't be
stopped between two occurrences: a dense rule yields millions of them, a rule whose BY*
parts match no date (FREQ=DAILY;BYMONTH=2;BYMONTHDAY=30) scans day by day to year 9999,
and FREQ=SECONDLY;BYHOUR=9 steps through all 86,400 seconds of every day. So before
the library sees a rule we walk it lazily ourselves, pricing each step, in a copy
moved forward by whole 400-year Gregorian cycles (dates, weekdays and leap days repeat
exactly, so the copy matches the same dates) until the window ends a century or more
before year 9999: a scan that finds nothing then stops within those centuries.
"""

from datetime import UTC, date, datetime, time, timedelta, tzinfo
from typing import Any

from dateutil.rrule import rrulestr
from icalendar import Component
from icalendar.prop import vRecur

from ingestion.parsers.calendar_time import when

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
