"""Editors' corrections to de-duplication: merge two listings, split a wrong merge."""

from collections.abc import Iterable
from datetime import datetime

from django.db import transaction
from django.db.models import F

from ingestion.models import Listing, SourceRecord, occurrence

_FROM_RECORD = ("title", "description", "venue", "timezone", "url", "all_day")


@transaction.atomic
def merge(keep: Listing, other: Listing) -> Listing:
    """`other`'s records join `keep`; its title survives as an alias; `other` is deleted."""
    if keep.pk == other.pk:
        raise ValueError("cannot merge a listing with itself")
    SourceRecord.objects.filter(listing=other).update(listing=keep)
    keep.aliases = merged_aliases(keep, [other])
    keep.venue = keep.venue or other.venue
    keep.description = keep.description or other.description
    keep.content_version = F("content_version") + 1
    keep.save()
    other.delete()
    keep.refresh_from_db()
    return keep


def merged_aliases(keep: Listing, others: Iterable[Listing]) -> list[str]:
    """`keep`'s aliases once `others` are merged into it (what an editor is shown before a
    merge, and what the merge saves): all their aliases, and their titles unlike its own."""
    names = set(keep.aliases)
    for other in others:
        names.update(other.aliases)
        if other.title != keep.title:
            names.add(other.title)
    return sorted(names)


@transaction.atomic
def split(record: SourceRecord) -> Listing:
    """Give `record` a listing of its own again, and rebuild the one it leaves."""
    if record.listing_id is None:  # e.g. withdrawn before it was ever listed
        raise ValueError("this record has no listing; nothing to split")
    old = Listing.objects.select_for_update().get(pk=record.listing_id)
    if old.records.count() < 2:
        raise ValueError("this record is its listing's only record; nothing to split")
    new = Listing(title=record.data.get("title", old.title))
    _apply_record(new, record)
    new.fetched_at, new.fetched_kind = old.fetched_at, record.source.kind
    new.save()
    record.listing = new
    record.save(update_fields=["listing", "updated_at"])
    latest = old.records.order_by("-updated_at", "-pk").first()
    assert latest is not None
    _apply_record(old, latest)
    old.aliases = []
    old.content_version = F("content_version") + 1
    old.save()
    return new


def _apply_record(listing: Listing, record: SourceRecord) -> None:
    data = record.data
    for name in _FROM_RECORD:
        if name in data and data[name] is not None:
            setattr(listing, name, data[name])
    listing.aliases = list(data.get("aliases") or [])
    for name in ("starts_at", "ends_at"):
        value = data.get(name)
        setattr(listing, name, datetime.fromisoformat(value) if value else None)
    listing.occurrences = [
        occurrence(datetime.fromisoformat(start), datetime.fromisoformat(end))
        for start, end in data.get("occurrences") or []
    ]
    listing.recurrence = data.get("recurrence") or ""
    listing.status = Listing.Status.WITHDRAWN if record.withdrawn else Listing.Status.ACTIVE
