"""Real calendars: every corpus file parses or is rejected whole, and known expansions hold.

The expected occurrences come from recurring-ical-events' own tests (its 3.8.2 release,
`recurring_ical_events/test/<file>` in the installed package), for the same calendars.
"""

from datetime import UTC, date, datetime, time, tzinfo
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from ingestion.drafts import ListingDraft, PayloadError
from ingestion.parsers.calendar import parse_calendar
from tests.conftest import SHARED_DATA
from tests.factories import assert_well_formed_calendar

CALENDARS = SHARED_DATA / "calendars"
RECURRING = CALENDARS / "recurring-ical-events-calendars/recurring_ical_events/test/calendars"
CORPORA = ("icalendar-tests", "ical-py-testdata", "recurring-ical-events-calendars")

if not all((CALENDARS / corpus).is_dir() for corpus in CORPORA):
    pytest.skip(f"the shared calendar corpora are not at {CALENDARS}", allow_module_level=True)

# icalendar warns when it strips a vendor prefix from a TZID; several corpus files have one.
pytestmark = pytest.mark.filterwarnings("ignore::icalendar.GloballyUniqueTZIDGuessed")

BERLIN = ZoneInfo("Europe/Berlin")
# Wide enough to reach the RFC examples (1997...) and the regressions (2019-2024).
CORPUS_WINDOW = (datetime(1995, 1, 1, tzinfo=UTC), datetime(2030, 1, 1, tzinfo=UTC))
FILES = sorted(path for corpus in CORPORA for path in (CALENDARS / corpus).rglob("*.ics"))


@pytest.mark.parametrize("path", FILES, ids=lambda path: str(path.relative_to(CALENDARS)))
def test_it_parses_each_corpus_file_or_rejects_it_whole(path: Path) -> None:
    try:
        result = parse_calendar(
            path.read_bytes(), window_start=CORPUS_WINDOW[0], window_end=CORPUS_WINDOW[1]
        )
    except PayloadError as error:
        rejection = error.reason
    else:
        rejection = ""
        assert_well_formed_calendar(result)
        for draft in result.drafts:  # a series: its dates sooner first, its span theirs
            if draft.occurrences:
                assert list(draft.occurrences) == sorted(draft.occurrences)
                assert draft.starts_at == draft.occurrences[0][0]
                assert draft.ends_at == max(end for _, end in draft.occurrences)
    # recurring-ical-events' calendars are all valid ones: none may be rejected whole.
    assert not (rejection and path.is_relative_to(RECURRING)), rejection


def test_it_covers_the_three_corpora() -> None:
    assert len(FILES) > 350


def drafts(name: str, start: date, end: date) -> list[ListingDraft]:
    result = parse_calendar(
        (RECURRING / name).read_bytes(),
        window_start=datetime.combine(start, time(), tzinfo=UTC),
        window_end=datetime.combine(end, time(), tzinfo=UTC),
    )
    assert result.bad == []
    return result.drafts


def series(name: str, start: date, end: date) -> ListingDraft:
    """The calendar's one draft in the window: a series, with its occurrences."""
    (draft,) = drafts(name, start, end)
    assert draft.occurrences, draft
    return draft


def local_days(draft: ListingDraft, zone: ZoneInfo = BERLIN) -> list[str]:
    """The local day of each of the series' occurrences."""
    return [start.astimezone(zone).strftime("%Y%m%d") for start, _ in draft.occurrences]


def local_times(draft: ListingDraft, zone: tzinfo = UTC) -> dict[str, tuple[time, time]]:
    """Each occurrence's local start and end time, by its local day."""
    spans = ((start.astimezone(zone), end.astimezone(zone)) for start, end in draft.occurrences)
    return {start.strftime("%Y%m%d"): (start.time(), end.time()) for start, end in spans}


def test_it_skips_exdates_and_stops_at_until() -> None:
    """test_issue_20_exdate_ignored.py: the EXDATEs are gone, UNTIL excludes February."""
    draft = series("issue_20_exdate_ignored.ics", date(2019, 1, 1), date(2021, 1, 1))

    assert local_days(draft) == [
        "20191029", "20191112", "20191210", "20200107", "20200114", "20200121", "20200128",
    ]  # fmt: skip
    assert draft.ends_at == datetime(2020, 1, 28, 17, 45, tzinfo=BERLIN)


@pytest.mark.parametrize(
    ("name", "days"),
    [
        (
            "each_week_but_one_deleted.ics",
            ["20190304", "20190318", "20190325", "20190401", "20190408", "20190415", "20190422"],
        ),
        (
            "each_week_but_two_deleted.ics",
            ["20190304", "20190318", "20190401", "20190408", "20190415", "20190422"],
        ),
    ],
)
def test_it_leaves_out_deleted_weeks(name: str, days: list[str]) -> None:
    """test_deleted_entries.py: 7 and 6 of COUNT=8 weekly 00:30 Berlin occurrences remain."""
    draft = series(name, date(2019, 1, 1), date(2020, 1, 1))

    assert local_days(draft) == days
    assert {start for start, _ in local_times(draft, BERLIN).values()} == {time(0, 30)}
    assert draft.recurrence == "every Monday"


def test_it_moves_occurrences_of_a_date_series_and_a_datetime_series() -> None:
    """test_issue_62_moved_event.py: six August occurrences, two of them moved."""
    found = drafts("issue_62_moved_event_2.ics", date(2023, 8, 1), date(2023, 9, 1))

    sydney = ZoneInfo("Australia/Sydney")
    assert {(d.title, d.all_day): local_days(d, sydney) for d in found} == {
        ("Datetime", False): ["20230808", "20230814", "20230822"],  # 14th: a Monday, moved
        ("All Day", True): ["20230810", "20230816", "20230824"],  # 16th: a Wednesday, moved
    }


def test_it_moves_the_last_friday_of_december() -> None:
    """test_issue_62_moved_event.py: the 31 December Karaoke happens on the 17th."""
    draft = series("issue_62_moved_event.ics", date(2021, 12, 1), date(2022, 1, 1))

    moved = datetime(2021, 12, 17, 21, 30, tzinfo=BERLIN)
    assert draft.occurrences == ((moved, moved),)  # not the 31st's, nor a second one
    assert (draft.external_id, draft.starts_at) == ("38m812jicsrer5gorh3mlp7qhc@google.com", moved)
    assert draft.recurrence == "last Friday of the month"


def test_it_adds_rdates_to_the_rule() -> None:
    """test_rdate.py: twelve Hacker Public Radio community news dates."""
    draft = series("rdate_hackerpublicradio.ics", date(2013, 1, 1), date(2015, 1, 1))

    assert local_days(draft, ZoneInfo("Europe/London")) == [
        "20130803", "20130831", "20131005", "20131102", "20131130", "20140104",
        "20140201", "20140301", "20140405", "20140503", "20140531", "20140705",
    ]  # fmt: skip
    assert draft.recurrence == ""  # a rule and dates besides: no words would be right


def test_it_keeps_berlin_wall_time_across_daylight_saving() -> None:
    """test_daylight_saving_time.py: the weekly Chaostreff stays at 19:00 in Berlin."""
    found = drafts("daylight_saving_time.ics", date(2019, 3, 1), date(2019, 5, 1))

    (chaostreff,) = (d for d in found if d.external_id == "7uartkcnhf0elbvs8md0itrf6c@google.com")
    in_utc = [start.astimezone(UTC) for start, _ in chaostreff.occurrences]
    hours = {start.date(): start.hour for start in in_utc}
    assert hours[date(2019, 3, 20)] == 18  # UTC+1
    assert hours[date(2019, 4, 24)] == 17  # UTC+2
    assert {start for start, _ in local_times(chaostreff, BERLIN).values()} == {time(19)}
    assert len(chaostreff.occurrences) == 8


def test_it_applies_this_and_future_overrides() -> None:
    """test_issue_75_range_parameter.py: two RANGE=THISANDFUTURE edits and an RDATE."""
    draft = series("issue_75_range_parameter.ics", date(2024, 9, 1), date(2024, 9, 26))

    times = local_times(draft)
    assert len(draft.occurrences) == len(times) == 13
    assert draft.title == "ORIGINAL EVENT"  # the master's: the edits retitle dates, not it
    for day in ("20240901", "20240911"):
        assert times[day] == (time(12), time(14)), day
    # Moved three hours back from the 13th on, and lengthened to seven.
    for day in ("20240913", "20240917", "20240919"):
        assert times[day] == (time(9), time(16)), day
    assert times["20240915"] == (time(17), time(19))  # an override of its own
    # Moved again, to 14:22 and shorter, from the 21st's (which lands on the 22nd) on.
    for day in ("20240922", "20240924"):
        assert times[day] == (time(14, 22), time(16, 13)), day


def test_it_leaves_out_the_cancelled_day() -> None:
    """test_issue_18_cancel_status.py: only 29 January is cancelled."""
    draft = series("issue_18_cancel_status.ics", date(2020, 1, 27), date(2020, 2, 1))

    assert local_days(draft) == ["20200128", "20200130"]
    assert not draft.withdrawn


def test_it_reads_google_utc_times_in_the_calendar_zone() -> None:
    """test_x_wr_timezone.py: noon and 9 pm in New York, as Google's UI said."""
    found = drafts("x_wr_timezone_simple_events_issue_59.ics", date(2021, 12, 1), date(2022, 1, 1))

    new_york = ZoneInfo("America/New_York")
    assert [(d.starts_at, d.ends_at, d.timezone, d.occurrences) for d in found] == [
        (
            datetime(2021, 12, 22, 12, tzinfo=new_york),
            datetime(2021, 12, 22, 13, tzinfo=new_york),
            "America/New_York",
            (),  # one-off events
        ),
        (
            datetime(2021, 12, 22, 21, tzinfo=new_york),
            datetime(2021, 12, 22, 22, tzinfo=new_york),
            "America/New_York",
            (),
        ),
    ]
