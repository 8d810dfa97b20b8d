"""Turning drafts into source records and canonical listings, idempotently, a batch at a
time.

Invariants: applying the same draft twice changes nothing the second time (its content
hash matches), so a redelivered or duplicated task produces the same rows; and a batch
lands exactly as its drafts would applied one at a time in order, in a fixed number of
statements however many drafts it holds (records read and locked, time slots locked,
duplicates looked up, listings locked, then each kind of write once).
"""

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, fields
from datetime import datetime
from enum import Enum, StrEnum

from ingestion import dedup
from ingestion.drafts import ListingDraft
from ingestion.models import Listing, Source, SourceRecord, occurrence
from ingestion.round_writes import Writes, write
from ingestion.text import EMBEDDED_FIELDS, draft_fields


class Outcome(StrEnum):
    NEW = "new"
    UPDATED = "updated"
    UNCHANGED = "unchanged"
    WITHDRAWN = "withdrawn"
    QUARANTINED = "quarantined"


@dataclass
class Counts:
    new: int = 0
    updated: int = 0
    unchanged: int = 0
    withdrawn: int = 0
    quarantined: int = 0

    def add(self, outcome: Outcome) -> None:
        setattr(self, outcome.value, getattr(self, outcome.value) + 1)

    @property
    def items(self) -> int:
        return sum(getattr(self, f.name) for f in fields(self))


@dataclass(frozen=True)
class Applied:
    outcome: Outcome
    listing_id: int | None  # the listing a new or updated draft made or changed


def content_hash(draft: ListingDraft) -> str:
    canonical = json.dumps(draft_fields(draft), sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


def apply_draft(source: Source, draft: ListingDraft, fetched_at: datetime) -> Outcome:
    """One draft; must run inside a transaction."""
    return apply_drafts(source, [draft], fetched_at)[0].outcome


def apply_drafts(
    source: Source, drafts: Sequence[ListingDraft], fetched_at: datetime
) -> list[Applied]:
    """Must run inside a transaction (the caller's batch); one result per draft, in order.
    A batch naming one external id twice is applied in rounds, a later occurrence in a
    later round, so it sees what the earlier one did."""
    applied: dict[int, Applied] = {}
    for positions in _rounds(drafts):
        batch = [drafts[n] for n in positions]
        applied |= zip(positions, _apply_round(source, batch, fetched_at), strict=True)
    return [applied[n] for n in range(len(drafts))]


def _rounds(drafts: Sequence[ListingDraft]) -> list[list[int]]:
    rounds: list[list[int]] = []
    seen: dict[str, int] = {}
    for n, draft in enumerate(drafts):
        occurrence = seen.get(draft.external_id, 0)
        seen[draft.external_id] = occurrence + 1
        if occurrence == len(rounds):
            rounds.append([])
        rounds[occurrence].append(n)
    return rounds


def _apply_round(
    source: Source, drafts: Sequence[ListingDraft], fetched_at: datetime
) -> list[Applied]:
    """`drafts` name distinct external ids."""
    digests = [content_hash(draft) for draft in drafts]
    records = {
        record.external_id: record
        for record in SourceRecord.objects.select_for_update()
        .filter(source=source, external_id__in=[draft.external_id for draft in drafts])
        .order_by("pk")
    }
    kinds = [
        _kind(records.get(draft.external_id), draft, digest)
        for draft, digest in zip(drafts, digests, strict=True)
    ]
    unlisted = [n for n, kind in enumerate(kinds) if kind is _Kind.UNLISTED]
    dedup.lock_slots([drafts[n] for n in unlisted])
    found = dedup.find_duplicates([drafts[n] for n in unlisted], source)
    duplicates = dict(zip(unlisted, found, strict=True))
    # Not an unchanged draft's listing: a re-poll must not wait on the embedding sweep,
    # which holds the listings it is embedding.
    changing = [
        records[draft.external_id].listing_id
        for draft, kind in zip(drafts, kinds, strict=True)
        if kind in (_Kind.LISTED, _Kind.WITHDRAWN) and draft.external_id in records
    ]
    listings = _lock_listings(
        {listing_id for listing_id in [*changing, *found] if listing_id is not None}
    )

    writes = Writes()
    results: list[tuple[Outcome, Listing | None]] = []
    for n, (draft, kind) in enumerate(zip(drafts, kinds, strict=True)):
        if kind is _Kind.UNCHANGED:
            results.append((Outcome.UNCHANGED, None))
            continue
        record = records.get(draft.external_id) or SourceRecord(
            source=source, external_id=draft.external_id
        )
        # A series' dates are its own record's to change (see _copy_draft).
        series_record = bool(draft.occurrences) or "occurrences" in (record.data or {})
        writes.record(record, draft, digests[n])
        if kind is _Kind.WITHDRAWN:
            # A record cancelled before we ever listed it is remembered all the same, so a
            # later poll is "unchanged".
            if record.listing_id is not None:
                writes.maybe_withdrawn.add(record.listing_id)
            results.append((Outcome.WITHDRAWN, None))
            continue
        if record.listing_id is not None:  # _Kind.LISTED
            listing, outcome = listings[record.listing_id], Outcome.UPDATED
        elif (duplicate := duplicates[n]) is not None:
            listing, outcome = listings[duplicate], Outcome.UPDATED
        else:
            # Its kinds as the records' trigger would set them (migration 0006): set here,
            # the trigger's update of each new listing finds nothing to change.
            listing = Listing(
                title=draft.title, audience=source.audience, source_kinds=[source.kind]
            )
            outcome = Outcome.NEW
        record.listing = listing
        copied = _copy_draft(listing, draft, fetched_at, source.kind, series_record)
        writes.listing(listing, copied)
        results.append((outcome, listing))
    write(writes)
    return [Applied(outcome, listing.pk if listing else None) for outcome, listing in results]


# Emptied by a series' own record when its rule is dropped: not "a field it lacks".
_SERIES_FIELDS = ("occurrences", "recurrence")


class _Kind(Enum):
    UNCHANGED = "its content hash matches its record's"
    WITHDRAWN = "withdrawn by its source"
    LISTED = "its record already has a listing"
    UNLISTED = "a listing to find or make"


def _kind(record: SourceRecord | None, draft: ListingDraft, digest: str) -> _Kind:
    if record is not None and record.content_hash == digest:
        return _Kind.UNCHANGED
    if draft.withdrawn:
        return _Kind.WITHDRAWN
    if record is not None and record.listing_id is not None:
        return _Kind.LISTED
    return _Kind.UNLISTED


def _lock_listings(ids: set[int]) -> dict[int, Listing]:
    """Locked in id order, in one statement, so two batches cannot deadlock on them."""
    if not ids:
        return {}
    locked = Listing.objects.select_for_update().filter(pk__in=ids).order_by("pk")
    return {listing.pk: listing for listing in locked}


def _copy_draft(
    listing: Listing, draft: ListingDraft, fetched_at: datetime, kind: str, series_record: bool
) -> bool:
    """Newest information wins, but a source that lacks a field (a feed without a venue)
    never blanks what another source provided. A series' dates are changed only by the
    record that is, or was, a series (a calendar's recurring event, whose rule may also
    be dropped): a one-off of another source merged into it, one of its dates, never
    narrows them, and the dates an editor withdrew stay out. True when the embedded text
    changed."""
    values: dict[str, object] = {
        "title": draft.title,
        "description": draft.description,
        "venue": draft.venue,
        "aliases": sorted(set(listing.aliases or []) | set(draft.aliases)),
        "starts_at": draft.starts_at,
        "ends_at": draft.ends_at,
        "timezone": draft.timezone,
        "all_day": draft.all_day,
        "url": draft.url,
    }
    every_date_withdrawn = False
    if series_record:
        withdrawn = set(listing.withdrawn_dates)
        kept = [(start, end) for start, end in draft.occurrences if start not in withdrawn]
        every_date_withdrawn = bool(draft.occurrences) and not kept
        values["occurrences"] = [occurrence(start, end) for start, end in kept]
        values["recurrence"] = draft.recurrence
        if kept:
            values["starts_at"], values["ends_at"] = kept[0][0], max(end for _, end in kept)
    elif listing.occurrences:
        for name in ("starts_at", "ends_at", "all_day"):
            del values[name]
    text_changed = False
    for name, value in values.items():
        if value in ("", None, []) and getattr(listing, name) and name not in _SERIES_FIELDS:
            continue
        if getattr(listing, name) != value:
            text_changed |= name in EMBEDDED_FIELDS
            setattr(listing, name, value)
    if every_date_withdrawn:  # by an editor, one at a time
        listing.status = Listing.Status.WITHDRAWN
    elif not listing.withdrawn_by_editor:  # a source never overrules an editor
        listing.status = Listing.Status.ACTIVE
    listing.fetched_at = fetched_at
    listing.fetched_kind = kind
    return text_changed
