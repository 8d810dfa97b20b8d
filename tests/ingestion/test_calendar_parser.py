"""Venue calendars: series, overrides, cancellations, time zones and hostile rules."""

import re
import time
from datetime import UTC, date, datetime, tzinfo
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from icalendar.timezone.windows_to_olson import WINDOWS_TO_OLSON

from ingestion.drafts import ListingDraft, ParseResult, PayloadError
from ingestion.parsers import windows_zones
from ingestion.parsers.calendar import parse_calendar
from tests.conftest import SHARED_DATA
from tests.factories import assert_well_formed_calendar

LONDON = ZoneInfo("Europe/London")
WINDOW_START = datetime(2025, 1, 1, tzinfo=UTC)
WINDOW_END = datetime(2026, 1, 1, tzinfo=UTC)


def ics(*events: str, header: str = "") -> bytes:
    """A VCALENDAR around `events` (each a VEVENT's lines, without BEGIN and END).

    `header` holds calendar-level content lines separated by whitespace.
    """
    lines = ["BEGIN:VCALENDAR", "VERSION:2.0", "PRODID:-//tests//calendar//EN"]
    lines += header.split()
    for event in events:
        lines += ["BEGIN:VEVENT", *event.strip().splitlines(), "END:VEVENT"]
    lines.append("END:VCALENDAR")
    return ("\r\n".join(line.strip() for line in lines) + "\r\n").encode()


def parse(payload: bytes, **options: Any) -> ParseResult:
    """parse_calendar over 2025, unless `options` say otherwise."""
    window = {"window_start": WINDOW_START, "window_end": WINDOW_END}
    return parse_calendar(payload, **{**window, **options})


def only_draft(result: ParseResult) -> ListingDraft:
    assert not result.bad, result.bad
    assert len(result.drafts) == 1, result.drafts
    return result.drafts[0]


def utc(year: int, month: int, day: int, hour: int = 0, minute: int = 0) -> datetime:
    return datetime(year, month, day, hour, minute, tzinfo=UTC)


def occurrence_starts(draft: ListingDraft, zone: tzinfo = UTC) -> list[datetime]:
    """The start of each of a series' occurrences, seen in `zone`."""
    return [start.astimezone(zone) for start, _ in draft.occurrences]


def assert_well_formed_series(result: ParseResult) -> None:
    """What every series draft must be: its dates sooner first, its span theirs."""
    for draft in result.drafts:
        if draft.occurrences:
            assert list(draft.occurrences) == sorted(draft.occurrences)
            assert draft.starts_at == draft.occurrences[0][0]
            assert draft.ends_at == max(end for _, end in draft.occurrences)
            assert all(start <= end for start, end in draft.occurrences)
            assert not draft.withdrawn
        else:
            assert draft.recurrence == ""


QUIZ = """
    UID:quiz@venue.example
    SUMMARY:Pub   quiz
    DESCRIPTION:Teams of six.
    LOCATION:The Crown\\, upstairs
    URL:https://venue.example/quiz
    DTSTART;TZID=Europe/London:20250306T193000
    DTEND;TZID=Europe/London:20250306T213000
    RRULE:FREQ=WEEKLY;COUNT=6
    EXDATE;TZID=Europe/London:20250320T193000
"""
QUIZ_MOVED = """
    UID:quiz@venue.example
    RECURRENCE-ID;TZID=Europe/London:20250403T193000
    SUMMARY:Pub quiz: Easter special
    DTSTART;TZID=Europe/London:20250404T200000
    DTEND;TZID=Europe/London:20250404T223000
"""
QUIZ_CANCELLED = """
    UID:quiz@venue.example
    RECURRENCE-ID;TZID=Europe/London:{day}T193000
    DTSTART;TZID=Europe/London:{day}T193000
    STATUS:CANCELLED
"""


# --- recurrence ---------------------------------------------------------------------------


def test_it_makes_one_draft_of_a_weekly_series_with_an_exdate_and_a_moved_override() -> None:
    result = parse(ics(QUIZ, QUIZ_MOVED))

    draft = only_draft(result)
    assert (draft.external_id, draft.title, draft.position) == ("quiz@venue.example", "Pub quiz", 0)
    assert draft.occurrences == (
        (utc(2025, 3, 6, 19, 30), utc(2025, 3, 6, 21, 30)),
        (utc(2025, 3, 13, 19, 30), utc(2025, 3, 13, 21, 30)),
        # 20 March is the EXDATE; the clocks go forward on 30 March.
        (utc(2025, 3, 27, 19, 30), utc(2025, 3, 27, 21, 30)),
        (utc(2025, 4, 4, 19), utc(2025, 4, 4, 21, 30)),  # Thursday 3 April's, moved
        (utc(2025, 4, 10, 18, 30), utc(2025, 4, 10, 20, 30)),
    )
    assert (draft.starts_at, draft.ends_at) == (utc(2025, 3, 6, 19, 30), utc(2025, 4, 10, 20, 30))
    assert (draft.description, draft.venue, draft.url, draft.timezone) == (
        "Teams of six.",
        "The Crown, upstairs",
        "https://venue.example/quiz",
        "Europe/London",
    )
    assert draft.recurrence == "every Thursday"
    assert (draft.withdrawn, draft.all_day) == (False, False)


def test_a_series_lists_a_moved_date_anew_and_leaves_out_excluded_and_cancelled_ones() -> None:
    cancelled = QUIZ_CANCELLED.format(day="20250327")
    draft = only_draft(parse(ics(QUIZ, QUIZ_MOVED, cancelled)))

    assert [start.strftime("%a %d %b %H:%M") for start in occurrence_starts(draft, LONDON)] == [
        "Thu 06 Mar 19:30",
        "Thu 13 Mar 19:30",
        # not Thursday 20 March (the EXDATE) nor 27 March (cancelled)
        "Fri 04 Apr 20:00",  # not Thursday 3 April at 19:30: moved
        "Thu 10 Apr 19:30",
    ]
    assert occurrence_starts(draft)[2:] == [utc(2025, 4, 4, 19), utc(2025, 4, 10, 18, 30)]
    assert (draft.external_id, draft.withdrawn) == ("quiz@venue.example", False)


def test_an_override_that_retitles_one_date_leaves_the_series_words_alone() -> None:
    # The override comes first in the payload: the series is still its master's.
    draft = only_draft(parse(ics(QUIZ_MOVED, QUIZ)))

    assert (draft.title, draft.description, draft.position) == ("Pub quiz", "Teams of six.", 1)
    assert utc(2025, 4, 4, 19) in occurrence_starts(draft)  # the retitled date is listed


def test_a_series_keeps_its_master_s_words_in_a_window_where_only_a_retitled_date_falls() -> None:
    easter = {"window_start": utc(2025, 4, 1), "window_end": utc(2025, 4, 8)}
    draft = only_draft(parse(ics(QUIZ, QUIZ_MOVED), **easter))

    assert occurrence_starts(draft) == [utc(2025, 4, 4, 19)]
    assert (draft.title, draft.position) == ("Pub quiz", 0)


def test_a_rule_moved_from_one_date_on_is_not_put_in_words() -> None:
    moved = (
        "UID:quiz\nRECURRENCE-ID;RANGE=THISANDFUTURE:20250311T190000Z\n"
        "DTSTART:20250312T190000Z\nDTEND:20250312T210000Z"
    )
    quiz = "UID:quiz\nSUMMARY:Quiz\nDTSTART:20250304T190000Z\nDTEND:20250304T210000Z"
    draft = only_draft(parse(ics(f"{quiz}\nRRULE:FREQ=WEEKLY;COUNT=4", moved)))

    # Tuesday, then Wednesdays: "every Tuesday" would be wrong from the second date on.
    assert [start.weekday() for start in occurrence_starts(draft)] == [1, 2, 2, 2]
    assert draft.recurrence == ""


def test_a_series_ends_when_its_latest_date_ends_not_its_last_one() -> None:
    fair = "UID:fair\nSUMMARY:Fair\nDTSTART:20250601T100000Z\nDTEND:20250601T180000Z"
    # The first day's override runs on until late on the last day.
    long_day = "UID:fair\nRECURRENCE-ID:20250601T100000Z\nDTSTART:20250601T100000Z"
    draft = only_draft(
        parse(ics(f"{fair}\nRRULE:FREQ=DAILY;COUNT=3", f"{long_day}\nDTEND:20250603T230000Z"))
    )

    assert draft.occurrences[-1] == (utc(2025, 6, 3, 10), utc(2025, 6, 3, 18))
    assert (draft.starts_at, draft.ends_at) == (utc(2025, 6, 1, 10), utc(2025, 6, 3, 23))


def test_it_keeps_local_wall_time_across_the_change_to_summer_time() -> None:
    draft = only_draft(
        parse(
            ics("""
                UID:salsa
                SUMMARY:Salsa class
                DTSTART;TZID=Europe/London:20250327T193000
                RRULE:FREQ=WEEKLY;COUNT=2
            """)
        )
    )

    before, after = occurrence_starts(draft)
    assert (before.hour, after.hour) == (19, 18)
    assert before.astimezone(LONDON).time() == after.astimezone(LONDON).time()
    assert after.astimezone(LONDON).date() == date(2025, 4, 3)
    assert draft.ends_at == after  # no DTEND: each occurrence an instant


def test_it_withdraws_a_cancelled_one_off_event_instead_of_dropping_it() -> None:
    draft = only_draft(
        parse(
            ics("""
                UID:gig-1
                SUMMARY:Gig
                STATUS:CANCELLED
                DTSTART:20250601T200000Z
            """)
        )
    )

    assert (draft.external_id, draft.withdrawn) == ("gig-1", True)
    assert draft.starts_at == utc(2025, 6, 1, 20)
    assert (draft.occurrences, draft.recurrence) == ((), "")  # a one-off, not a series


def test_a_cancelled_date_leaves_its_series_without_withdrawing_it() -> None:
    draft = only_draft(parse(ics(QUIZ, QUIZ_CANCELLED.format(day="20250306"))))

    assert (draft.withdrawn, draft.title) == (False, "Pub quiz")  # the master's
    # The first date is cancelled: the series starts at the next one.
    assert draft.starts_at == utc(2025, 3, 13, 19, 30)
    assert occurrence_starts(draft) == [
        utc(2025, 3, 13, 19, 30),
        utc(2025, 3, 27, 19, 30),
        utc(2025, 4, 3, 18, 30),
        utc(2025, 4, 10, 18, 30),
    ]


def test_it_withdraws_a_cancelled_series_as_one_draft() -> None:
    result = parse(ics(QUIZ.replace("SUMMARY:", "STATUS:CANCELLED\nSUMMARY:"), QUIZ_MOVED))

    draft = only_draft(result)  # not one per date, and the moved one is no listing of its own
    assert (draft.external_id, draft.title, draft.withdrawn) == (
        "quiz@venue.example",
        "Pub quiz",
        True,
    )
    assert draft.occurrences == ()


def test_a_series_whose_every_date_is_cancelled_is_one_withdrawn_draft() -> None:
    duo = "UID:duo\nSUMMARY:Duo\nDTSTART:20250304T190000Z\nRRULE:FREQ=WEEKLY;COUNT=2"
    cancel = "UID:duo\nRECURRENCE-ID:{0}\nDTSTART:{0}\nSTATUS:CANCELLED"
    first, second = cancel.format("20250304T190000Z"), cancel.format("20250311T190000Z")

    withdrawn = only_draft(parse(ics(duo, first, second)))
    assert (withdrawn.external_id, withdrawn.title, withdrawn.withdrawn) == ("duo", "Duo", True)
    assert withdrawn.occurrences == ()
    live = only_draft(parse(ics(duo, second)))  # one date left: live
    assert (live.withdrawn, occurrence_starts(live)) == (False, [utc(2025, 3, 4, 19)])


# Tuesday 4 March 2025, 19:30 in London.
TUESDAY = "DTSTART;TZID=Europe/London:20250304T193000"


@pytest.mark.parametrize(
    ("rule", "words"),
    [
        ("FREQ=WEEKLY", "every Tuesday"),  # no BYDAY: DTSTART's day
        ("FREQ=WEEKLY;COUNT=4;WKST=SU", "every Tuesday"),
        ("FREQ=WEEKLY;UNTIL=20251231T235959Z", "every Tuesday"),
        ("FREQ=WEEKLY;INTERVAL=2", "every other Tuesday"),
        ("FREQ=WEEKLY;INTERVAL=2;BYDAY=SA", "every other Saturday"),
        ("FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR", "every weekday"),
        ("FREQ=WEEKLY;BYDAY=TH,MO", "every Monday and Thursday"),
        ("FREQ=WEEKLY;BYDAY=FR,MO,WE", "every Monday, Wednesday and Friday"),
        ("FREQ=DAILY", "every day"),
        ("FREQ=MONTHLY;BYDAY=1FR", "first Friday of the month"),
        ("FREQ=MONTHLY;BYDAY=-1SU", "last Sunday of the month"),
        # Not simple: words at a glance would be wrong, or need more than a glance.
        ("FREQ=MONTHLY;BYDAY=FR;BYSETPOS=1", ""),
        ("FREQ=WEEKLY;BYMONTH=6", ""),
        ("FREQ=WEEKLY;INTERVAL=3", ""),
        ("FREQ=MONTHLY;INTERVAL=2;BYDAY=1FR", ""),
        ("FREQ=MONTHLY;BYDAY=5FR", ""),
        ("FREQ=MONTHLY;BYMONTHDAY=4", ""),
        ("FREQ=YEARLY", ""),
        ("FREQ=WEEKLY;BYDAY=1TU", ""),
        ("FREQ=DAILY;COUNT=1", ""),  # a single date
    ],
)
def test_it_puts_a_simple_rule_in_words(rule: str, words: str) -> None:
    draft = only_draft(parse(ics(f"UID:r\nSUMMARY:Club\n{TUESDAY}\nRRULE:{rule}")))

    assert draft.occurrences  # a series either way
    assert draft.recurrence == words


def test_it_reads_a_weekly_rule_s_day_in_the_event_s_own_zone() -> None:
    # 22:00 on a Tuesday in New York is already Wednesday in UTC.
    late = "UID:late\nSUMMARY:Late show\nDTSTART;TZID=America/New_York:20250304T220000"
    draft = only_draft(parse(ics(f"{late}\nRRULE:FREQ=WEEKLY;COUNT=3")))

    assert draft.recurrence == "every Tuesday"
    assert occurrence_starts(draft)[0] == utc(2025, 3, 5, 3)


def test_it_leaves_dates_given_one_by_one_out_of_words() -> None:
    rdates = "RDATE:20250311T193000Z,20250318T193000Z"
    draft = only_draft(parse(ics(f"UID:r\nSUMMARY:Club\nDTSTART:20250304T193000Z\n{rdates}")))

    assert draft.recurrence == ""
    assert occurrence_starts(draft) == [
        utc(2025, 3, 4, 19, 30),
        utc(2025, 3, 11, 19, 30),
        utc(2025, 3, 18, 19, 30),
    ]
    weekly = "RRULE:FREQ=WEEKLY;COUNT=2\nRDATE:20250320T193000Z"  # and a Thursday
    both = only_draft(parse(ics(f"UID:r\nSUMMARY:Club\n{TUESDAY}\n{weekly}")))
    assert [start.strftime("%a %d") for start in occurrence_starts(both)] == [
        "Tue 04",
        "Tue 11",
        "Thu 20",
    ]
    assert both.recurrence == ""  # not "every Tuesday"


# --- time zones ---------------------------------------------------------------------------


def test_it_reads_a_tzid_defined_by_a_vtimezone_block() -> None:
    venue_time = """
        BEGIN:VTIMEZONE TZID:Venue-Time
        BEGIN:STANDARD DTSTART:19701025T030000 RRULE:FREQ=YEARLY;BYMONTH=10;BYDAY=-1SU
        TZOFFSETFROM:+0200 TZOFFSETTO:+0100 END:STANDARD
        BEGIN:DAYLIGHT DTSTART:19700329T020000 RRULE:FREQ=YEARLY;BYMONTH=3;BYDAY=-1SU
        TZOFFSETFROM:+0100 TZOFFSETTO:+0200 END:DAYLIGHT
        END:VTIMEZONE
    """
    draft = only_draft(
        parse(
            ics(
                """
                UID:opera
                SUMMARY:Opera
                DTSTART;TZID=Venue-Time:20250320T190000
                RRULE:FREQ=WEEKLY;COUNT=3
                """,
                header=venue_time,
            )
        )
    )

    assert occurrence_starts(draft) == [
        utc(2025, 3, 20, 18),
        utc(2025, 3, 27, 18),
        utc(2025, 4, 3, 17),  # the block's DAYLIGHT rule: +02:00 from 30 March
    ]
    assert draft.timezone == ""  # a private zone has no IANA name


def test_it_resolves_an_iana_tzid_without_a_vtimezone_block() -> None:
    draft = only_draft(
        parse(ics("UID:nyc\nSUMMARY:Jazz\nDTSTART;TZID=America/New_York:20250704T210000"))
    )

    assert draft.starts_at == utc(2025, 7, 5, 1)
    assert draft.timezone == "America/New_York"


def test_it_maps_a_windows_tzid_to_its_iana_zone() -> None:
    draft = only_draft(
        parse(ics("UID:w\nSUMMARY:Talk\nDTSTART;TZID=W. Europe Standard Time:20250704T210000"))
    )

    assert (draft.starts_at, draft.timezone) == (utc(2025, 7, 4, 19), "Europe/Berlin")


def test_it_quarantines_an_unknown_tzid_and_keeps_the_other_events() -> None:
    result = parse(
        ics(
            "UID:lost\nSUMMARY:Somewhere\nDTSTART;TZID=Atlantis/Capital:20250704T210000",
            "UID:found\nSUMMARY:Here\nDTSTART:20250704T210000Z",
        )
    )

    assert [draft.external_id for draft in result.drafts] == ["found"]
    (bad,) = result.bad
    assert (bad.position, bad.external_id) == (0, "lost")
    assert "unknown TZID 'Atlantis/Capital'" in bad.reason
    assert "Atlantis/Capital:20250704T210000" in bad.excerpt


def test_it_reads_floating_times_in_the_x_wr_timezone() -> None:
    draft = only_draft(
        parse(
            ics(
                "UID:f\nSUMMARY:Film\nDTSTART:20250704T210000", header="X-WR-TIMEZONE:Europe/Berlin"
            ),
            default_timezone="Asia/Tokyo",
        )
    )

    assert (draft.starts_at, draft.timezone) == (utc(2025, 7, 4, 19), "Europe/Berlin")


@pytest.mark.parametrize("name", ["Mars/Olympus", "America", "../../etc/passwd", ""])
def test_it_falls_back_to_the_default_zone_for_a_bad_x_wr_timezone(name: str) -> None:
    payload = ics("UID:f\nSUMMARY:Film\nDTSTART:20250704T210000", header=f"X-WR-TIMEZONE:{name}")
    draft = only_draft(parse(payload, default_timezone="Asia/Tokyo"))

    assert (draft.starts_at, draft.timezone) == (utc(2025, 7, 4, 12), "Asia/Tokyo")


def test_it_reads_floating_times_in_the_default_zone_without_x_wr_timezone() -> None:
    draft = only_draft(
        parse(ics("UID:f\nSUMMARY:Film\nDTSTART:20250704T210000"), default_timezone="Asia/Tokyo")
    )

    assert (draft.starts_at, draft.timezone) == (utc(2025, 7, 4, 12), "Asia/Tokyo")


def test_it_recurs_utc_times_in_the_x_wr_timezone_as_google_means_them() -> None:
    draft = only_draft(
        parse(
            ics(
                "UID:g\nSUMMARY:Choir\nDTSTART:20250320T193000Z\nRRULE:FREQ=WEEKLY;COUNT=3",
                header="X-WR-TIMEZONE:Europe/London",
            )
        )
    )

    assert [start.hour for start in occurrence_starts(draft, LONDON)] == [19, 19, 19]
    assert occurrence_starts(draft)[-1] == utc(2025, 4, 3, 18, 30)
    assert (draft.timezone, draft.recurrence) == ("Europe/London", "every Thursday")


def test_it_keeps_utc_times_as_utc() -> None:
    draft = only_draft(parse(ics("UID:z\nSUMMARY:Launch\nDTSTART:20250704T210000Z")))

    assert (draft.starts_at, draft.timezone) == (utc(2025, 7, 4, 21), "UTC")
    assert draft.ends_at == draft.starts_at  # no DTEND, no DURATION: an instant


def test_it_starts_all_day_events_at_local_midnight_of_the_calendar() -> None:
    result = parse(
        ics(
            "UID:fair\nSUMMARY:Book fair\nDTSTART;VALUE=DATE:20250704",
            "UID:fest\nSUMMARY:Festival\nDTSTART;VALUE=DATE:20250710\nDTEND;VALUE=DATE:20250713",
            "UID:market\nSUMMARY:Market\nDTSTART;VALUE=DATE:20250705\nRRULE:FREQ=WEEKLY;COUNT=2",
            # Some producers end a one-day event on the day it starts.
            "UID:fete\nSUMMARY:Fete\nDTSTART;VALUE=DATE:20250720\nDTEND;VALUE=DATE:20250720",
            header="X-WR-TIMEZONE:Europe/London",
        )
    )

    def midnight(day: int) -> datetime:
        return datetime(2025, 7, day, tzinfo=LONDON)

    spans = {d.external_id: (d.starts_at, d.ends_at) for d in result.drafts}
    assert spans == {
        "fair": (midnight(4), midnight(5)),
        "fest": (midnight(10), midnight(13)),
        "market": (midnight(5), midnight(13)),  # the series: its first start, its last end
        "fete": (midnight(20), midnight(21)),
    }
    (market,) = (d for d in result.drafts if d.external_id == "market")
    assert market.occurrences == (
        (midnight(5), midnight(6)),
        (midnight(12), midnight(13)),
    )
    assert all(d.all_day and d.timezone == "Europe/London" for d in result.drafts)
    assert spans["fair"][0] == utc(2025, 7, 3, 23)  # midnight in London is in summer time


# --- Outlook and Exchange: Windows zone names -------------------------------------------

EASTERN = "(UTC-05:00) Eastern Time (US & Canada)"
# Outlook's VTIMEZONE: one rule from 1601, this year's, and none of the zone's history.
EASTERN_VTIMEZONE = f"""BEGIN:VTIMEZONE
TZID:{EASTERN}
BEGIN:STANDARD
DTSTART:16010101T020000
TZOFFSETFROM:-0400
TZOFFSETTO:-0500
RRULE:FREQ=YEARLY;BYDAY=1SU;BYMONTH=11
END:STANDARD
BEGIN:DAYLIGHT
DTSTART:16010101T020000
TZOFFSETFROM:-0500
TZOFFSETTO:-0400
RRULE:FREQ=YEARLY;BYDAY=2SU;BYMONTH=3
END:DAYLIGHT
END:VTIMEZONE
"""


def outlook_export(tzid: str, start: str, vtimezone: str = "", rule: str = "") -> bytes:
    """A calendar as Outlook 16 exports one: quoted TZIDs, a folded UID, X-MICROSOFT-*."""
    event = f"""BEGIN:VEVENT
CLASS:PUBLIC
CREATED:20250110T151200Z
DESCRIPTION:Doors at seven.\\n
DTEND;TZID="{tzid}":{start[:-6]}210000
DTSTAMP:20250110T151200Z
DTSTART;TZID="{tzid}":{start}
LAST-MODIFIED:20250110T151200Z
LOCATION:Main hall
PRIORITY:5
{rule}SEQUENCE:0
SUMMARY;LANGUAGE=en-us:Jazz night
TRANSP:OPAQUE
UID:040000008200E00074C5B7101A82E00800000000D0B5A4E0B45FDB0100000000000000001
 0000000A1B2C3D4E5F60718293A4B5C6D7E8F90
X-MICROSOFT-CDO-BUSYSTATUS:BUSY
X-MICROSOFT-CDO-IMPORTANCE:1
X-MICROSOFT-DISALLOW-COUNTER:FALSE
X-MS-OLK-AUTOFILLLOCATION:FALSE
X-MS-OLK-CONFTYPE:0
END:VEVENT
"""
    calendar = (
        "BEGIN:VCALENDAR\nPRODID:-//Microsoft Corporation//Outlook 16.0 MIMEDIR//EN\n"
        f"VERSION:2.0\nMETHOD:PUBLISH\nX-MS-OLK-FORCEINSPECTOROPEN:TRUE\n{vtimezone}"
        f"{event}END:VCALENDAR\n"
    )
    return calendar.replace("\n", "\r\n").encode()


@pytest.mark.parametrize("vtimezone", ["", EASTERN_VTIMEZONE], ids=["alone", "with VTIMEZONE"])
def test_it_maps_an_outlook_display_name_to_its_iana_zone(vtimezone: str) -> None:
    weekly = "RRULE:FREQ=WEEKLY;COUNT=3;BYDAY=TH\n"
    draft = only_draft(parse(outlook_export(EASTERN, "20250306T190000", vtimezone, rule=weekly)))

    assert occurrence_starts(draft) == [
        utc(2025, 3, 7, 0),
        utc(2025, 3, 13, 23),  # 19:00 still: the US went to summer time on 9 March
        utc(2025, 3, 20, 23),
    ]
    assert draft.timezone == "America/New_York"


def test_it_prefers_the_zone_s_history_to_outlook_s_one_rule_vtimezone() -> None:
    """Until 2007 US summer time began in April; the block's March rule is today's."""
    march_2006 = {"window_start": utc(2006, 1, 1), "window_end": utc(2007, 1, 1)}
    payload = outlook_export(EASTERN, "20060320T190000", EASTERN_VTIMEZONE)

    assert only_draft(parse(payload, **march_2006)).starts_at == utc(2006, 3, 21, 0)


@pytest.mark.parametrize(
    ("tzid", "zone"),
    [
        ("(UTC-05:00)  Eastern Time (US &  Canada) ", "America/New_York"),
        ("(GMT-05.00) Eastern Time (US & Canada)", "America/New_York"),  # Outlook 2003
        ("(UTC) Dublin, Edinburgh, Lisbon, London", "Europe/London"),  # Windows 7
        ("(UTC+00:00) Dublin, Edinburgh, Lisbon, London", "Europe/London"),  # Windows 10
        ("(UTC+02:00) Kaliningrad (RTZ 1)", "Europe/Kaliningrad"),
        ("(UTC+02:00) Kaliningrad", "Europe/Kaliningrad"),
        ("(UTC-08:00) Baja California", "America/Tijuana"),
        ("GMT Standard Time", "Europe/London"),
    ],
)
def test_it_reads_display_names_as_outlook_spells_them(tzid: str, zone: str) -> None:
    draft = only_draft(parse(outlook_export(tzid, "20250704T190000")))

    assert draft.timezone == zone
    assert draft.starts_at == datetime(2025, 7, 4, 19, tzinfo=ZoneInfo(zone))


def test_it_quarantines_an_unknown_display_name_without_a_vtimezone() -> None:
    result = parse(outlook_export("(UTC+05:00) Atlantis, Lemuria", "20250704T190000"))

    (bad,) = result.bad
    assert result.drafts == []
    assert bad.reason == (
        "unknown TZID '(UTC+05:00) Atlantis, Lemuria': no VTIMEZONE defines it,"
        " and it is no IANA or Windows zone name"
    )


def test_it_reads_each_calendar_s_custom_zone_in_its_own_vtimezone() -> None:
    """Outlook calls every zone its user edited "Customized Time Zone": icalendar caches
    the first such block process-wide, which must not place the next calendar's events."""

    def customized(offset: str) -> str:
        return (
            EASTERN_VTIMEZONE.replace(EASTERN, "Customized Time Zone")
            .replace("-0400", offset)
            .replace("-0500", offset)
        )

    tzid, start = "Customized Time Zone", "20250704T190000"
    first = only_draft(parse(outlook_export(tzid, start, customized("+0500"))))
    second = only_draft(parse(outlook_export(tzid, start, customized("-0300"))))
    undefined = parse(outlook_export(tzid, start))

    assert (first.starts_at, second.starts_at) == (utc(2025, 7, 4, 14), utc(2025, 7, 4, 22))
    assert [bad.reason.split(":")[0] for bad in undefined.bad] == [
        "unknown TZID 'Customized Time Zone'"
    ]


def test_it_maps_the_brasilia_zone_of_a_real_outlook_calendar() -> None:
    """icalendar's issue 237: Outlook's VTIMEZONE for "(UTC-03:00) Brasília", accent and all."""
    path = SHARED_DATA / "calendars/icalendar-tests/src/icalendar/tests/timezones"
    path /= "issue_237_brazilia_standard.ics"
    if not path.is_file():
        pytest.skip(f"the shared calendar corpora are not at {SHARED_DATA}")
    vtimezone = path.read_text(encoding="utf-8").replace("\r\n", "\n")
    payload = outlook_export("(UTC-03:00) Brasília", "20250704T190000", vtimezone)

    draft = only_draft(parse(payload))
    assert (draft.starts_at, draft.timezone) == (utc(2025, 7, 4, 22), "America/Sao_Paulo")


def test_every_windows_zone_name_leads_to_one_installed_iana_zone() -> None:
    names = [*windows_zones.NAMES_FROM_CLDR, *windows_zones.NAMES_BY_HAND, *WINDOWS_TO_OLSON]

    assert len(windows_zones.WINDOWS_IDS) == len(names)  # no two share a place list
    assert all(windows_zones.windows_zone(name) for name in names)


def test_the_names_from_cldr_are_those_gcloud_keeps() -> None:
    """Re-derives `NAMES_FROM_CLDR` from its source, where google-cloud-sdk is installed."""
    source = Path("/usr/lib/google-cloud-sdk/lib/googlecloudsdk/core/util/times_data.py")
    if not source.is_file():
        pytest.skip(f"google-cloud-sdk is not installed ({source})")
    text = source.read_text(encoding="utf-8")
    derived: dict[str, set[str]] = {}
    for line in text[text.index("IANA_TO_WINDOWS = {") :].splitlines():
        if comment := re.fullmatch(r"\s*# (\(UTC.*)", line):
            ids = derived.setdefault(comment.group(1).strip(), set())
        elif entry := re.fullmatch(r"\s*'[^']+': '([^']+)',", line):
            ids.add(entry.group(1))

    single = {name: found.pop() for name, found in derived.items() if len(found) == 1}
    assert single == windows_zones.NAMES_FROM_CLDR


# --- hostile and broken input -------------------------------------------------------------


def test_it_quarantines_an_endless_secondly_rule_quickly_and_keeps_the_good_event() -> None:
    started = time.monotonic()
    result = parse(
        ics(
            "UID:flood\nSUMMARY:Flood\nDTSTART:20250101T000000Z\nRRULE:FREQ=SECONDLY",
            "UID:gig\nSUMMARY:Gig\nDTSTART:20250601T200000Z",
        )
    )

    assert time.monotonic() - started < 2
    assert [draft.external_id for draft in result.drafts] == ["gig"]
    (bad,) = result.bad
    assert (bad.position, bad.external_id) == (0, "flood")
    assert bad.reason == "recurrence produces more than 500 occurrences in the window"


@pytest.mark.parametrize(
    ("dtstart", "rule", "reason"),
    [
        # Minutely for five years before the window: millions of occurrences to skip.
        ("20200101T000000Z", "FREQ=MINUTELY;UNTIL=20300101T000000Z", "and the window end"),
        # A date that never comes: dateutil would scan day by day to year 9999.
        ("20250101T000000Z", "FREQ=DAILY;BYMONTH=2;BYMONTHDAY=30", "matches no date"),
        ("20250101T000000Z", "FREQ=SECONDLY;BYMONTH=4;BYMONTHDAY=31", "matches no date"),
        ("20250101T000000Z", "FREQ=DAILY;BYEASTER=0", "unsupported BYEASTER"),
        # A position past the one candidate a minute: dateutil would step minute by minute.
        ("20250101T000000Z", "FREQ=MINUTELY;BYSETPOS=3", "unsupported BYSETPOS"),
        ("20250101T000000Z", "FREQ=DAILY;BYSETPOS=2", "matches no date"),
        # Two times a day, found by stepping through all 86,400 seconds of each day.
        ("20250101T000000Z", "FREQ=SECONDLY;BYHOUR=0,12;BYMINUTE=0", "would take about"),
        ("00010101T000000Z", "FREQ=DAILY;BYMONTH=2;BYMONTHDAY=30", "would take about"),
    ],
)
def test_it_quarantines_absurd_rules_in_bounded_time(dtstart: str, rule: str, reason: str) -> None:
    started = time.monotonic()
    result = parse(ics(f"UID:absurd\nSUMMARY:Absurd\nDTSTART:{dtstart}\nRRULE:{rule}"))

    assert time.monotonic() - started < 2
    assert result.drafts == []
    (bad,) = result.bad
    assert reason in bad.reason


def test_it_caps_the_occurrences_of_one_event() -> None:
    daily = "UID:daily\nSUMMARY:Daily\nDTSTART:20250101T100000Z\nRRULE:FREQ=DAILY;COUNT=40"

    at_the_cap = only_draft(parse(ics(daily), max_occurrences_per_event=40))
    assert len(at_the_cap.occurrences) == 40
    assert at_the_cap.ends_at == utc(2025, 2, 9, 10)
    result = parse(ics(daily), max_occurrences_per_event=39)
    assert result.drafts == []
    assert [bad.reason for bad in result.bad] == [
        "recurrence produces more than 39 occurrences in the window"
    ]


def test_it_caps_the_items_of_a_payload_counting_a_series_as_one() -> None:
    daily = "UID:daily\nSUMMARY:Daily\nDTSTART:20250101T100000Z\nRRULE:FREQ=DAILY;COUNT=30"
    gig = "UID:gig\nSUMMARY:Gig\nDTSTART:20250601T200000Z"

    result = parse(ics(gig, daily), max_items=2)
    assert (result.items, result.bad) == (2, [])
    assert [(d.external_id, len(d.occurrences)) for d in result.drafts] == [
        ("gig", 0),
        ("daily", 30),
    ]
    with pytest.raises(PayloadError, match="3 events, more than the 2 allowed"):
        parse(ics(gig, gig, gig), max_items=2)


def test_it_quarantines_a_vevent_without_dtstart_and_says_why() -> None:
    result = parse(
        ics("UID:gig\nSUMMARY:Gig\nDTSTART:20250601T200000Z", "UID:undated\nSUMMARY:Someday")
    )

    assert [draft.external_id for draft in result.drafts] == ["gig"]
    (bad,) = result.bad
    assert (bad.position, bad.external_id, bad.reason) == (1, "undated", "no DTSTART")
    assert bad.excerpt.startswith("BEGIN:VEVENT\r\nUID:undated\r\nSUMMARY:Someday")


@pytest.mark.parametrize(
    ("event", "reason"),
    [
        ("UID:x\nDTSTART:20250601T200000Z", "no SUMMARY"),
        ("UID:x\nSUMMARY:  \nDTSTART:20250601T200000Z", "no SUMMARY"),
        ("UID:x\nSUMMARY:A\nDTSTART:20251301T200000Z", "invalid DTSTART"),
        ("UID:x\nSUMMARY:A\nDTSTART:20250601T200000Z\nDTEND:20250601T190000Z", "DTEND is before"),
        ("UID:x\nSUMMARY:A\nDTSTART:20250601T200000Z\nDURATION:-PT1H", "DURATION is negative"),
        ("UID:x\nSUMMARY:A\nDTSTART:20250601T200000Z\nRRULE:FREQ=FORTNIGHTLY", "invalid RRULE"),
        ("UID:x\nSUMMARY:A\nDTSTART:20250601T200000Z\nDTSTART:20250602T200000Z", "more than once"),
    ],
)
def test_it_quarantines_invalid_events_with_a_reason(event: str, reason: str) -> None:
    result = parse(ics(event, "UID:ok\nSUMMARY:OK\nDTSTART:20250601T200000Z"))

    assert [draft.external_id for draft in result.drafts] == ["ok"]
    (bad,) = result.bad
    assert (bad.position, bad.external_id) == (0, "x")
    assert reason in bad.reason


@pytest.mark.parametrize(
    ("payload", "reason"),
    [
        (b"\x00\xff garbage \x89PNG\r\n", "not iCalendar"),
        (b"<html><body>Not found</body></html>", "not iCalendar"),
        (b"", "empty payload"),
        (b"BEGIN:VEVENT\r\nUID:x\r\nEND:VEVENT\r\n", "no VCALENDAR"),
        (ics("UID:x\nSUMMARY:A\nDTSTART:20250601T200000Z")[:-15], "truncated"),
        (b"BEGIN:VCALENDAR\r\nBEGIN:VEVENT\r\nUID:x\r\nEND:VCALENDAR\r\n", "truncated"),
    ],
)
def test_it_rejects_a_payload_that_is_not_a_whole_calendar(payload: bytes, reason: str) -> None:
    with pytest.raises(PayloadError, match=reason) as rejected:
        parse(payload)

    assert rejected.value.permanent is (reason != "truncated")


# --- external ids -------------------------------------------------------------------------


def test_it_gives_ids_that_are_unique_and_stable_across_polls_and_windows() -> None:
    payload = ics(
        QUIZ,
        QUIZ_MOVED,
        "UID:gig\nSUMMARY:Gig\nDTSTART:20250601T200000Z",
        "SUMMARY:No UID\nLOCATION:Hall\nDTSTART;TZID=Europe/London:20250601T200000",
        "UID:market\nSUMMARY:Market\nDTSTART;VALUE=DATE:20250705\nRRULE:FREQ=WEEKLY;COUNT=3",
    )

    first, second = parse(payload), parse(payload)
    ids = [draft.external_id for draft in first.drafts]
    assert ids == [draft.external_id for draft in second.drafts]
    (no_uid,) = (draft.external_id for draft in first.drafts if draft.title == "No UID")
    assert no_uid.startswith("nouid:")
    assert ids == ["quiz@venue.example", "gig", no_uid, "market"]  # one a series
    later = parse(payload, window_start=utc(2025, 4, 1), window_end=utc(2025, 7, 1))
    assert [draft.external_id for draft in later.drafts] == ["quiz@venue.example", "gig", no_uid]


def test_a_series_keeps_its_uid_as_its_id_whatever_the_window() -> None:
    payload = ics(QUIZ, QUIZ_MOVED, QUIZ_CANCELLED.format(day="20250410"))
    march = {"window_start": utc(2025, 3, 1), "window_end": utc(2025, 3, 20)}
    april = {"window_start": utc(2025, 3, 20), "window_end": utc(2025, 5, 1)}

    before, after = only_draft(parse(payload, **march)), only_draft(parse(payload, **april))
    assert before.external_id == after.external_id == "quiz@venue.example"
    assert occurrence_starts(before) == [utc(2025, 3, 6, 19, 30), utc(2025, 3, 13, 19, 30)]
    assert occurrence_starts(after) == [utc(2025, 3, 27, 19, 30), utc(2025, 4, 4, 19)]
    assert (before.position, after.position) == (0, 0)


def test_it_tells_two_uidless_twins_apart_by_quarantining_the_second() -> None:
    twin = "SUMMARY:Open day\nDTSTART:20250601T100000Z"
    result = parse(ics(twin, twin))

    assert len(result.drafts) == 1
    (bad,) = result.bad
    assert bad.position == 1
    assert "same summary, start and place as VEVENT 0" in bad.reason


def test_it_keeps_only_web_links_and_bounds_descriptions() -> None:
    draft = only_draft(
        parse(
            ics(
                "UID:x\nSUMMARY:A\nURL:javascript:alert(1)\nDTSTART:20250601T200000Z\n"
                f"DESCRIPTION:{'word ' * 2000}"
            )
        )
    )

    assert draft.url == ""
    assert len(draft.description) == 5000


# --- any input ----------------------------------------------------------------------------

_LINES = [
    "BEGIN:VCALENDAR", "END:VCALENDAR", "BEGIN:VEVENT", "END:VEVENT", "UID:a", "UID:b",
    "SUMMARY:x", "DTSTART:20250601T200000Z", "DTSTART;VALUE=DATE:20250601",
    "DTSTART;TZID=Europe/London:20250601T200000", "DTSTART;TZID=Nowhere:20250601T200000",
    "DTSTART:20250601T200000", "DTEND:20250101T000000Z", "DURATION:PT1H",
    "RRULE:FREQ=DAILY;COUNT=3", "RRULE:FREQ=SECONDLY", "RRULE:FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=30",
    "RDATE:20250701T200000Z", "EXDATE:20250602T200000Z", "RECURRENCE-ID:20250602T200000Z",
    "RANGE=THISANDFUTURE", "RECURRENCE-ID;RANGE=THISANDFUTURE:20250602T200000Z",
    "STATUS:CANCELLED", "X-WR-TIMEZONE:Europe/Berlin", "BEGIN:VTIMEZONE", "END:VTIMEZONE",
    "TZID:Nowhere", "SEQUENCE:2", "DTSTART:99991231T235959Z", "DTSTART:00010101T000000Z",
]  # fmt: skip


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.one_of(
        st.binary(max_size=400),
        st.lists(st.sampled_from(_LINES) | st.text(max_size=30), max_size=25).map(
            lambda lines: "\r\n".join(lines).encode()
        ),
    )
)
def test_it_never_raises_anything_but_payload_error(payload: bytes) -> None:
    try:
        result = parse(payload)
    except PayloadError as error:
        reason = error.reason
    else:
        reason = "parsed"
        assert_well_formed_calendar(result)
        assert_well_formed_series(result)
        assert all(draft.title for draft in result.drafts)
    assert reason
