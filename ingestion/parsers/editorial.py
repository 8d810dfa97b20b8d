"""Editorial records: listings typed in by editors, uploaded as a JSON list or a CSV table.

Each record is checked field by field and every problem goes into one reason, so an editor
fixes a record in one pass. Unknown fields are rejected rather than ignored: a misspelt
column ("titel", "strat") would otherwise drop data without anyone noticing.
"""

import csv
import io
import json
import reprlib
from collections.abc import Callable
from datetime import UTC, date, datetime, timezone
from typing import TypeVar
from urllib.parse import urlsplit
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from ingestion.drafts import BadItem, ListingDraft, ParseResult, PayloadError, PayloadIds

FIELDS = (
    "id",
    "title",
    "description",
    "venue",
    "aliases",
    "start",
    "end",
    "timezone",
    "url",
    "withdrawn",
)
REQUIRED_FIELDS = ("id", "title")
MAX_ID_CHARS = 200
MAX_TITLE_CHARS = 500
MAX_DESCRIPTION_CHARS = 10_000
MAX_VENUE_CHARS = 300
MAX_ALIAS_CHARS = 300
MAX_ALIASES = 20
MAX_URL_CHARS = 2_000
CSV_ALIAS_SEPARATOR = "|"
# A bad record this long keeps only its excerpt: too big to correct in the admin.
MAX_RAW_CHARS = 64 * 1024
_CSV_BOOLEANS = {"true": True, "yes": True, "1": True, "false": False, "no": False, "0": False}

T = TypeVar("T")


class _FieldError(ValueError):
    """One field's problem, worded for editors; the field name is added by `_check`."""


def validate_record(record: object, position: int) -> ListingDraft | BadItem:
    """Turn one editorial record (a JSON object) into a draft, or say everything wrong with it."""
    if not isinstance(record, dict):
        return _bad(record, position, None, f"record: expected an object, got {_json_type(record)}")
    # JSON null counts as absent, so exports that write every column as null still load.
    fields = {key: value for key, value in record.items() if value is not None}
    errors: list[str] = []
    if unknown := sorted(repr(key) for key in fields if key not in FIELDS):
        errors.append(f"unknown fields: {', '.join(unknown)}")
    external_id = _check(errors, "id", _identifier, fields.get("id"))
    title = _check(errors, "title", _required_text(MAX_TITLE_CHARS), fields.get("title"))
    description = _check(
        errors, "description", _optional_text(MAX_DESCRIPTION_CHARS), fields.get("description")
    )
    venue = _check(errors, "venue", _optional_text(MAX_VENUE_CHARS), fields.get("venue"))
    aliases = _check(errors, "aliases", _aliases, fields.get("aliases"))
    zone = _check(errors, "timezone", _zone, fields.get("timezone"))
    url = _check(errors, "url", _http_url, fields.get("url"))
    withdrawn = _check(errors, "withdrawn", _boolean, fields.get("withdrawn"))
    starts_at, ends_at = _schedule(errors, fields, zone)
    if errors or external_id is None or title is None:  # the last two only narrow the types
        return _bad(record, position, external_id, "; ".join(errors))
    return ListingDraft(
        external_id=external_id,
        title=title,
        position=position,
        description=description or "",
        venue=venue or "",
        aliases=aliases or (),
        starts_at=starts_at,
        ends_at=ends_at,
        timezone=zone.key if zone else "",
        url=url or "",
        withdrawn=bool(withdrawn),
    )


def _schedule(
    errors: list[str], fields: dict[object, object], zone: ZoneInfo | None
) -> tuple[datetime | None, datetime | None]:
    """Start and end as aware datetimes; a naive one takes the record's timezone."""
    starts_at = _check(errors, "start", _datetime, fields.get("start"))
    ends_at = _check(errors, "end", _datetime, fields.get("end"))
    if "timezone" in fields and zone is None:
        return None, None  # the invalid timezone's own error says enough
    starts_at = _check(errors, "start", _aware(zone), starts_at)
    ends_at = _check(errors, "end", _aware(zone), ends_at)
    if ends_at is not None and "start" not in fields:
        errors.append("end: given without start")
    if starts_at is not None and ends_at is not None and ends_at < starts_at:
        errors.append("end: before start")
    return starts_at, ends_at


def parse_editorial(
    payload: bytes, *, filename_hint: str = "", max_items: int = 10_000
) -> ParseResult:
    """Parse a JSON list of records or a CSV table with a header row of field names."""
    try:
        text = payload.decode("utf-8-sig")  # strips a byte-order mark if there is one
    except UnicodeDecodeError as exc:
        excerpt = payload[:200].decode("utf-8", "backslashreplace")
        raise PayloadError(f"not valid UTF-8 (byte {exc.start})", excerpt=excerpt) from exc
    hint = filename_hint.lower().split("?", 1)[0].split("#", 1)[0]
    if hint.endswith(".json"):
        records = _json_records(text, max_items)
    elif hint.endswith(".csv") or not text.lstrip().startswith(("[", "{")):
        records = _csv_records(text, max_items)
    else:
        records = _json_records(text, max_items)
    result, ids = ParseResult(), PayloadIds()
    for position, record in enumerate(records):
        outcome = record if isinstance(record, BadItem) else validate_record(record, position)
        if reason := ids.duplicate(outcome.external_id, position):
            outcome = _bad(record, position, outcome.external_id, reason)
        result.add(outcome)
    return result


def _json_records(text: str, max_items: int) -> list[object]:
    try:
        data = json.loads(text, parse_constant=_reject_constant)
    except ValueError as exc:  # also integers too long to convert
        raise PayloadError(f"not valid JSON: {exc}", excerpt=text) from exc
    except RecursionError as exc:
        raise PayloadError("JSON nested too deeply", excerpt=text) from exc
    if not isinstance(data, list):
        raise PayloadError(f"expected a JSON list of records, got {_json_type(data)}", excerpt=text)
    if len(data) > max_items:
        raise PayloadError(f"more than {max_items} records", excerpt=text)
    return data


def _csv_records(text: str, max_items: int) -> list[object]:
    """Rows as records (empty cells absent), or a BadItem for a row of the wrong width."""
    rows = csv.reader(io.StringIO(text, newline=""))
    try:
        header = [name.strip() for name in next(rows)]
        _check_header(header)
        records: list[object] = []
        for row in rows:
            if not row:
                continue  # a blank line is not a record
            if len(records) == max_items:
                raise PayloadError(f"more than {max_items} records", excerpt=text)
            records.append(_csv_record(header, row, position=len(records)))
    except StopIteration as exc:
        raise PayloadError("CSV has no header row") from exc
    except csv.Error as exc:
        raise PayloadError(f"not valid CSV at line {rows.line_num}: {exc}", excerpt=text) from exc
    return records


def _check_header(header: list[str]) -> None:
    # A header problem would fail every row the same way, so it rejects the whole payload.
    problems = []
    if unknown := [repr(name) for name in header if name not in FIELDS]:
        problems.append(f"unknown columns: {', '.join(unknown)}")
    if missing := [name for name in REQUIRED_FIELDS if name not in header]:
        problems.append(f"missing columns: {', '.join(missing)}")
    if repeated := sorted({name for name in header if header.count(name) > 1}):
        problems.append(f"repeated columns: {', '.join(repeated)}")
    if problems:
        raise PayloadError(f"CSV header: {'; '.join(problems)}", excerpt=",".join(header))


def _csv_record(header: list[str], row: list[str], position: int) -> dict[str, object] | BadItem:
    if len(row) != len(header):
        reason = f"row has {len(row)} cells, header has {len(header)}"
        return BadItem(position, None, reason, excerpt=",".join(row))
    record: dict[str, object] = {}
    for name, cell in zip(header, row, strict=True):
        if not cell.strip():
            continue
        if name == "aliases":
            record[name] = [alias for alias in cell.split(CSV_ALIAS_SEPARATOR) if alias.strip()]
        elif name == "withdrawn":
            # An unrecognised word stays a string, so validation names it as the problem.
            record[name] = _CSV_BOOLEANS.get(cell.strip().lower(), cell)
        else:
            record[name] = cell
    return record


def _check(errors: list[str], name: str, check: Callable[[object], T], raw: object) -> T | None:
    try:
        return check(raw)
    except _FieldError as exc:
        errors.append(f"{name}: {exc}")
        return None


def _text(raw: object, limit: int) -> str:
    if not isinstance(raw, str):
        raise _FieldError(f"must be a string, got {_json_type(raw)}")
    value = raw.strip()
    if len(value) > limit:
        raise _FieldError(f"longer than {limit} characters")
    # Postgres text cannot hold NUL, and an unpaired surrogate cannot be encoded as UTF-8:
    # either would fail the whole batch at insert time, far from its cause.
    if "\x00" in value:
        raise _FieldError("contains a NUL character")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise _FieldError("contains an unpaired surrogate") from exc
    return value


def _required_text(limit: int) -> Callable[[object], str]:
    def check(raw: object) -> str:
        if raw is None or (value := _text(raw, limit)) == "":
            raise _FieldError("required")
        return value

    return check


def _optional_text(limit: int) -> Callable[[object], str]:
    return lambda raw: "" if raw is None else _text(raw, limit)


def _identifier(raw: object) -> str:
    # bool is an int subclass, but `true` as an id is a mistake, not the id "True".
    if isinstance(raw, int) and not isinstance(raw, bool):
        if raw.bit_length() > 1_000:  # str() refuses huge ints; this one is too long anyway
            raise _FieldError(f"longer than {MAX_ID_CHARS} characters")
        raw = str(raw)
    elif raw is not None and not isinstance(raw, str):
        raise _FieldError(f"must be a string or an integer, got {_json_type(raw)}")
    return _required_text(MAX_ID_CHARS)(raw)


def _aliases(raw: object) -> tuple[str, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise _FieldError(f"must be a list of strings, got {_json_type(raw)}")
    if len(raw) > MAX_ALIASES:
        raise _FieldError(f"more than {MAX_ALIASES} aliases")
    aliases, problems = [], []
    for index, item in enumerate(raw):
        try:
            aliases.append(_required_text(MAX_ALIAS_CHARS)(item))
        except _FieldError as exc:
            problems.append(f"item {index} {exc}")
    if problems:
        raise _FieldError(", ".join(problems))
    return tuple(aliases)


def _zone(raw: object) -> ZoneInfo | None:
    if raw is None:
        return None
    name = _text(raw, 100)
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError) as exc:
        raise _FieldError(f"unknown IANA time zone {name!r}") from exc


def _datetime(raw: object) -> datetime | None:
    if raw is None:
        return None
    value = _text(raw, 100)
    try:
        date.fromisoformat(value)
    except ValueError:
        pass
    else:  # fromisoformat would read a bare date as midnight, which editors rarely mean
        raise _FieldError("a date without a time of day")
    try:
        return datetime.fromisoformat(value)
    except ValueError as exc:
        raise _FieldError("not an ISO-8601 datetime") from exc


def _aware(zone: ZoneInfo | None) -> Callable[[object], datetime | None]:
    """Make a naive datetime aware in `zone`, refusing local times a clock change skips."""

    def check(raw: object) -> datetime | None:
        if not isinstance(raw, datetime):
            return None
        if raw.tzinfo is None and zone is None:
            raise _FieldError("no UTC offset, so timezone is required")
        # An ambiguous local time (clocks going back) takes its first occurrence (fold=0).
        aware = raw if raw.tzinfo is not None else raw.replace(tzinfo=zone)
        try:  # the database stores UTC, which must exist too (not so for 9999-12-31T23:00-05:00)
            in_utc = aware.astimezone(UTC)
            round_trip = in_utc.astimezone(aware.tzinfo)
        except OverflowError as exc:
            raise _FieldError("out of range") from exc
        if round_trip.replace(tzinfo=None) != raw.replace(tzinfo=None):
            raise _FieldError(f"does not exist in {zone} (skipped by a clock change)")
        if raw.tzinfo is not None:
            return raw
        # A fixed offset rather than the zone itself: Python finds a time in a zone's repeated
        # hour unequal to every time in other zones, so comparing it with the stored UTC value
        # would always say "changed".
        return raw.replace(tzinfo=timezone(raw - in_utc.replace(tzinfo=None)))

    return check


def _http_url(raw: object) -> str:
    if raw is None:
        return ""
    value = _text(raw, MAX_URL_CHARS)
    try:
        parts = urlsplit(value)
    except ValueError as exc:
        raise _FieldError("not a valid URL") from exc
    if parts.scheme.lower() not in ("http", "https"):
        raise _FieldError("must be http(s)")
    if not parts.hostname:
        raise _FieldError("has no host")
    if any(char.isspace() for char in value):
        raise _FieldError("contains whitespace")
    return value


def _boolean(raw: object) -> bool:
    if raw is None:
        return False
    if not isinstance(raw, bool):
        raise _FieldError(f"must be true or false, got {_json_type(raw)}")
    return raw


def _reject_constant(name: str) -> object:
    raise ValueError(f"{name} is not allowed in JSON")


def _json_type(value: object) -> str:
    names = {dict: "object", list: "list", str: "string", bool: "boolean", type(None): "null"}
    if isinstance(value, int | float) and not isinstance(value, bool):
        return "number"
    return names.get(type(value), type(value).__name__)


def _bad(record: object, position: int, external_id: str | None, reason: str) -> BadItem:
    """A BadItem carrying the record as JSON, so an editor can correct it and retry it."""
    text = _as_json(record)
    raw = text if text is not None and len(text) <= MAX_RAW_CHARS else ""
    excerpt = reprlib.repr(record) if text is None else text
    return BadItem(position, external_id, reason, excerpt=excerpt, raw=raw)


def _as_json(record: object) -> str | None:
    """JSON that Postgres can store: NUL comes out escaped, unpaired surrogates as \\u escapes."""
    try:
        text = json.dumps(record, ensure_ascii=False)
        text.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(record)
    except (TypeError, ValueError, RecursionError):  # not JSON-shaped, or nested too deeply
        return None
    return text
