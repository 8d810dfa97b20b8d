"""From the raw `when`, `from` and `to` request parameters to a DateFilter.

The rules, in the order they apply:
- A blank value counts as absent; `when` and the shortcuts are read case-insensitively.
- `when` absent or `upcoming`, with no `from`/`to`: UPCOMING, events that have not ended at
  the time of the search and undated listings. `past`: only events that have ended.
  `any`: everything. `today`, `this-weekend` and `next-7-days` are shorthand for
  `from=X&to=X`; `later` is what is on after the next 7 days (`from` their end). Any
  other `when` than absent or `upcoming` cannot be combined with `from` or `to`.
- `from` and `to` take a date YYYY-MM-DD (in the site's zone: `from` is that day's start,
  `to` the next day's start, so `to` includes its day), an ISO 8601 date-time (a naive one
  is in the site's zone), or a shortcut: `today` is [start of today, start of tomorrow),
  `this-weekend` [Saturday 00:00, Monday 00:00) of this weekend on Saturday and Sunday,
  of the coming one on Monday to Friday, `next-7-days` [now, the same wall-clock time 7
  days on, rounded up to the minute). A shortcut in `from` gives its range's start, in
  `to` its end. Midnights are the zone's own, so a day is 23 or 25 hours across a change
  of clocks.
- A range (from `from`/`to` or a shortcut `when`) leaves undated listings out. A shortcut
  anywhere also asks for events not yet ended: who asks for "today" wants what they can
  still go to. `to` without `from` asks for events not yet ended when `to` is still to
  come, and sets no lower bound when it has passed (a past range). `from` without `to`
  sets no upper bound. `from` must be before `to`; years run from 1900 to 2200.

Invariant: equal filters are equal DateFilters with equal keys, and unequal ones have
unequal keys, however the request spelled them. The key never holds the time of the
search: a lower bound that not_ended already implies is dropped, and `next-7-days` ends on
a whole minute, so a cached ranking for "today" or "next 7 days" is reused rather than
written anew on every search.
"""

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Literal, get_args
from zoneinfo import ZoneInfo

from retrieval.query.parse import BadQueryError
from retrieval.types import UPCOMING, DateFilter

Shortcut = Literal["today", "this-weekend", "next-7-days"]
SHORTCUTS: tuple[Shortcut, ...] = get_args(Shortcut)
_SHORTCUT_NAMES: dict[str, Shortcut] = {name: name for name in SHORTCUTS}
WHEN_VALUES = ("upcoming", "past", "any", *SHORTCUTS, "later")

_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
# Extended-format dates only, so that "20251206" (a date in ISO's basic format, which
# fromisoformat would read as a midnight) is refused rather than read as a date-time.
_DATE_TIME = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}[T ].+", re.IGNORECASE)
_YEARS = range(1900, 2201)
_SATURDAY = 5  # date.weekday()
PAST = DateFilter(ends_after=None, starts_before=None, not_ended=False, ended=True, undated=False)
ANY = DateFilter(ends_after=None, starts_before=None, not_ended=False, ended=False, undated=True)


def parse_dates(
    when: str | None, from_: str | None, to: str | None, *, now: datetime, zone: ZoneInfo
) -> DateFilter:
    """The filter the parameters ask for, resolved at `now` (aware) in `zone`, the site's
    time zone. Raises BadQueryError naming the parameter for anything refused."""
    if now.utcoffset() is None:
        raise ValueError("now must be an aware datetime")
    when_value, from_value, to_value = (_blank_as_none(value) for value in (when, from_, to))
    if when_value is not None:
        when_value = when_value.lower()
        if when_value not in WHEN_VALUES:
            raise BadQueryError(f"when must be one of {', '.join(WHEN_VALUES)}", parameter="when")
        if when_value != "upcoming" and (from_value is not None or to_value is not None):
            raise BadQueryError("when cannot be combined with from or to", parameter="when")
        if when_value == "past":
            return PAST
        if when_value == "any":
            return ANY
        if when_value == "later":
            return _later(now, zone)
        if when_value != "upcoming":
            from_value = to_value = when_value
    if from_value is None and to_value is None:
        return UPCOMING
    lower = _bound(from_value, "from", now, zone)
    upper = _bound(to_value, "to", now, zone)
    if lower is not None and upper is not None and lower.instant >= upper.instant:
        raise BadQueryError("to must be after from", parameter="to")
    not_ended = any(b is not None and b.shortcut for b in (lower, upper))
    if lower is None and upper is not None and upper.instant > now:
        not_ended = True
    ends_after = lower.instant if lower is not None else None
    if not_ended and ends_after is not None and ends_after <= now:
        ends_after = None  # implied by not_ended; keeping it would put `now` in the key
    return DateFilter(
        ends_after=ends_after,
        starts_before=upper.instant if upper is not None else None,
        not_ended=not_ended,
        ended=False,
        undated=False,
    )


def _later(now: datetime, zone: ZoneInfo) -> DateFilter:
    """What is on after the next 7 days: the facets' last date bucket."""
    _, week_on = shortcut_range("next-7-days", now=now, zone=zone)
    return DateFilter(
        ends_after=week_on, starts_before=None, not_ended=True, ended=False, undated=False
    )


@dataclass(frozen=True)
class _Bound:
    instant: datetime
    shortcut: bool


def _blank_as_none(value: str | None) -> str | None:
    stripped = value.strip() if value is not None else ""
    return stripped or None


def _bound(value: str | None, parameter: str, now: datetime, zone: ZoneInfo) -> _Bound | None:
    """One end of the range: `from` gives a range's start, `to` its (exclusive) end."""
    if value is None:
        return None
    is_to = parameter == "to"
    if (shortcut := _SHORTCUT_NAMES.get(value.lower())) is not None:
        start, end = shortcut_range(shortcut, now=now, zone=zone)
        return _Bound(end if is_to else start, shortcut=True)
    written = _written(value, parameter)
    if isinstance(written, datetime):
        aware = written if written.tzinfo else written.replace(tzinfo=zone)
        return _Bound(aware, shortcut=False)
    return _Bound(_midnight(written + timedelta(days=is_to), zone), shortcut=False)


def _written(value: str, parameter: str) -> date:
    """The date or date-time (a datetime is a date) as written, its year in range."""
    parse: Callable[[str], date]
    if _DATE.fullmatch(value):
        parse = date.fromisoformat
    elif _DATE_TIME.fullmatch(value):
        parse = datetime.fromisoformat
    else:
        raise _unreadable(parameter)
    try:
        written = parse(value)
    except ValueError:  # "2025-02-30", "2025-12-06T25:00", a bad offset
        raise _unreadable(parameter) from None
    if written.year not in _YEARS:
        raise BadQueryError(
            f"{parameter} must be a date from the years {_YEARS[0]} to {_YEARS[-1]}",
            parameter=parameter,
        )
    return written


def shortcut_range(
    shortcut: Shortcut, *, now: datetime, zone: ZoneInfo
) -> tuple[datetime, datetime]:
    """[start, end) of a relative shortcut at `now` in `zone`, as UTC instants (so that
    subtracting them gives real hours, not the wall-clock ones of one zone)."""
    local = now.astimezone(zone)
    today = local.date()
    if shortcut == "today":
        return _midnight(today, zone), _midnight(today + timedelta(days=1), zone)
    if shortcut == "this-weekend":
        # weekday() - 5 is 0 on Saturday, 1 on Sunday and negative on Monday to Friday.
        saturday = today - timedelta(days=today.weekday() - _SATURDAY)
        return _midnight(saturday, zone), _midnight(saturday + timedelta(days=2), zone)
    # Same tzinfo, so this adds wall-clock days: 19:00 stays 19:00 across a change of clocks.
    week_on = (local + timedelta(days=7)).astimezone(UTC)
    whole_minute = week_on.replace(second=0, microsecond=0)
    rounded_up = whole_minute if whole_minute == week_on else whole_minute + timedelta(minutes=1)
    return now.astimezone(UTC), rounded_up


def _midnight(day: date, zone: ZoneInfo) -> datetime:
    """The start of `day` in `zone`, in UTC. Where clocks jump over midnight, fold=0 takes the
    offset before the jump, which lands on the jump itself: the day's first instant."""
    return datetime.combine(day, time(), tzinfo=zone).astimezone(UTC)


def _unreadable(parameter: str) -> BadQueryError:
    return BadQueryError(
        f"{parameter} must be a date (YYYY-MM-DD), a date-time or one of {', '.join(SHORTCUTS)}",
        parameter=parameter,
    )
