"""Applying one parsed payload to the database as a single transaction.

A worker killed mid-batch rolls the whole batch back; the redelivered task applies it
again from the start, and content hashes make every item land exactly once.
"""

from collections.abc import Sequence
from datetime import datetime

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from ingestion import metrics
from ingestion.drafts import BadItem, ListingDraft, ParseResult, PayloadError
from ingestion.models import Poll, QuarantinedItem, Source
from ingestion.pacing import payload_pacer
from ingestion.planner_statistics import analyse_if_outgrown
from ingestion.upsert import Applied, Counts, Outcome, apply_drafts


def apply_parse_result(
    source: Source,
    result: ParseResult,
    *,
    fetched_at: datetime,
    started_at: datetime,
    snapshot: bool = True,
    report: list[tuple[int, str, Outcome, str]] | None = None,
) -> Poll:
    """`snapshot`: the payload is the source's whole current state (a feed, a calendar, an
    editorial file), so quarantine entries of earlier polls are superseded by this one's.
    `report`, when given, receives (position, external id, outcome, reason) per item."""
    counts = Counts()
    with transaction.atomic():
        poll = Poll.objects.create(
            source=source, started_at=started_at, finished_at=started_at, status=Poll.Status.OK
        )
        applied = _paced(source, result.drafts, fetched_at)
        for draft, item in zip(result.drafts, applied, strict=True):
            counts.add(item.outcome)
            if report is not None:
                report.append((draft.position, draft.external_id, item.outcome, ""))
        quarantine(source, poll, result.bad)
        for bad in result.bad:
            counts.add(Outcome.QUARANTINED)
            if report is not None:
                report.append(
                    (bad.position or 0, bad.external_id or "", Outcome.QUARANTINED, bad.reason)
                )
        _finish(poll, counts)
        if snapshot:
            source.quarantine.filter(resolved_at=None).exclude(poll=poll).update(
                resolved_at=poll.finished_at
            )
        # The listings that are new or changed: lexically searchable from the commit on.
        touched = {item.listing_id for item in applied if item.listing_id is not None}
        transaction.on_commit(lambda: _after_commit(source.kind, touched, fetched_at, counts))
    return poll


def _paced(source: Source, drafts: Sequence[ListingDraft], fetched_at: datetime) -> list[Applied]:
    """`apply_drafts` in chunks, each when the searches' pressure lets it (a large payload
    applied at once held a core and the listings' indexes through a burst's first seconds:
    503s at the door, most searches falling back). One transaction still: a later chunk
    sees what an earlier one wrote, as a later round does."""
    pacer = payload_pacer()
    step = settings.INGEST_PACE_CHUNK
    applied: list[Applied] = []
    for start in range(0, len(drafts), step):
        part = drafts[start : start + step]
        with pacer.slice(len(part)):
            applied += apply_drafts(source, part, fetched_at)
    return applied


def reject_payload(source: Source, error: PayloadError, *, started_at: datetime) -> Poll:
    """A whole payload that cannot be parsed counts as one quarantined item."""
    with transaction.atomic():
        poll = Poll.objects.create(
            source=source,
            started_at=started_at,
            finished_at=timezone.now(),
            status=Poll.Status.REJECTED,
            items=1,
            quarantined=1,
            error=error.reason,
        )
        quarantine(
            source, poll, [BadItem(None, None, error.reason, error.excerpt, error.permanent)]
        )
    metrics.record_outcomes(source.kind, Counts(quarantined=1))
    return poll


def quarantine(source: Source, poll: Poll | None, bad: Sequence[BadItem]) -> None:
    """One statement for all of a batch's bad items."""
    QuarantinedItem.objects.bulk_create(
        QuarantinedItem(
            source=source,
            poll=poll,
            position=item.position,
            external_id=item.external_id or "",
            reason=item.reason,
            permanent=item.permanent,
            excerpt=item.excerpt,
            raw=item.raw,
        )
        for item in bad
    )


def _finish(poll: Poll, counts: Counts) -> None:
    poll.finished_at = timezone.now()
    poll.items = counts.items
    for outcome in Outcome:
        setattr(poll, outcome, getattr(counts, outcome))
    poll.save()


def _after_commit(kind: str, touched: set[int], fetched_at: datetime, counts: Counts) -> None:
    """The listings are now visible to lexical search: how long after their fetch. (Queueing
    their embedding is the caller's job: services never import tasks.) Observed here, not
    stored on each listing: writing every new listing again after the commit, a second
    version of each row and its index entries, was a sixth of a burst's application."""
    metrics.record_outcomes(kind, counts)
    if not touched:
        return
    if counts.new:
        analyse_if_outgrown(counts.new)
    lag_s = (timezone.now() - fetched_at).total_seconds()
    lexical_lag = metrics.LEXICAL_LAG.labels(kind=kind)
    for _ in touched:  # one observation per listing, as the lag objective counts listings
        lexical_lag.observe(lag_s)
