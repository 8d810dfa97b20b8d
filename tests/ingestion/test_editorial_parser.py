"""Editorial records: field validation, JSON and CSV payloads, and real-world exports."""

import csv
import io
import json
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ingestion.drafts import BadItem, ListingDraft, ParseResult, PayloadError
from ingestion.parsers.editorial import FIELDS, parse_editorial, validate_record
from tests.conftest import SHARED_DATA

VALID = {
    "id": "ev-1",
    "title": "  Jazz night  ",
    "description": "Three sets, one piano.",
    "venue": "The Hall",
    "aliases": ["Jazz at the Hall", "Hall jazz"],
    "start": "2026-09-12T19:00:00+01:00",
    "end": "2026-09-12T22:30:00+01:00",
    "timezone": "Europe/London",
    "url": "https://example.org/jazz",
    "withdrawn": True,
}


def parse_json(records: object) -> ParseResult:
    return parse_editorial(json.dumps(records).encode(), filename_hint="records.json")


def only_bad(record: object) -> BadItem:
    checked = validate_record(record, 0)
    assert isinstance(checked, BadItem), checked
    return checked


def only_draft(record: object) -> ListingDraft:
    checked = validate_record(record, 0)
    assert isinstance(checked, ListingDraft), checked
    return checked


def assert_each_item_once(result: ParseResult, items: int) -> None:
    positions = sorted(
        [draft.position for draft in result.drafts] + [bad.position or 0 for bad in result.bad]
    )
    assert positions == list(range(items))


# --- one record --------------------------------------------------------------------------


def test_it_turns_a_valid_record_into_a_draft_with_every_field() -> None:
    draft = only_draft(VALID)

    assert draft == ListingDraft(
        external_id="ev-1",
        title="Jazz night",
        position=0,
        description="Three sets, one piano.",
        venue="The Hall",
        aliases=("Jazz at the Hall", "Hall jazz"),
        starts_at=datetime(2026, 9, 12, 18, 0, tzinfo=UTC),
        ends_at=datetime(2026, 9, 12, 21, 30, tzinfo=UTC),
        timezone="Europe/London",
        url="https://example.org/jazz",
        withdrawn=True,
    )


def test_it_needs_only_id_and_title_and_reads_null_as_absent() -> None:
    draft = only_draft({"id": 42, "title": "Quiz", "venue": None, "aliases": None})

    assert (draft.external_id, draft.venue, draft.aliases, draft.starts_at) == ("42", "", (), None)


@pytest.mark.parametrize(
    ("field", "value", "expected"),
    [
        ("id", None, "id: required"),
        ("id", "   ", "id: required"),
        ("id", True, "id: must be a string or an integer, got boolean"),
        ("id", 1.5, "id: must be a string or an integer, got number"),
        ("id", "x" * 201, "id: longer than 200 characters"),
        ("title", None, "title: required"),
        ("title", " \t ", "title: required"),
        ("title", 7, "title: must be a string, got number"),
        ("title", "x" * 501, "title: longer than 500 characters"),
        ("title", "a\x00b", "title: contains a NUL character"),
        ("title", "lone \ud800 surrogate", "title: contains an unpaired surrogate"),
        ("description", "x" * 10_001, "description: longer than 10000 characters"),
        ("description", ["a"], "description: must be a string, got list"),
        ("venue", "x" * 301, "venue: longer than 300 characters"),
        ("aliases", "one alias", "aliases: must be a list of strings, got string"),
        ("aliases", ["a"] * 21, "aliases: more than 20 aliases"),
        (
            "aliases",
            ["ok", 3, " "],
            "aliases: item 1 must be a string, got number, item 2 required",
        ),
        ("aliases", ["x" * 301], "aliases: item 0 longer than 300 characters"),
        ("start", "next tuesday", "start: not an ISO-8601 datetime"),
        ("start", 1533852000000, "start: must be a string, got number"),
        ("start", "2026-09-12", "start: a date without a time of day"),
        ("end", "2026-13-01T10:00:00Z", "end: not an ISO-8601 datetime"),
        ("end", "9999-12-31T23:00:00-05:00", "end: out of range"),  # no such instant in UTC
        ("timezone", "Mars/Olympus_Mons", "timezone: unknown IANA time zone 'Mars/Olympus_Mons'"),
        ("timezone", "../../etc/passwd", "timezone: unknown IANA time zone '../../etc/passwd'"),
        ("url", "ftp://example.org/a", "url: must be http(s)"),
        ("url", "javascript:alert(1)", "url: must be http(s)"),
        ("url", "example.org/page", "url: must be http(s)"),
        ("url", "https://", "url: has no host"),
        ("url", "https://example.org/a b", "url: contains whitespace"),
        ("withdrawn", "yes", "withdrawn: must be true or false, got string"),
        ("withdrawn", 1, "withdrawn: must be true or false, got number"),
    ],
)
def test_it_names_the_field_and_the_problem(field: str, value: object, expected: str) -> None:
    bad = only_bad({**VALID, field: value})

    assert bad.reason == expected
    assert bad.permanent


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("id", "x" * 200),
        ("title", "x" * 500),
        ("description", "x" * 10_000),
        ("venue", "x" * 300),
        ("aliases", ["x" * 300] * 20),
        ("url", "HTTP://EXAMPLE.ORG/"),
    ],
)
def test_it_accepts_values_at_the_limits(field: str, value: object) -> None:
    only_draft({**VALID, field: value})


def test_it_collects_every_error_of_a_record_into_one_reason() -> None:
    bad = only_bad({"id": "ev-9", "title": "", "url": "ftp://x", "start": "soon"})

    assert bad.reason == "title: required; url: must be http(s); start: not an ISO-8601 datetime"
    assert bad.external_id == "ev-9"  # the id was fine, so editors can find the record


def test_it_rejects_unknown_fields_by_name_instead_of_dropping_them() -> None:
    bad = only_bad({"id": "ev-1", "titel": "Jazz", "colour": "red"})

    assert bad.reason == "unknown fields: 'colour', 'titel'; title: required"


def test_it_rejects_a_naive_datetime_without_a_timezone() -> None:
    bad = only_bad({"id": "a", "title": "t", "start": "2026-09-12T19:00:00"})

    assert bad.reason == "start: no UTC offset, so timezone is required"


def test_it_places_a_naive_datetime_in_the_given_timezone() -> None:
    winter = only_draft(
        {"id": "a", "title": "t", "start": "2026-01-15T19:00", "timezone": "Europe/London"}
    )
    summer = only_draft(
        {"id": "b", "title": "t", "start": "2026-07-15T19:00", "end": "2026-07-15T21:00",
         "timezone": "Europe/London"}
    )  # fmt: skip

    assert winter.starts_at == datetime(2026, 1, 15, 19, 0, tzinfo=UTC)
    assert summer.starts_at == datetime(2026, 7, 15, 18, 0, tzinfo=UTC)
    assert summer.ends_at is not None
    assert summer.ends_at.utcoffset() == timedelta(hours=1)


def test_it_keeps_an_explicit_offset_even_with_a_timezone() -> None:
    draft = only_draft(
        {"id": "a", "title": "t", "start": "2026-07-15T19:00Z", "timezone": "America/Denver"}
    )

    assert draft.starts_at == datetime(2026, 7, 15, 19, 0, tzinfo=UTC)


def test_it_rejects_a_local_time_skipped_by_a_clock_change() -> None:
    bad = only_bad(
        {"id": "a", "title": "t", "start": "2026-03-29T01:30", "timezone": "Europe/London"}
    )

    assert bad.reason == "start: does not exist in Europe/London (skipped by a clock change)"


def test_an_ambiguous_local_time_takes_its_first_occurrence() -> None:
    # 01:30 happens twice in London on 2026-10-25: first in summer time, then in winter time.
    draft = only_draft(
        {"id": "a", "title": "t", "start": "2026-10-25T01:30", "timezone": "Europe/London"}
    )

    # Equal across zones only because the draft holds a fixed offset, not Europe/London:
    # Python never finds a time in a zone's repeated hour equal to one in another zone.
    assert draft.starts_at == datetime(2026, 10, 25, 0, 30, tzinfo=UTC)


def test_it_does_not_blame_start_when_the_timezone_itself_is_wrong() -> None:
    bad = only_bad({"id": "a", "title": "t", "start": "2026-03-29T10:00", "timezone": "Londres"})

    assert bad.reason == "timezone: unknown IANA time zone 'Londres'"


def test_it_rejects_an_end_before_the_start() -> None:
    bad = only_bad({**VALID, "end": "2026-09-12T18:59:59+01:00"})

    assert bad.reason == "end: before start"


def test_it_compares_start_and_end_as_instants_not_as_text() -> None:
    # 18:30+01:00 is 17:30 UTC, after 19:00+02:00 (17:00 UTC); the text compares the other way.
    draft = only_draft(
        {**VALID, "start": "2026-09-12T19:00+02:00", "end": "2026-09-12T18:30+01:00"}
    )
    equal = only_draft({**VALID, "end": VALID["start"]})

    assert draft.ends_at is not None
    assert equal.ends_at == equal.starts_at


def test_it_rejects_an_end_without_a_start() -> None:
    bad = only_bad({"id": "a", "title": "t", "end": "2026-09-12T22:00Z"})

    assert bad.reason == "end: given without start"


def test_it_rejects_something_that_is_not_an_object() -> None:
    bad = validate_record(["id", "title"], 3)

    assert isinstance(bad, BadItem)
    assert (bad.position, bad.reason) == (3, "record: expected an object, got list")


def test_a_bad_record_keeps_its_json_so_an_editor_can_correct_and_retry_it() -> None:
    record = {"id": "ev-1", "title": "Caf\u00e9 \ud83c", "start": "soon"}

    bad = only_bad(record)

    assert json.loads(bad.raw) == record
    bad.raw.encode("utf-8")  # storable: the unpaired surrogate stays an escape
    retried = validate_record(json.loads(bad.raw), 0)
    assert isinstance(retried, BadItem)
    assert retried.reason == bad.reason


# --- JSON payloads --------------------------------------------------------------------------


def test_it_parses_a_json_list_keeping_positions() -> None:
    result = parse_json([VALID, {**VALID, "id": "ev-2", "title": ""}, {**VALID, "id": "ev-3"}])

    assert [draft.external_id for draft in result.drafts] == ["ev-1", "ev-3"]
    assert [draft.position for draft in result.drafts] == [0, 2]
    assert [(bad.position, bad.external_id, bad.reason) for bad in result.bad] == [
        (1, "ev-2", "title: required")
    ]


def test_it_sniffs_json_without_a_filename_hint_and_strips_a_byte_order_mark() -> None:
    payload = b"\xef\xbb\xbf" + json.dumps([VALID]).encode()

    result = parse_editorial(payload)

    assert [draft.external_id for draft in result.drafts] == ["ev-1"]


def test_it_makes_non_objects_in_the_list_bad_items() -> None:
    result = parse_json([VALID, 5, "text", None, [VALID]])

    assert len(result.drafts) == 1
    assert [bad.reason for bad in result.bad] == [
        "record: expected an object, got number",
        "record: expected an object, got string",
        "record: expected an object, got null",
        "record: expected an object, got list",
    ]
    assert_each_item_once(result, 5)


@pytest.mark.parametrize(
    ("payload", "reason"),
    [
        (b'{"records": []}', "expected a JSON list of records, got object"),
        (b'"just text"', "expected a JSON list of records, got string"),
        (b'[{"id": 1,', "not valid JSON"),
        (b'[{"id": 1, "title": NaN}]', "not valid JSON: NaN is not allowed"),
        (b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
        (b"", "not valid JSON"),
    ],
)
def test_it_rejects_a_json_payload_that_is_not_a_list_of_records(
    payload: bytes, reason: str
) -> None:
    with pytest.raises(PayloadError, match=reason) as raised:
        parse_editorial(payload, filename_hint="records.json")

    assert raised.value.permanent


def test_it_rejects_invalid_utf8_as_a_whole() -> None:
    payload = json.dumps([VALID]).encode()[:-10] + b"\xff\xfe" + b'"}]'

    with pytest.raises(PayloadError, match=r"not valid UTF-8 \(byte \d+\)"):
        parse_editorial(payload, filename_hint="records.json")


def test_it_keeps_the_first_of_duplicate_ids_and_says_where_it_was() -> None:
    result = parse_json(
        [
            {"id": 7, "title": "first"},
            {"id": "other", "title": "other"},
            {"id": "7", "title": "second"},  # the same id once an integer becomes a string
            {"id": " 7 ", "title": "third"},
        ]
    )

    assert [(draft.external_id, draft.title) for draft in result.drafts] == [
        ("7", "first"),
        ("other", "other"),
    ]
    assert [(bad.position, bad.reason) for bad in result.bad] == [
        (2, "duplicate id in payload (first at position 0)"),
        (3, "duplicate id in payload (first at position 0)"),
    ]
    assert json.loads(result.bad[0].raw) == {"id": "7", "title": "second"}


def test_a_duplicate_of_a_bad_record_is_still_a_duplicate() -> None:
    result = parse_json([{"id": "a", "title": ""}, {"id": "a", "title": "fixed"}])

    assert result.drafts == []
    assert [bad.reason for bad in result.bad] == [
        "title: required",
        "duplicate id in payload (first at position 0)",
    ]


def test_it_refuses_more_records_than_allowed_in_one_payload() -> None:
    records = [{"id": n, "title": "t"} for n in range(4)]
    payload = json.dumps(records).encode()

    assert parse_editorial(payload, filename_hint="a.json", max_items=4).items == 4
    with pytest.raises(PayloadError, match="more than 3 records"):
        parse_editorial(payload, filename_hint="a.json", max_items=3)


# --- CSV payloads ---------------------------------------------------------------------------

CSV_PAYLOAD = (
    "id,title,venue,aliases,start,timezone,url,withdrawn\r\n"
    "ev-1,Jazz night,,Jazz|Hall jazz|,2026-09-12T19:00,Europe/London,https://example.org/j,yes\r\n"
    '"ev-2","Quiz, with ""quotes""",The Pub,,,,,\r\n'
    "\r\n"
    "ev-3,,The Pub,,,,,maybe\r\n"
)


def test_it_parses_csv_with_empty_cells_as_absent_and_aliases_split_on_pipes() -> None:
    result = parse_editorial(CSV_PAYLOAD.encode(), filename_hint="upload.CSV")

    jazz, quiz = result.drafts
    assert jazz == ListingDraft(
        external_id="ev-1",
        title="Jazz night",
        position=0,
        aliases=("Jazz", "Hall jazz"),
        starts_at=datetime(2026, 9, 12, 18, 0, tzinfo=UTC),
        timezone="Europe/London",
        url="https://example.org/j",
        withdrawn=True,
    )
    assert (quiz.title, quiz.venue, quiz.position, quiz.withdrawn) == (
        'Quiz, with "quotes"',
        "The Pub",
        1,
        False,
    )
    # the blank line is not a record, so the third record is at position 2
    assert [(bad.position, bad.reason) for bad in result.bad] == [
        (2, "title: required; withdrawn: must be true or false, got string")
    ]


def test_it_sniffs_csv_without_a_hint_and_strips_a_byte_order_mark() -> None:
    # Without stripping, the first column would be "\ufeffid": unknown, and the file refused.
    payload = "\ufeffid,title\nev-1,Talk\n".encode()

    result = parse_editorial(payload, filename_hint="https://example.org/export?format=x")

    assert [draft.title for draft in result.drafts] == ["Talk"]


def test_it_makes_a_row_of_the_wrong_width_a_bad_item_and_keeps_the_rest() -> None:
    payload = b"id,title\nev-1,One\nev-2,Two,extra\nev-3\nev-4,Four\n"

    result = parse_editorial(payload, filename_hint="a.csv")

    assert [draft.external_id for draft in result.drafts] == ["ev-1", "ev-4"]
    assert [(bad.position, bad.reason) for bad in result.bad] == [
        (1, "row has 3 cells, header has 2"),
        (2, "row has 1 cells, header has 2"),
    ]
    assert_each_item_once(result, 4)


@pytest.mark.parametrize(
    ("header", "reason"),
    [
        ("id,titel,venue", "CSV header: unknown columns: 'titel'; missing columns: title"),
        ("id,title,title", "CSV header: repeated columns: title"),
        ("title,venue", "CSV header: missing columns: id"),
    ],
)
def test_it_rejects_a_csv_whose_header_would_fail_every_row(header: str, reason: str) -> None:
    with pytest.raises(PayloadError) as raised:
        parse_editorial(f"{header}\na,b,c\n".encode(), filename_hint="a.csv")

    assert raised.value.reason == reason


def test_it_rejects_an_empty_csv() -> None:
    with pytest.raises(PayloadError, match="no header row"):
        parse_editorial(b"", filename_hint="a.csv")


def test_it_refuses_more_csv_rows_than_allowed() -> None:
    with pytest.raises(PayloadError, match="more than 2 records"):
        parse_editorial(b"id,title\n1,a\n2,b\n3,c\n", filename_hint="a.csv", max_items=2)


# --- properties -----------------------------------------------------------------------------

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(), children),
    max_leaves=12,
)
field_values = json_values | st.text(min_size=1).map(lambda text: f"2026-09-12T{text}")
records = st.dictionaries(st.sampled_from(FIELDS) | st.text(max_size=5), field_values)


@settings(max_examples=200, deadline=None)
@given(st.lists(records | json_values, max_size=8) | json_values)
def test_any_json_value_gives_a_result_accounting_for_every_item_or_a_payload_error(
    value: object,
) -> None:
    try:
        result = parse_json(value)
    except PayloadError:
        assert not isinstance(value, list)
        return
    assert isinstance(value, list)
    assert_each_item_once(result, len(value))
    assert all(bad.reason for bad in result.bad)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300), st.sampled_from(["a.json", "a.csv", ""]))
def test_any_bytes_give_a_result_or_a_payload_error(payload: bytes, hint: str) -> None:
    try:
        result = parse_editorial(payload, filename_hint=hint)
    except PayloadError as exc:
        error = exc
    else:
        assert_each_item_once(result, result.items)
        return
    assert error.reason


# --- real-world exports ---------------------------------------------------------------------

needs_shared_data = pytest.mark.skipif(
    not SHARED_DATA.is_dir(), reason=f"shared test data not found at {SHARED_DATA}"
)
MEETUP = (
    "listings/meetup-boulder-2018/upcoming_events/2018-08-09_Boulder_all_events_unfiltered2.txt"
)


def meetup_record(row: dict[str, str]) -> dict[str, object]:
    """A Meetup row as a hurried editor would copy it: "NULL" becomes absent, and the epoch
    milliseconds become `start` only when they are an exact integer; float notation
    ("1.533852e+12", precision already lost) is passed on untouched."""
    values = {name: None if value == "NULL" else value for name, value in row.items()}
    start = values["Date_ms"]
    if start is not None and start.isdigit():
        start = datetime.fromtimestamp(int(start) / 1000, UTC).isoformat()
    return {
        "id": values["url"],
        "title": values["EventName"],
        "venue": values["Location"],
        "start": start,
        "url": values["url"],
    }


def as_csv(records: list[dict[str, object]]) -> bytes:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(records[0]))
    writer.writeheader()
    writer.writerows(records)
    return out.getvalue().encode()


@needs_shared_data
def test_messy_meetup_rows_become_clear_bad_items_and_the_rest_drafts() -> None:
    with (SHARED_DATA / MEETUP).open(encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle, delimiter="\t"))
    records = [meetup_record(row) for row in rows]

    result = parse_editorial(as_csv(records), filename_hint="meetup.csv")

    messy = [index for index, row in enumerate(rows) if not row["Date_ms"].isdigit()]
    assert messy, "the sample should hold float-notation timestamps"
    assert [bad.position for bad in result.bad] == messy
    assert {bad.reason for bad in result.bad} == {"start: not an ISO-8601 datetime"}
    assert all(bad.external_id and bad.raw for bad in result.bad)
    assert_each_item_once(result, len(rows))
    by_id = {draft.external_id: draft for draft in result.drafts}
    no_venue = [row["url"] for row in rows if row["Location"] == "NULL"]
    assert {by_id[url].venue for url in no_venue if url in by_id} == {""}
    first_exact = next(row for row in rows if row["Date_ms"].isdigit())
    assert by_id[first_exact["url"]].starts_at == datetime.fromtimestamp(
        int(first_exact["Date_ms"]) / 1000, UTC
    )


@needs_shared_data
def test_tidy_open_house_events_all_become_drafts() -> None:
    venues = sorted((SHARED_DATA / "listings/open-house-london/data/2026").glob("*.json"))[:150]
    records, starts = [], []
    for path in venues:
        venue = json.loads(path.read_text(encoding="utf-8"))
        for index, event in enumerate(venue["events"]):
            records.append(
                {
                    "id": f"ohl-{venue['id']}-{index}",
                    "title": event["name"],
                    "description": venue["description"],
                    "venue": venue["name"],
                    "start": event["start"],
                    "end": event["end"],
                    "timezone": "Europe/London",
                    "url": event["booking_link"],
                }
            )
            starts.append(datetime.fromisoformat(event["start"]))
    assert len(records) > 100, "the sample should hold a few hundred events"

    result = parse_json(records)

    assert result.bad == []
    assert [draft.starts_at for draft in result.drafts] == starts
    assert_each_item_once(result, len(records))
