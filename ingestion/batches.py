"""Applying one parsed payload to the database as a single transaction.

A worker killed mid-batch rolls the whole batch back; the redelivered task applies it
again from the start, and content hashes make every item land exactly once.
"""

from datetime import datetime

from django.db import connection, transaction
from django.utils import timezone

from ingestion import metrics
from ingestion.drafts import BadItem, ParseResult, PayloadError
from ingestion.models import Poll, QuarantinedItem, Source
from ingestion.upsert import Counts, Outcome, apply_draft


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
    changed: list[str] = []  # external ids of records whose listing is new or updated
    with transaction.atomic():
        poll = Poll.objects.create(
            source=source, started_at=started_at, finished_at=started_at, status=Poll.Status.OK
        )
        for draft in result.drafts:
            outcome = apply_draft(source, draft, fetched_at)
            counts.add(outcome)
            if report is not None:
                report.append((draft.position, draft.external_id, outcome, ""))
            if outcome in (Outcome.NEW, Outcome.UPDATED):
                changed.append(draft.external_id)
        for bad in result.bad:
            quarantine(source, poll, bad)
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
        touched = _listing_ids(source, changed)
        transaction.on_commit(lambda: _after_commit(source.kind, touched, fetched_at, counts))
    return poll


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
        quarantine(source, poll, BadItem(None, None, error.reason, error.excerpt, error.permanent))
    metrics.record_outcomes(source.kind, Counts(quarantined=1))
    return poll


def quarantine(source: Source, poll: Poll | None, bad: BadItem) -> None:
    QuarantinedItem.objects.create(
        source=source,
        poll=poll,
        position=bad.position,
        external_id=bad.external_id or "",
        reason=bad.reason,
        permanent=bad.permanent,
        excerpt=bad.excerpt,
        raw=bad.raw,
    )


def _listing_ids(source: Source, external_ids: list[str]) -> set[int]:
    """One query for the whole batch, not one per changed item."""
    if not external_ids:
        return set()
    rows = source.records.filter(external_id__in=external_ids, listing__isnull=False)
    return set(rows.values_list("listing_id", flat=True))


def _finish(poll: Poll, counts: Counts) -> None:
    poll.finished_at = timezone.now()
    poll.items = counts.items
    for outcome in Outcome:
        setattr(poll, outcome, getattr(counts, outcome))
    poll.save()


def _after_commit(kind: str, touched: set[int], fetched_at: datetime, counts: Counts) -> None:
    """The listings are now visible to lexical search: record when, and how long after
    their fetch. (Queueing their embedding is the caller's job: services never import
    tasks.)"""
    metrics.record_outcomes(kind, counts)
    if not touched:
        return
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE ingestion_listing SET lexically_searchable_at = clock_timestamp() "
            "WHERE id = ANY(%s) RETURNING extract(epoch FROM clock_timestamp() - fetched_at)",
            [sorted(touched)],
        )
        for (lag_s,) in cursor.fetchall():
            metrics.LEXICAL_LAG.labels(kind=kind).observe(float(lag_s))
