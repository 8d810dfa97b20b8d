"""The date filter from `when`, `from` and `to`: each rule of retrieval.query.dates, the clocks
changing under it, canonical keys, and every refusal naming its parameter."""

from datetime import UTC, date, datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given
from hypothesis import strategies as st

from retrieval.query.dates import ANY, PAST, parse_dates, shortcut_range
from retrieval.query.parse import BadQueryError
from retrieval.types import UPCOMING, DateFilter

LONDON = ZoneInfo("Europe/London")
# Wednesday 22 October 2025, 19:00 BST; the clocks go back on Sunday 26 October.
NOW = datetime(2025, 10, 22, 19, 0, tzinfo=LONDON)
UNREADABLE = "must be a date (YYYY-MM-DD), a date-time or one of today, this-weekend, next-7-days"


def utc(
    year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0
) -> datetime:
    return datetime(year, month, day, hour, minute, second, tzinfo=UTC)


def dates(
    when: str | None = None, from_: str | None = None, to: str | None = None, now: datetime = NOW
) -> DateFilter:
    return parse_dates(when, from_, to, now=now, zone=LONDON)


def refusal(when: str | None = None, from_: str | None = None, to: str | None = None) -> str:
    with pytest.raises(BadQueryError) as caught:
        dates(when, from_, to)
    return f"{caught.value.parameter}: {caught.value}"


@pytest.mark.parametrize("blank", [None, "", "  ", "\t"])
def test_blank_values_count_as_absent_and_give_upcoming(blank: str | None) -> None:
    assert dates(blank, blank, blank) is UPCOMING
    assert dates("upcoming") is dates("Upcoming ") is UPCOMING
    assert (UPCOMING.not_ended, UPCOMING.ended, UPCOMING.undated) == (True, False, True)
    assert (UPCOMING.ends_after, UPCOMING.starts_before, UPCOMING.key) == (None, None, "upcoming")


def test_past_asks_for_ended_events_only_and_any_for_everything() -> None:
    assert dates("past") is PAST
    assert (PAST.not_ended, PAST.ended, PAST.undated, PAST.key) == (False, True, False, "past")
    assert dates("any") is ANY
    assert (ANY.not_ended, ANY.ended, ANY.undated, ANY.key) == (False, False, True, "any")
    assert ANY.ends_after is ANY.starts_before is None


@pytest.mark.parametrize("shortcut", ["today", "this-weekend", "next-7-days"])
def test_a_shortcut_when_is_from_and_to_of_that_shortcut(shortcut: str) -> None:
    assert (
        dates(shortcut) == dates(None, shortcut, shortcut) == dates("upcoming", shortcut, shortcut)
    )
    assert dates(shortcut.upper()) == dates(shortcut)


def test_later_is_what_is_on_after_the_next_7_days() -> None:
    later = dates("later")
    week = dates("next-7-days")
    assert (later.ends_after, later.starts_before) == (week.starts_before, None)
    assert (later.not_ended, later.ended, later.undated) == (True, False, False)
    assert dates("LATER") == later


def test_a_date_runs_from_its_start_to_the_next_days_start_in_the_sites_zone() -> None:
    summer = dates(None, "2025-07-01", "2025-07-03")  # BST: London's midnight is 23:00 UTC
    assert summer.ends_after == utc(2025, 6, 30, 23)
    assert summer.starts_before == utc(2025, 7, 3, 23)  # `to` includes its own day
    one_day = dates(None, "2025-07-01", "2025-07-01")
    assert (one_day.ends_after, one_day.starts_before) == (
        utc(2025, 6, 30, 23),
        utc(2025, 7, 1, 23),
    )


def test_a_date_time_keeps_its_offset_and_a_naive_one_is_in_the_sites_zone() -> None:
    explicit = dates(None, "2025-12-06T19:30:00+05:30", "2025-12-06T23:00Z")
    assert (explicit.ends_after, explicit.starts_before) == (
        utc(2025, 12, 6, 14),
        utc(2025, 12, 6, 23),
    )
    naive = dates(None, "2025-07-06 19:30", "2025-07-06T21:00:15")  # BST: UTC+1
    assert naive.ends_after == utc(2025, 7, 6, 18, 30)
    assert naive.starts_before == utc(2025, 7, 6, 20, 0, 15)


def test_a_range_leaves_undated_listings_out_and_includes_ended_events() -> None:
    past_range = dates(None, "2025-01-01", "2025-01-31")
    assert (past_range.undated, past_range.not_ended, past_range.ended) == (False, False, False)


def test_from_alone_has_no_upper_bound() -> None:
    since = dates(None, "2025-01-01")
    assert (since.ends_after, since.starts_before) == (utc(2025, 1, 1), None)
    assert (since.not_ended, since.undated) == (False, False)


def test_to_alone_still_to_come_asks_for_events_not_ended_until_then() -> None:
    until = dates(None, None, "2025-12-24")
    assert (until.ends_after, until.starts_before) == (None, utc(2025, 12, 25))
    assert (until.not_ended, until.undated) == (True, False)


def test_to_alone_already_passed_is_a_past_range_without_a_lower_bound() -> None:
    until = dates(None, None, "2025-10-22T17:59Z")  # a minute before NOW
    assert (until.ends_after, until.starts_before) == (None, utc(2025, 10, 22, 17, 59))
    assert (until.not_ended, until.undated) == (False, False)


def test_today_runs_to_the_next_midnight_and_asks_for_what_is_still_on() -> None:
    today = dates("today")
    # Today's start is implied by not_ended, so it is not kept (nor put in the key).
    assert (today.ends_after, today.starts_before) == (None, utc(2025, 10, 22, 23))
    assert (today.not_ended, today.ended, today.undated) == (True, False, False)
    assert shortcut_range("today", now=NOW, zone=LONDON) == (
        utc(2025, 10, 21, 23),
        utc(2025, 10, 22, 23),
    )


def test_today_is_the_sites_day_not_utcs() -> None:
    half_past_midnight = datetime(2025, 10, 23, 0, 30, tzinfo=LONDON).astimezone(UTC)
    assert half_past_midnight.day == 22  # still yesterday in UTC
    assert shortcut_range("today", now=half_past_midnight, zone=LONDON) == (
        utc(2025, 10, 22, 23),
        utc(2025, 10, 23, 23),
    )


@pytest.mark.parametrize(
    ("day", "start", "end", "hours"),
    [
        (date(2025, 10, 26), utc(2025, 10, 25, 23), utc(2025, 10, 27), 25),  # clocks go back
        (date(2025, 3, 30), utc(2025, 3, 30), utc(2025, 3, 30, 23), 23),  # clocks go forward
    ],
)
def test_days_across_a_change_of_clocks_run_midnight_to_midnight(
    day: date, start: datetime, end: datetime, hours: int
) -> None:
    noon = datetime.combine(day, datetime.min.time(), tzinfo=LONDON).replace(hour=12)
    noon = noon.astimezone(UTC)  # as timezone.now() gives it
    assert shortcut_range("today", now=noon, zone=LONDON) == (start, end)
    spelled = dates(None, day.isoformat(), day.isoformat(), now=noon)
    assert (spelled.ends_after, spelled.starts_before) == (start, end)
    assert end - start == timedelta(hours=hours)


def test_a_day_whose_midnight_the_clocks_skip_starts_at_the_jump() -> None:
    sao_paulo = ZoneInfo("America/Sao_Paulo")  # 4 November 2018: 00:00 -03 became 01:00 -02
    start, end = shortcut_range("today", now=utc(2018, 11, 4, 15), zone=sao_paulo)
    assert (start, end) == (utc(2018, 11, 4, 3), utc(2018, 11, 5, 2))
    assert end - start == timedelta(hours=23)


# Monday 20 to Sunday 26 October 2025, then Monday 27: the weekend of the 25th and 26th
# runs from Saturday 00:00 BST to Monday 00:00 GMT, 49 hours.
@pytest.mark.parametrize(
    ("day", "saturday"),
    [(date(2025, 10, 20 + offset), date(2025, 10, 25)) for offset in range(7)]
    + [(date(2025, 10, 27), date(2025, 11, 1))],
)
def test_this_weekend_is_the_coming_one_on_weekdays_and_this_one_at_the_weekend(
    day: date, saturday: date
) -> None:
    at_ten = datetime.combine(day, datetime.min.time(), tzinfo=LONDON).replace(hour=10)
    start, end = shortcut_range("this-weekend", now=at_ten, zone=LONDON)
    assert start == datetime.combine(saturday, datetime.min.time(), tzinfo=LONDON)
    assert end == datetime.combine(saturday + timedelta(days=2), datetime.min.time(), tzinfo=LONDON)
    if saturday == date(2025, 10, 25):
        assert (start, end) == (utc(2025, 10, 24, 23), utc(2025, 10, 27))
    weekend = dates("this-weekend", now=at_ten)
    assert (weekend.starts_before, weekend.not_ended, weekend.undated) == (end, True, False)
    # Saturday's start bounds the range until it has come; then not_ended says it all.
    assert weekend.ends_after == (start if start > at_ten else None)


def test_next_7_days_ends_a_week_on_by_the_clock_rounded_up_to_the_minute() -> None:
    # As timezone.now() gives it, in UTC: the week is counted on London's clock all the same.
    thursday = datetime(2025, 10, 23, 19, 0, tzinfo=LONDON).astimezone(UTC)  # BST
    assert shortcut_range("next-7-days", now=thursday, zone=LONDON) == (
        thursday,
        utc(2025, 10, 30, 19),  # 19:00 GMT, 7 days and an hour on
    )
    seconds_in = thursday + timedelta(seconds=20, microseconds=5)
    assert shortcut_range("next-7-days", now=seconds_in, zone=LONDON)[1] == utc(2025, 10, 30, 19, 1)
    week = dates("next-7-days", now=seconds_in)
    assert (week.ends_after, week.starts_before) == (None, utc(2025, 10, 30, 19, 1))
    assert (week.not_ended, week.undated) == (True, False)


def test_a_shortcut_in_from_or_to_gives_its_start_or_its_end() -> None:
    from_weekend = dates(None, "this-weekend", "2025-11-30")
    assert (from_weekend.ends_after, from_weekend.starts_before) == (
        utc(2025, 10, 24, 23),
        utc(2025, 12, 1),  # `to` includes its day
    )
    to_weekend = dates(None, "2025-10-23", "this-weekend")
    assert (to_weekend.ends_after, to_weekend.starts_before) == (
        utc(2025, 10, 22, 23),
        utc(2025, 10, 27),
    )
    # A shortcut anywhere asks for what is still on, an explicit `from` included.
    assert from_weekend.not_ended
    assert to_weekend.not_ended
    assert not dates(None, "2025-10-23", "2025-10-27").not_ended


@pytest.mark.parametrize(
    ("when", "from_", "to", "expected"),
    [
        ("soon", None, None, "when: when must be one of upcoming, past, any, today, "
         "this-weekend, next-7-days, later"),
        ("past", "2025-01-01", None, "when: when cannot be combined with from or to"),
        ("today", None, "today", "when: when cannot be combined with from or to"),
        ("any", None, "2025-01-01", "when: when cannot be combined with from or to"),
        (None, "tomorrow", None, f"from: from {UNREADABLE}"),
        (None, None, "next-week", f"to: to {UNREADABLE}"),
        (None, "2025-02-30", None, f"from: from {UNREADABLE}"),
        (None, "20251206", None, f"from: from {UNREADABLE}"),
        (None, "6/12/2025", None, f"from: from {UNREADABLE}"),
        (None, None, "2025-12-06T25:00", f"to: to {UNREADABLE}"),
        (None, None, "2025-12-06T19:30 01:00", f"to: to {UNREADABLE}"),  # an unescaped +
        (None, "\u0662\u0660\u0662\u0665-12-06", None, f"from: from {UNREADABLE}"),
        (None, "1899-12-31", None, "from: from must be a date from the years 1900 to 2200"),
        (None, None, "2201-01-01T00:00Z", "to: to must be a date from the years 1900 to 2200"),
        (None, "9999-12-31", None, "from: from must be a date from the years 1900 to 2200"),
        (None, "2025-12-06", "2025-12-05", "to: to must be after from"),
        (None, "2025-12-06T10:00Z", "2025-12-06T11:00+01:00", "to: to must be after from"),
        (None, "this-weekend", "today", "to: to must be after from"),
    ],
)  # fmt: skip
def test_each_refusal_names_its_parameter(
    when: str | None, from_: str | None, to: str | None, expected: str
) -> None:
    assert refusal(when, from_, to) == expected


def test_the_years_at_the_edges_are_accepted() -> None:
    edges = dates(None, "1900-01-01", "2200-12-31")
    assert (edges.ends_after, edges.starts_before) == (utc(1900, 1, 1), utc(2201, 1, 1))


def test_equal_filters_have_one_key_however_they_were_spelled() -> None:
    today = {
        dates("today").key,
        dates(None, "today", "today").key,
        dates(None, None, "today").key,
        dates("today", now=NOW.replace(hour=9)).key,
    }
    assert today == {"after=-;before=2025-10-22T23:00:00+00:00;not_ended"}
    instants = {
        dates(None, "2025-12-06T19:30+00:00").key,
        dates(None, "2025-12-06T20:30:00+01:00").key,
        dates(None, "2025-12-06T19:30Z").key,
        dates(None, "2025-12-06 19:30").key,  # naive, in GMT
    }
    assert instants == {"after=2025-12-06T19:30:00+00:00;before=-"}


def test_filters_apart_only_by_not_ended_have_keys_apart() -> None:
    from_saturday, from_weekend = dates(None, "2025-10-25"), dates(None, "this-weekend")
    assert from_saturday.ends_after == from_weekend.ends_after
    assert from_saturday.key != from_weekend.key


def test_keys_do_not_follow_the_clock_except_where_the_bounds_do() -> None:
    later = NOW + timedelta(hours=4, seconds=59)  # 23:00:59 BST, still the 22nd
    assert dates(now=later).key == dates().key == "upcoming"
    assert dates("today", now=later).key == dates("today").key
    assert dates("today", now=NOW + timedelta(hours=5)).key != dates("today").key  # midnight
    a_second_on, a_minute_on = (
        dates("next-7-days", now=NOW + timedelta(seconds=s)) for s in (1, 60)
    )
    assert a_second_on.key == a_minute_on.key != dates("next-7-days").key


def test_a_filter_holds_its_bounds_in_utc_so_the_two_one_thirties_differ() -> None:
    first = datetime(2025, 10, 26, 1, 30, tzinfo=LONDON)  # BST
    second = first.replace(fold=1)  # GMT, an hour later
    assert first == second  # one zone: compared by wall time
    after_first, after_second = (
        DateFilter(ends_after=dt, starts_before=None, not_ended=False, ended=False, undated=False)
        for dt in (first, second)
    )
    assert after_first != after_second
    assert after_first.key != after_second.key
    assert after_second.ends_after == utc(2025, 10, 26, 1, 30)


def test_a_naive_now_is_a_programming_error() -> None:
    with pytest.raises(ValueError, match="now must be an aware datetime"):
        parse_dates("today", None, None, now=NOW.replace(tzinfo=None), zone=LONDON)


# Fixed offsets keep every written instant readable back (isoformat writes any offset).
AWARE = st.datetimes(
    min_value=datetime(1900, 1, 2),  # noqa: DTZ001  hypothesis takes naive bounds
    max_value=datetime(2200, 12, 30),  # noqa: DTZ001  (and `timezones` for the values)
    timezones=st.just(UTC),
).flatmap(
    lambda instant: st.integers(-14 * 60, 14 * 60).map(
        lambda minutes: instant.astimezone(timezone(timedelta(minutes=minutes)))
    )
)


@given(AWARE, AWARE)
def test_any_date_time_range_reads_back_as_written(first: datetime, second: datetime) -> None:
    if first == second:
        return
    lower, upper = sorted((first, second))
    spelled = dates(None, lower.isoformat(), upper.isoformat())
    assert (spelled.ends_after, spelled.starts_before) == (lower, upper)
    assert (spelled.not_ended, spelled.undated) == (False, False)


@given(st.dates(date(1900, 1, 1), date(2200, 12, 31)), st.integers(0, 400))
def test_any_date_range_covers_its_days_whole(first: date, days: int) -> None:
    last = min(first + timedelta(days=days), date(2200, 12, 31))
    spelled = dates(None, first.isoformat(), last.isoformat())
    assert spelled.ends_after == datetime.combine(first, datetime.min.time(), tzinfo=LONDON)
    day_after = datetime.combine(last + timedelta(days=1), datetime.min.time(), tzinfo=LONDON)
    assert spelled.starts_before == day_after


SPELLINGS = st.sampled_from(
    [None, "", "upcoming", "past", "any", "today", "this-weekend", "next-7-days",
     "2025-10-22", "2025-10-23", "2025-10-25", "2025-10-26T23:00Z", "2025-10-27T00:00+00:00",
     "2025-10-27", "2025-10-22T23:00Z", "2025-10-21T23:00Z", "2025-10-23T00:00+01:00"]
)  # fmt: skip
NOWS = st.sampled_from([NOW, NOW + timedelta(hours=3), NOW + timedelta(days=3, hours=2)])


REQUESTS = st.tuples(SPELLINGS, SPELLINGS, SPELLINGS, NOWS)
Request = tuple[str | None, str | None, str | None, datetime]


def _filter_or_none(request: Request) -> DateFilter | None:
    try:
        return dates(*request)
    except BadQueryError:
        return None


@given(st.lists(REQUESTS, min_size=2, max_size=40))
def test_keys_are_equal_exactly_when_filters_are(requests: list[Request]) -> None:
    filters = {f for f in map(_filter_or_none, requests) if f is not None}
    assert len({f.key for f in filters}) == len(filters)


ANY_TEXT = st.one_of(st.none(), st.text(st.characters(exclude_categories=()), max_size=40))


@given(ANY_TEXT, ANY_TEXT, ANY_TEXT)
def test_any_text_gives_a_filter_or_a_refusal_naming_a_parameter(
    when: str | None, from_: str | None, to: str | None
) -> None:
    try:
        dates(when, from_, to)
    except BadQueryError as refused:
        refusal = refused
    else:
        return
    assert refusal.parameter in {"when", "from", "to"}
    assert str(refusal).startswith(refusal.parameter)
