"""A recurring event is one listing (issue 33), over real Postgres with the real model: a
weekly calendar series with an excluded date, a cancelled one and a moved one, among
one-offs, from the calendar parser through ingestion to the search API.

The series, weekly at `first`, three hours each (k: its k-th date, `first` + k weeks):
k=0 and k=1 are over; k=2 is in progress; k=3 is to come; k=4 is cancelled (an override
with STATUS:CANCELLED); k=5 is moved a day later; k=6 is to come; k=7 is an EXDATE."""

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.db import transaction
from django.test import AsyncClient
from django.utils import timezone
from psycopg import AsyncClientCursor

from ingestion import generations
from ingestion.embedding import DIMENSIONS, MODEL_NAME
from ingestion.indexing import embed_pending_batch
from ingestion.models import Listing, ListingEmbedding, Source
from ingestion.parsers.calendar import parse_calendar
from ingestion.upsert import apply_drafts
from retrieval.bounds.deadline import Deadline
from retrieval.pg import hydrate as pg_hydrate
from retrieval.pg.hydrate import hydrate
from retrieval.pg.pool import get_pool
from retrieval.types import DEFAULT_FILTERS, DateFilter, SearchFilters
from tests.conftest import first_search_answered
from tests.factories import draft, source
from tests.search_fixtures import search_json

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("patient_search")]

SERIES = "Tuesday blues session"
WEEK = timedelta(days=7)
LENGTH = timedelta(hours=3)


def _stamp(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y%m%dT%H%M%SZ")


def _weekly(uid: str, title: str, first: datetime, count: int, extra: str = "") -> str:
    return (
        f"BEGIN:VEVENT\r\nUID:{uid}\r\nSUMMARY:{title}\r\nLOCATION:The Crown\r\n"
        f"DESCRIPTION:Twelve-bar blues and a house band; bring an instrument.\r\n"
        f"DTSTART:{_stamp(first)}\r\nDTEND:{_stamp(first + LENGTH)}\r\n"
        f"RRULE:FREQ=WEEKLY;COUNT={count}\r\n{extra}END:VEVENT\r\n"
    )


def _override(uid: str, date: datetime, start: datetime, cancelled: bool = False) -> str:
    status = "STATUS:CANCELLED\r\n" if cancelled else ""
    return (
        f"BEGIN:VEVENT\r\nUID:{uid}\r\nRECURRENCE-ID:{_stamp(date)}\r\n"
        f"DTSTART:{_stamp(start)}\r\nDTEND:{_stamp(start + LENGTH)}\r\n{status}END:VEVENT\r\n"
    )


def _calendar(*events: str) -> bytes:
    body = "".join(events)
    return (
        f"BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//test//EN\r\n{body}END:VCALENDAR\r\n".encode()
    )


def _ingest(payload: bytes, now: datetime, calendar: Source) -> None:
    result = parse_calendar(payload, window_start=now - 5 * WEEK, window_end=now + 9 * WEEK)
    assert result.bad == []
    apply_drafts(calendar, result.drafts, now)


def _dates(now: datetime) -> dict[str, datetime]:
    """The series' first date, and the ones the tests look for."""
    first = (now - 2 * WEEK - timedelta(hours=1)).replace(second=0, microsecond=0)
    return {
        "first": first,
        "in_progress": first + 2 * WEEK,
        "k3": first + 3 * WEEK,
        "cancelled": first + 4 * WEEK,
        "moved_from": first + 5 * WEEK,
        "moved_to": first + 5 * WEEK + timedelta(days=1),
        "k6": first + 6 * WEEK,
        "excluded": first + 7 * WEEK,
    }


def _listings(now: datetime) -> None:
    generations.ensure_active_generation(MODEL_NAME, DIMENSIONS)
    at = _dates(now)
    with transaction.atomic():
        calendar = source("The Crown calendar", Source.Kind.CALENDAR)
        series = _weekly(
            SERIES.lower(), SERIES, at["first"], 8, f"EXDATE:{_stamp(at['excluded'])}\r\n"
        )
        _ingest(
            _calendar(
                series,
                _override(SERIES.lower(), at["cancelled"], at["cancelled"], cancelled=True),
                _override(SERIES.lower(), at["moved_from"], at["moved_to"]),
            ),
            now,
            calendar,
        )
        feed = source()
        for external_id, title, days in (
            ("jam", "Blues jam", 3),
            ("workshop", "Delta blues workshop", 10),
        ):
            starts = now + timedelta(days=days)
            apply_drafts(
                feed, [draft(external_id, title=title, starts_at=starts, venue="The Crown")], now
            )
    while embed_pending_batch():
        pass


@pytest.fixture
async def listed(async_client: AsyncClient) -> dict[str, datetime]:
    now = timezone.now()
    await sync_to_async(_listings)(now)
    await get_pool()
    await first_search_answered(async_client)
    return _dates(now)


def _series(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [result for result in body["results"] if result["title"] == SERIES]


def _at(value: str | None) -> datetime:
    assert value is not None
    return datetime.fromisoformat(value)


async def test_a_series_is_one_result_showing_its_date_in_progress_and_its_more_dates(
    async_client: AsyncClient, listed: dict[str, datetime]
) -> None:
    body = await search_json(async_client, q="blues")
    assert body["mode"] == "hybrid"
    (series,) = _series(body)
    assert _at(series["start"]) == listed["in_progress"]
    assert _at(series["end"]) == listed["in_progress"] + LENGTH
    # Still to come: k3, k5 at its new time and k6; not the cancelled k4 nor the EXDATE.
    assert series["more_dates"] == 3
    assert [_at(date["start"]) for date in series["dates"]] == [
        listed["k3"],
        listed["moved_to"],
        listed["k6"],
    ]
    assert series["recurrence"] == f"every {listed['first'].strftime('%A')}"
    # One listing, one vector: the series' dates are not listings of their own.
    rows = await sync_to_async(Listing.objects.filter(title=SERIES).count)()
    vectors = await sync_to_async(ListingEmbedding.objects.filter(listing__title=SERIES).count)()
    assert (rows, vectors) == (1, 1)


async def test_a_cancelled_date_is_never_matched_and_a_moved_one_only_at_its_new_time(
    async_client: AsyncClient, listed: dict[str, datetime]
) -> None:
    hour = timedelta(hours=1)

    async def around(moment: datetime) -> list[dict[str, Any]]:
        window = {"from": (moment - hour).isoformat(), "to": (moment + hour).isoformat()}
        return _series(await search_json(async_client, q="blues", **window))

    assert await around(listed["cancelled"]) == []
    assert await around(listed["excluded"]) == []
    assert await around(listed["moved_from"]) == []
    (moved,) = await around(listed["moved_to"])
    assert (_at(moved["start"]), moved["more_dates"], moved["dates"]) == (listed["moved_to"], 0, [])


async def test_a_window_shows_the_series_first_date_in_it_and_counts_the_rest_in_it(
    async_client: AsyncClient, listed: dict[str, datetime]
) -> None:
    window = {
        "from": (listed["in_progress"] + LENGTH + timedelta(hours=1)).isoformat(),
        "to": (listed["k6"] - timedelta(hours=1)).isoformat(),
    }
    (series,) = _series(await search_json(async_client, q="blues", **window))
    assert _at(series["start"]) == listed["k3"]
    assert series["more_dates"] == 1  # the moved k5; k6 starts after the window
    assert [_at(date["start"]) for date in series["dates"]] == [listed["moved_to"]]


async def test_in_the_past_a_series_shows_its_latest_date_over(
    async_client: AsyncClient, listed: dict[str, datetime]
) -> None:
    (series,) = _series(await search_json(async_client, q="blues", when="past"))
    assert _at(series["start"]) == listed["first"] + WEEK
    assert series["more_dates"] == 1
    assert [_at(date["start"]) for date in series["dates"]] == [listed["first"]]


async def test_at_any_time_a_series_shows_its_next_date_then_those_over_latest_first(
    async_client: AsyncClient, listed: dict[str, datetime]
) -> None:
    (series,) = _series(await search_json(async_client, q="blues", when="any"))
    assert _at(series["start"]) == listed["in_progress"]
    assert series["more_dates"] == 5
    assert [_at(date["start"]) for date in series["dates"]] == [
        listed["k3"],
        listed["moved_to"],
        listed["k6"],
        listed["first"] + WEEK,
        listed["first"],
    ]


async def test_series_and_one_offs_share_a_page_and_sort_by_next_date(
    async_client: AsyncClient, listed: dict[str, datetime]
) -> None:
    # From tomorrow: the series' next date is k3, in about a week, between the jam (in 3
    # days) and the workshop (in 10); its listing's own start, two weeks ago, is no key.
    tomorrow = (listed["in_progress"] + timedelta(days=1)).isoformat()
    by_date = await search_json(async_client, q="blues", sort="date", **{"from": tomorrow})
    titles = [result["title"] for result in by_date["results"]]
    assert titles == ["Blues jam", SERIES, "Delta blues workshop"]
    starts = [_at(result["start"]) for result in by_date["results"]]
    assert starts == sorted(starts)
    assert _at(by_date["results"][1]["start"]) == listed["k3"]


def _two_series(now: datetime) -> None:
    """Two series of the same text: `earlier` began first (its listing's start is the
    sooner), `sooner` has the sooner next date."""
    generations.ensure_active_generation(MODEL_NAME, DIMENSIONS)
    first = (now - timedelta(days=6)).replace(second=0, microsecond=0)
    with transaction.atomic():
        calendar = source("Crypt calendar", Source.Kind.CALENDAR)
        fortnightly = _weekly("earlier", "Harpsichord hour", first, 3).replace(
            "FREQ=WEEKLY;", "FREQ=WEEKLY;INTERVAL=2;"
        )
        weekly = _weekly("sooner", "Harpsichord hour", first + timedelta(days=8), 3)
        _ingest(_calendar(fortnightly, weekly), now, calendar)
    while embed_pending_batch():
        pass


async def test_of_two_equally_relevant_series_the_one_whose_next_date_is_sooner_comes_first(
    async_client: AsyncClient,
) -> None:
    now = timezone.now()
    await sync_to_async(_two_series)(now)
    await get_pool()
    await first_search_answered(async_client)
    body = await search_json(async_client, q="harpsichord hour")
    assert body["mode"] == "hybrid"
    results = [(r["title"], _at(r["start"])) for r in body["results"]]
    first = (now - timedelta(days=6)).replace(second=0, microsecond=0)
    # "earlier" was written first (the smaller id) and its first date is six days ago;
    # its next is in 8 days (fortnightly), after "sooner"'s first and next, in 2 days.
    assert results[:2] == [
        ("Harpsichord hour", first + timedelta(days=8)),
        ("Harpsichord hour", first + 2 * WEEK),
    ]


async def test_the_listings_statement_runs_prepared_and_answers_as_its_text(
    listed: dict[str, datetime], monkeypatch: pytest.MonkeyPatch
) -> None:
    ids = [pk async for pk in Listing.objects.order_by("pk").values_list("pk", flat=True)]
    tomorrow = listed["in_progress"] + timedelta(days=1)
    later = DateFilter(
        ends_after=tomorrow, starts_before=None, not_ended=False, ended=False, undated=False
    )
    sent: list[str] = []
    execute = AsyncClientCursor.execute

    async def recording(cursor: AsyncClientCursor[Any], text: Any, *args: Any, **kw: Any) -> Any:
        sent.append(str(text))
        return await execute(cursor, text, *args, **kw)

    for filters, by_date in ((DEFAULT_FILTERS, False), (SearchFilters(dates=later), True)):
        with monkeypatch.context() as patched:
            patched.setattr(AsyncClientCursor, "execute", recording)
            runs = [
                await hydrate(
                    ids, "blues", 10, Deadline.after(2000), filters=filters, by_date=by_date
                )
                for _ in range(2)
            ]
            patched.setattr(pg_hydrate, "_prepared", lambda *_: None)
            as_text = await hydrate(
                ids, "blues", 10, Deadline.after(2000), filters=filters, by_date=by_date
            )
        # The series shows its dates from the window on, as the statement's text does.
        assert runs == [as_text] * 2
        assert SERIES in [view.title for view in as_text]
        assert all("EXECUTE searchsite_listings_" in text for text in sent[-3:-1])
        assert "EXECUTE" not in sent[-1]
