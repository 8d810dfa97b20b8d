"""Listings as people read them: when, in the listing's own zone, and where it came from."""

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given
from hypothesis import strategies as st

from retrieval.presentation import iso_local, listing_zone, provenance_text, when_text

LONDON = ZoneInfo("Europe/London")
PARIS = ZoneInfo("Europe/Paris")
NEW_YORK = ZoneInfo("America/New_York")
NOW = datetime(2025, 10, 22, 18, 0, tzinfo=UTC)


def london(year: int, month: int, day: int, hour: int = 0, minute: int = 0) -> datetime:
    return datetime(year, month, day, hour, minute, tzinfo=LONDON)


def when(
    starts_at: datetime | None,
    ends_at: datetime | None = None,
    zone_name: str = "Europe/London",
    *,
    all_day: bool = False,
    now: datetime = NOW,
) -> str:
    return when_text(starts_at, ends_at, zone_name, all_day, site_zone=LONDON, now=now)


def test_a_listing_keeps_its_own_zone() -> None:
    assert listing_zone("America/New_York", LONDON) == NEW_YORK
    assert listing_zone(" Europe/Paris ", LONDON) == PARIS


@pytest.mark.parametrize(
    "stored",
    ["", "  ", "Mars/Olympus_Mons", "Europe", "../../etc/passwd", "/etc/localtime", "a\x00"],
)
def test_a_blank_or_unknown_zone_is_the_sites(stored: str) -> None:
    assert listing_zone(stored, LONDON) is LONDON


@given(st.text(st.characters(exclude_categories=()), max_size=40))
def test_no_stored_zone_name_makes_it_raise(stored: str) -> None:
    assert isinstance(listing_zone(stored, LONDON), ZoneInfo)


def test_iso_local_writes_the_offset_of_that_instant_in_that_zone() -> None:
    instant = datetime(2025, 7, 12, 18, 30, tzinfo=UTC)
    assert iso_local(instant, LONDON) == "2025-07-12T19:30:00+01:00"
    assert iso_local(instant, NEW_YORK) == "2025-07-12T14:30:00-04:00"
    assert (
        iso_local(datetime(2025, 12, 6, 19, 30, tzinfo=UTC), LONDON) == "2025-12-06T19:30:00+00:00"
    )
    assert iso_local(None, LONDON) is None


def test_a_start_is_day_date_month_and_24_hour_time_with_the_zones_abbreviation() -> None:
    assert when(london(2025, 12, 6, 19, 30)) == "Sat 6 Dec, 19:30 GMT"
    assert when(london(2025, 7, 12, 9, 5)) == "Sat 12 Jul, 09:05 BST"


def test_times_are_shown_in_the_listings_zone_whatever_zone_they_arrive_in() -> None:
    in_utc = datetime(2025, 12, 6, 18, 30, tzinfo=UTC)
    assert when(in_utc, zone_name="Europe/Paris") == "Sat 6 Dec, 19:30 CET"
    assert (
        when(in_utc.replace(month=7, day=12), zone_name="Europe/Paris") == "Sat 12 Jul, 20:30 CEST"
    )
    assert when(in_utc, zone_name="America/New_York") == "Sat 6 Dec, 13:30 EST"


def test_an_unknown_zone_shows_the_time_in_the_sites_zone() -> None:
    assert (
        when(datetime(2025, 7, 12, 18, 30, tzinfo=UTC), zone_name="Nowhere")
        == "Sat 12 Jul, 19:30 BST"
    )


def test_an_end_the_same_day_gives_a_range_of_times() -> None:
    assert (
        when(london(2025, 12, 6, 19, 30), london(2025, 12, 6, 22))
        == "Sat 6 Dec, 19:30\u201322:00 GMT"
    )


def test_an_end_on_another_day_gives_both_days() -> None:
    assert (
        when(london(2025, 12, 6, 19, 30), london(2025, 12, 7, 1))
        == "Sat 6 Dec, 19:30 \u2013 Sun 7 Dec, 01:00 GMT"
    )


def test_a_range_across_the_change_of_clocks_says_each_times_zone() -> None:
    start = datetime(2025, 10, 25, 23, 30, tzinfo=UTC)  # 00:30 BST on Sunday 26 October
    end = datetime(2025, 10, 26, 3, 0, tzinfo=UTC)  # 03:00 GMT
    assert when(start, end) == "Sun 26 Oct, 00:30 BST\u201303:00 GMT"


def test_an_end_not_after_the_start_is_no_end() -> None:
    start = london(2025, 12, 6, 19, 30)
    assert when(start, start) == when(start, london(2025, 12, 6, 18)) == "Sat 6 Dec, 19:30 GMT"


def test_the_year_is_written_only_outside_this_year() -> None:
    assert when(london(2026, 12, 5, 19, 30)) == "Sat 5 Dec 2026, 19:30 GMT"
    assert (
        when(london(2025, 12, 31, 22), london(2026, 1, 1, 2))
        == "Wed 31 Dec, 22:00 \u2013 Thu 1 Jan 2026, 02:00 GMT"
    )


def test_this_year_is_the_year_in_the_listings_zone() -> None:
    new_years_eve = datetime(2025, 12, 31, 12, 0, tzinfo=UTC)  # 01:00 on 1 January in Auckland
    in_auckland = datetime(2026, 1, 2, 7, 0, tzinfo=UTC)  # 20:00 on 2 January there
    assert (
        when(in_auckland, zone_name="Pacific/Auckland", now=new_years_eve)
        == "Fri 2 Jan, 20:00 NZDT"
    )
    assert when(london(2026, 1, 2, 20), now=new_years_eve) == "Fri 2 Jan 2026, 20:00 GMT"


def test_an_all_day_event_is_its_date_and_its_exclusive_end_ends_the_day_before() -> None:
    assert when(london(2025, 12, 6), london(2025, 12, 7), all_day=True) == "Sat 6 Dec"
    assert when(london(2025, 12, 6), None, all_day=True) == "Sat 6 Dec"
    # An inclusive end some producers write, and an end before the start, are one day too.
    assert when(london(2025, 12, 6), london(2025, 12, 6, 23, 59), all_day=True) == "Sat 6 Dec"
    assert when(london(2025, 12, 6), london(2025, 12, 5), all_day=True) == "Sat 6 Dec"


def test_an_all_day_date_is_the_listings_day_whatever_zone_it_arrives_in() -> None:
    # Midnight in Auckland is 11:00 UTC the day before; the date is Auckland's.
    auckland = ZoneInfo("Pacific/Auckland")
    midnight = datetime(2025, 12, 6, tzinfo=auckland).astimezone(UTC)
    next_midnight = datetime(2025, 12, 7, tzinfo=auckland).astimezone(UTC)
    assert midnight.day == 5
    assert when(midnight, next_midnight, "Pacific/Auckland", all_day=True) == "Sat 6 Dec"
    assert when(midnight, None, "Pacific/Auckland", all_day=True) == "Sat 6 Dec"


@pytest.mark.parametrize(
    ("starts_at", "ends_at", "expected"),
    [
        (london(2025, 12, 6), london(2025, 12, 9), "Sat 6 \u2013 Mon 8 Dec"),
        (london(2025, 11, 30), london(2025, 12, 3), "Sun 30 Nov \u2013 Tue 2 Dec"),
        (london(2025, 12, 31), london(2026, 1, 2), "Wed 31 Dec \u2013 Thu 1 Jan 2026"),
        (london(2026, 12, 5), london(2026, 12, 8), "Sat 5 \u2013 Mon 7 Dec 2026"),
        (london(2026, 12, 31), london(2027, 1, 2), "Thu 31 Dec 2026 \u2013 Fri 1 Jan 2027"),
        (
            london(2025, 10, 25),
            london(2025, 10, 27),
            "Sat 25 \u2013 Sun 26 Oct",
        ),  # a 49-hour weekend
    ],
)
def test_an_all_day_range_says_its_month_and_year_once(
    starts_at: datetime, ends_at: datetime, expected: str
) -> None:
    assert when(starts_at, ends_at, all_day=True) == expected


def test_an_undated_listing_has_no_when() -> None:
    assert when(None) == when(None, london(2025, 12, 6)) == when(None, all_day=True) == ""


def test_provenance_names_each_source_with_its_kind() -> None:
    sources = [("Barbican", "calendar"), ("Time Out", "feed"), ("Culture Desk", "editorial")]
    assert (
        provenance_text(sources)
        == "from Barbican calendar \u00b7 Time Out feed \u00b7 Culture Desk editorial"
    )


def test_a_name_with_its_kind_is_not_given_it_twice() -> None:
    sources = [
        ("Barbican Calendar", "calendar"),
        ("Time Out  FEED", "feed"),
        ("Seedfeed", "feed"),
        ("Editorial desk", "editorial"),
    ]
    assert (
        provenance_text(sources)
        == "from Barbican Calendar \u00b7 Time Out FEED \u00b7 Seedfeed feed \u00b7 Editorial desk"
    )


def test_provenance_leaves_repeats_out_and_keeps_the_order() -> None:
    sources = [
        ("Time Out", "feed"),
        ("Barbican", "calendar"),
        ("Time Out feed", "feed"),
        ("barbican", "calendar"),
        ("Barbican", "editorial"),
    ]
    assert (
        provenance_text(sources)
        == "from Time Out feed \u00b7 Barbican calendar \u00b7 Barbican editorial"
    )


def test_no_sources_no_provenance() -> None:
    assert provenance_text([]) == ""
