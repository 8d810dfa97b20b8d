"""Turning drafts into source records and canonical listings, idempotently.

Invariant: applying the same draft twice changes nothing the second time (its content
hash matches), so a redelivered or duplicated task produces the same rows.
"""

import hashlib
import json
from dataclasses import dataclass, fields
from datetime import datetime
from enum import StrEnum

from ingestion import dedup
from ingestion.drafts import ListingDraft
from ingestion.models import Listing, Source, SourceRecord
from ingestion.text import EMBEDDED_FIELDS, draft_fields
from ingestion.versions import save_listing


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


def content_hash(draft: ListingDraft) -> str:
    canonical = json.dumps(draft_fields(draft), sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


def apply_draft(source: Source, draft: ListingDraft, fetched_at: datetime) -> Outcome:
    """Must run inside a transaction (the caller's batch)."""
    digest = content_hash(draft)
    record = (
        SourceRecord.objects.select_for_update()
        .filter(source=source, external_id=draft.external_id)
        .first()
    )
    if record is not None and record.content_hash == digest:
        return Outcome.UNCHANGED
    if draft.withdrawn:
        return _withdraw(source, record, draft, digest)
    if record is not None and record.listing_id is not None:
        listing = Listing.objects.select_for_update().get(pk=record.listing_id)
        _copy_draft(listing, draft, fetched_at, source.kind)
        _save_record(record, draft, digest, listing)
        return Outcome.UPDATED
    dedup.lock_time_slot(draft)
    duplicate = dedup.find_duplicate(draft, source)
    outcome = Outcome.UPDATED if duplicate is not None else Outcome.NEW
    listing = duplicate or Listing(title=draft.title, audience=source.audience)
    _copy_draft(listing, draft, fetched_at, source.kind)
    if record is None:
        record = SourceRecord(source=source, external_id=draft.external_id)
    _save_record(record, draft, digest, listing)
    return outcome


def _withdraw(
    source: Source, record: SourceRecord | None, draft: ListingDraft, digest: str
) -> Outcome:
    if record is None:
        # Cancelled before we ever listed it: remember it, so a later poll is "unchanged".
        record = SourceRecord(source=source, external_id=draft.external_id)
    listing = record.listing
    _save_record(record, draft, digest, listing)
    if listing is not None:
        still_listed = listing.records.filter(withdrawn=False).exists()
        if not still_listed and listing.status != Listing.Status.WITHDRAWN:
            listing.status = Listing.Status.WITHDRAWN
            listing.save(update_fields=["status", "updated_at"])
    return Outcome.WITHDRAWN


def _copy_draft(listing: Listing, draft: ListingDraft, fetched_at: datetime, kind: str) -> None:
    """Newest information wins, but a source that lacks a field (a feed without a venue)
    never blanks what another source provided."""
    values = {
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
    text_changed = listing.pk is None
    for name, value in values.items():
        if value in ("", None, []) and getattr(listing, name):
            continue
        if getattr(listing, name) != value:
            text_changed |= name in EMBEDDED_FIELDS
            setattr(listing, name, value)
    listing.status = Listing.Status.ACTIVE
    listing.fetched_at = fetched_at
    listing.fetched_kind = kind
    save_listing(listing, text_changed=text_changed)


def _save_record(
    record: SourceRecord, draft: ListingDraft, digest: str, listing: Listing | None
) -> None:
    record.content_hash = digest
    record.data = draft_fields(draft)
    record.withdrawn = draft.withdrawn
    record.listing = listing
    record.save()
