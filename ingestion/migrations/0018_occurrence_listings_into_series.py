"""Listings of one occurrence each become series (issue 33, item 5).

Before 0016 a calendar's recurring event was a listing per date, each with its own record
`UID/<its RECURRENCE-ID in UTC>`. Each such group (one source, one UID) becomes one
listing, as the calendar parser now makes it, losing nothing an editor or another source
gave:
- the listing kept is the group's first one still shown (the smallest id), else its first;
  the others' records of other sources (a feed item merged into one date) move to it, and
  so provenance stays; their titles unlike its own, and their aliases, become its aliases,
  as an editor's merge keeps them (ingestion/merging.py);
- its dates are the group's listings' own dates (an editor's correction of one included),
  except where the listing is withdrawn: by its source (the date was cancelled) or by an
  editor, whose withdrawn dates go into `withdrawn_dates`, so the calendar's next version
  never brings them back; a group without a date left is withdrawn, by an editor if one
  withdrew any of them;
- the kept listing's calendar record becomes the series' record, `UID`, with the dates,
  and an empty content hash, so the next poll updates it (and puts the rule in words);
  the group's other calendar records go with their listings.

The listings that go take their vectors with them (a cascade); the kept ones may change
text (aliases). So that the HNSW graph is built again without the dead rows, each
audience whose listings were folded gets a new index generation of its active one's model,
built in the background by the embedding sweep and activated when complete
(`activate_when_complete`); until then the active generation serves as before.
"""

import re
from collections import defaultdict
from datetime import timedelta
from typing import Any

from django.db import migrations
from psycopg.types.range import Range

from ingestion.generations import TEXT_PIPELINE_VERSION, hnsw_index_sql

_OCCURRENCE_ID = re.compile(r"^(?P<uid>.+)/(?P<stamp>[0-9]{8}(?:T[0-9]{6}Z)?)$")


_KEPT_FIELDS = (
    "aliases",
    "content_version",
    "occurrences",
    "withdrawn_dates",
    "starts_at",
    "ends_at",
    "status",
    "withdrawn_by_editor",
)


def _until(listing: Any) -> Any:
    if listing.ends_at is not None:
        return listing.ends_at
    return listing.starts_at + (timedelta(hours=24) if listing.all_day else timedelta(0))


def _fold(apps: Any, uid: str, records: list[Any]) -> str | None:
    """One group into one series; the audience it changed, or None when it could not."""
    listing_model = apps.get_model("ingestion", "Listing")
    record_model = apps.get_model("ingestion", "SourceRecord")
    source_id = records[0].source_id
    if record_model.objects.filter(source_id=source_id, external_id=uid).exists():
        return None  # the UID was once a one-off too: the next poll's record decides
    ids = {record.listing_id for record in records if record.listing_id is not None}
    listings = {
        listing.pk: listing
        for listing in listing_model.objects.select_for_update().filter(pk__in=ids).order_by("pk")
    }
    shown = [listing for listing in listings.values() if listing.status == "active"]
    keep = min(shown or listings.values(), key=lambda listing: listing.pk, default=None)
    dates, withdrawn_dates = [], []
    for record in records:
        listing = listings.get(record.listing_id)
        if listing is None or listing.starts_at is None:
            continue
        if listing.withdrawn_by_editor:
            withdrawn_dates.append(listing.starts_at)
        elif listing.status == "active" and not record.withdrawn:
            dates.append((listing.starts_at, _until(listing)))
    dates.sort()
    own = next((r for r in records if keep is not None and r.listing_id == keep.pk), records[0])
    if keep is not None:
        others = [listing for listing in listings.values() if listing.pk != keep.pk]
        record_model.objects.filter(listing_id__in=[o.pk for o in others]).exclude(
            pk__in=[r.pk for r in records]
        ).update(listing_id=keep.pk)
        names = set(keep.aliases)
        for other in others:
            names.update(other.aliases)
            if other.title != keep.title:
                names.add(other.title)
        if sorted(names) != sorted(keep.aliases):
            keep.aliases = sorted(names)
            keep.content_version += 1
        keep.occurrences = [Range(start, until, "[]") for start, until in dates]
        keep.withdrawn_dates = sorted(set(withdrawn_dates))
        if dates:
            keep.starts_at, keep.ends_at = dates[0][0], max(until for _, until in dates)
            keep.status = "active"
        else:
            keep.status = "withdrawn"
            keep.withdrawn_by_editor = bool(withdrawn_dates)
        # Not the whole row: a trigger has just given it the moved records' kinds.
        keep.save(update_fields=_KEPT_FIELDS)
        listing_model.objects.filter(pk__in=[o.pk for o in others]).delete()
    record_model.objects.filter(pk__in=[r.pk for r in records if r.pk != own.pk]).delete()
    own.external_id = uid
    own.content_hash = ""  # the next poll's draft differs: it updates the series
    own.withdrawn = not dates
    own.data = dict(own.data) | {
        "starts_at": dates[0][0].isoformat() if dates else own.data.get("starts_at"),
        "ends_at": max(until for _, until in dates).isoformat()
        if dates
        else own.data.get("ends_at"),
        "occurrences": [[start.isoformat(), until.isoformat()] for start, until in dates],
        "recurrence": "",
        "withdrawn": not dates,
    }
    own.save()
    return keep.audience if keep is not None else None


def _rebuild(apps: Any, schema_editor: Any, audience: str) -> None:
    generation_model = apps.get_model("ingestion", "IndexGeneration")
    active = generation_model.objects.filter(state="active", audience=audience).first()
    if active is None:
        return  # nothing serves yet: the first generation is built as ever
    generation = generation_model.objects.create(
        embedding_model=active.embedding_model,
        dimensions=active.dimensions,
        text_pipeline_version=TEXT_PIPELINE_VERSION,
        audience=audience,
        activate_when_complete=True,
    )
    schema_editor.execute(hnsw_index_sql(generation.pk, active.dimensions))


def into_series(apps: Any, schema_editor: Any) -> None:
    record_model = apps.get_model("ingestion", "SourceRecord")
    groups: dict[tuple[int, str], list[Any]] = defaultdict(list)
    calendar_records = record_model.objects.filter(source__kind="calendar").order_by("pk")
    for record in calendar_records.iterator():
        match = _OCCURRENCE_ID.match(record.external_id)
        if match:
            groups[(record.source_id, match["uid"])].append(record)
    changed = {_fold(apps, uid, records) for (_, uid), records in sorted(groups.items())}
    for audience in sorted(a for a in changed if a is not None):
        _rebuild(apps, schema_editor, audience)


class Migration(migrations.Migration):
    dependencies = [("ingestion", "0017_generation_activated_when_complete")]

    # Not reversible: a series' dates do not say which listing each once was.
    operations = [migrations.RunPython(into_series, migrations.RunPython.noop)]
