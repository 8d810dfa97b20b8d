"""What a round of drafts changes (`Writes`), kept until the round's end and written then
in a fixed number of statements, one per kind of write, however many drafts the round
held (ingestion/upsert.py)."""

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from django.db import connection
from django.db.backends.utils import CursorWrapper
from django.db.models.expressions import DatabaseDefault
from django.utils import timezone
from psycopg.types.range import Range

from ingestion.drafts import ListingDraft
from ingestion.models import Listing, SourceRecord
from ingestion.text import draft_fields


@dataclass
class Writes:
    """What a round changes, written once per kind at the end."""

    new_listings: list[Listing] = field(default_factory=list)
    changed_listings: dict[int, Listing] = field(default_factory=dict)
    bumped: set[int] = field(default_factory=set)  # listings whose embedded text changed
    new_records: list[SourceRecord] = field(default_factory=list)
    changed_records: list[SourceRecord] = field(default_factory=list)
    maybe_withdrawn: set[int] = field(default_factory=set)

    def record(self, record: SourceRecord, draft: ListingDraft, digest: str) -> None:
        record.content_hash = digest
        record.data = draft_fields(draft)
        record.withdrawn = draft.withdrawn
        (self.changed_records if record.pk else self.new_records).append(record)

    def listing(self, listing: Listing, text_changed: bool) -> None:
        if listing.pk is None:
            self.new_listings.append(listing)
            return
        self.changed_listings[listing.pk] = listing
        if text_changed:
            self.bumped.add(listing.pk)


# Each statement takes its rows as one jsonb array (jsonb_to_recordset): one round trip
# for a batch, whatever its size, where Django's bulk_update would build a CASE per column
# with a branch per row. `_row` sends the columns each names in its record definition.
# Invariant (ingestion/versions.py): the version is bumped in the UPDATE that saves the new
# text, so from the commit on every vector of the listing is older than the listing.
_UPDATE_LISTINGS = """
    UPDATE ingestion_listing t
    SET title = d.title, description = d.description, venue = d.venue, aliases = d.aliases,
        starts_at = d.starts_at, ends_at = d.ends_at, timezone = d.timezone,
        all_day = d.all_day, occurrences = d.occurrences, recurrence = d.recurrence,
        url = d.url, status = d.status, fetched_at = d.fetched_at,
        fetched_kind = d.fetched_kind, updated_at = %(now)s,
        content_version = t.content_version + d.bump::int
    FROM jsonb_to_recordset(%(rows)s::jsonb) AS d(
        id bigint, title text, description text, venue text, aliases text[],
        starts_at timestamptz, ends_at timestamptz, timezone text, all_day boolean,
        occurrences tstzrange[], recurrence text, url text, status text,
        fetched_at timestamptz, fetched_kind text, bump boolean)
    WHERE t.id = d.id
"""
# New listings the same way, in the drafts' order: `n` gives each its place, so that the
# ids come back to the right instances (Django's bulk_create sent a placeholder per
# column and row, 5,000 for a calendar of 250 events, which psycopg parsed client-side:
# 0.13 s of a one-second payload).
_INSERT_LISTINGS = """
    INSERT INTO ingestion_listing (
        title, description, venue, aliases, starts_at, ends_at, timezone, all_day,
        occurrences, recurrence, url, status, fetched_at, fetched_kind, audience,
        source_kinds, withdrawn_dates, withdrawn_by_editor, content_version, created_at,
        updated_at)
    SELECT d.title, d.description, d.venue, d.aliases, d.starts_at, d.ends_at, d.timezone,
           d.all_day, coalesce(d.occurrences, '{}'), coalesce(d.recurrence, ''), d.url,
           d.status, d.fetched_at,
           d.fetched_kind, d.audience, d.source_kinds, '{}', false, 1, %(now)s, %(now)s
    FROM jsonb_to_recordset(%(rows)s::jsonb) AS d(
        n int, title text, description text, venue text, aliases text[],
        starts_at timestamptz, ends_at timestamptz, timezone text, all_day boolean,
        occurrences tstzrange[], recurrence text, url text, status text,
        fetched_at timestamptz, fetched_kind text, audience text, source_kinds text[])
    ORDER BY d.n
    RETURNING id
"""
_LISTING_COLUMNS = (
    "title",
    "description",
    "venue",
    "aliases",
    "starts_at",
    "ends_at",
    "timezone",
    "all_day",
    "occurrences",
    "recurrence",
    "url",
    "status",
    "fetched_at",
    "fetched_kind",
)
_UPDATE_RECORDS = """
    UPDATE ingestion_sourcerecord t
    SET content_hash = d.content_hash, data = d.data, withdrawn = d.withdrawn,
        listing_id = d.listing_id, updated_at = %(now)s
    FROM jsonb_to_recordset(%(rows)s::jsonb) AS d(
        id bigint, content_hash text, data jsonb, withdrawn boolean, listing_id bigint)
    WHERE t.id = d.id
"""
_RECORD_COLUMNS = ("content_hash", "data", "withdrawn", "listing_id")
# New records the same way (Django's bulk_create sent each column as an array that psycopg
# quoted client-side: a tenth of a burst's application in this process).
_INSERT_RECORDS = """
    INSERT INTO ingestion_sourcerecord (
        source_id, external_id, content_hash, data, withdrawn, listing_id, first_seen_at,
        updated_at)
    SELECT d.source_id, d.external_id, d.content_hash, d.data, d.withdrawn, d.listing_id,
           %(now)s, %(now)s
    FROM jsonb_to_recordset(%(rows)s::jsonb) AS d(
        n int, source_id bigint, external_id text, content_hash text, data jsonb,
        withdrawn boolean, listing_id bigint)
    ORDER BY d.n
    RETURNING id
"""
# Withdrawn once no source lists it any more.
_WITHDRAW_UNLISTED = """
    UPDATE ingestion_listing l SET status = 'withdrawn', updated_at = %(now)s
    WHERE l.id = ANY(%(ids)s) AND l.status <> 'withdrawn'
      AND NOT EXISTS (SELECT 1 FROM ingestion_sourcerecord r
                      WHERE r.listing_id = l.id AND NOT r.withdrawn)
"""


def write(writes: Writes) -> None:
    now = timezone.now()
    with connection.cursor() as cursor:
        if writes.new_listings:
            _insert(cursor, writes.new_listings, now)
        if writes.changed_listings:
            rows = [
                _row(listing, _LISTING_COLUMNS) | {"bump": pk in writes.bumped}
                for pk, listing in writes.changed_listings.items()
            ]
            cursor.execute(_UPDATE_LISTINGS, {"rows": json.dumps(rows), "now": now})
        _link(writes.new_records + writes.changed_records)
        if writes.new_records:
            _insert_records(cursor, writes.new_records, now)
        if writes.changed_records:
            rows = [_row(record, _RECORD_COLUMNS) for record in writes.changed_records]
            cursor.execute(_UPDATE_RECORDS, {"rows": json.dumps(rows), "now": now})
        if writes.maybe_withdrawn:
            cursor.execute(_WITHDRAW_UNLISTED, {"ids": sorted(writes.maybe_withdrawn), "now": now})


def _insert(cursor: CursorWrapper, listings: list[Listing], now: datetime) -> None:
    _inserted(
        cursor, _INSERT_LISTINGS, listings, (*_LISTING_COLUMNS, "audience", "source_kinds"), now
    )
    for listing in listings:
        listing.created_at = listing.updated_at = now
        listing.content_version = 1


def _insert_records(cursor: CursorWrapper, records: list[SourceRecord], now: datetime) -> None:
    _inserted(cursor, _INSERT_RECORDS, records, ("source_id", "external_id", *_RECORD_COLUMNS), now)
    for record in records:
        record.first_seen_at = record.updated_at = now


def _inserted(
    cursor: CursorWrapper,
    statement: str,
    instances: Sequence[Listing | SourceRecord],
    columns: tuple[str, ...],
    now: datetime,
) -> None:
    """`statement` run on `instances` as rows numbered `n` in their order; each is given the
    id its row came back with, and is saved from then on."""
    rows = [_row(instance, columns) | {"n": n} for n, instance in enumerate(instances)]
    cursor.execute(statement, {"rows": json.dumps(rows), "now": now})
    for instance, (pk,) in zip(instances, cursor.fetchall(), strict=True):
        instance.pk = pk
        instance._state.adding = False


def _link(records: list[SourceRecord]) -> None:
    """A record given a listing before the listing was inserted holds no id for it yet
    (Django copies the id when the listing is assigned): a record cancelled before it was
    ever listed and then restored would otherwise keep pointing at nothing."""
    for record in records:
        if record.listing_id is None and record.listing is not None:
            record.listing_id = record.listing.pk


def _row(instance: Listing | SourceRecord, columns: tuple[str, ...]) -> dict[str, object]:
    row: dict[str, object] = {"id": instance.pk}
    for name in columns:
        row[name] = _json(getattr(instance, name))
    return row


def _json(value: object) -> object:
    if isinstance(value, DatabaseDefault):  # a one-off's series fields: the INSERT's default
        return None
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, list) and value and isinstance(value[0], Range):
        # A series' occurrences, as tstzrange's text input.
        return [
            f"{r.bounds[0]}{r.lower.isoformat()},{r.upper.isoformat()}{r.bounds[1]}" for r in value
        ]
    return value
