"""Polling one source: breaker, fetch, parse, apply, account.

Every poll leaves a `Poll` row whose counts add up to the items the payload held, and
every failure is classified as permanent or transient where editors can see it.
"""

import hashlib
import time
from collections.abc import Callable
from datetime import UTC, datetime

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from ingestion import metrics
from ingestion.batches import apply_parse_result, reject_payload
from ingestion.drafts import PayloadError
from ingestion.fetching import FetchError, FetchResult, fetch_url, read_local
from ingestion.models import Poll, Source
from ingestion.parsing import parse_payload
from resilience.breaker import BreakerState, admit, policy_from_settings, record

Clock = Callable[[], float]


def poll_source(source_id: int, *, force: bool = False, clock: Clock = time.time) -> Poll:
    started_at = timezone.now()
    allowed, source = _admit(source_id, clock())
    if not allowed:
        return _log_poll(source, started_at, Poll.Status.SKIPPED, "circuit breaker open")
    try:
        fetched = fetch_source(source)
    except FetchError as exc:
        _settle(source_id, clock(), failed=True, error=exc.reason, permanent=exc.permanent)
        return _log_poll(source, started_at, Poll.Status.FAILED, exc.reason)
    # A slow fetch still delivered: use it, but let it count against the breaker.
    _settle(source_id, clock(), failed=fetched.elapsed_s > settings.FETCH_SLOW_S)
    Source.objects.filter(pk=source_id).update(
        etag=fetched.etag, last_modified=fetched.last_modified
    )
    if fetched.not_modified or fetched.body is None:
        return _log_poll(source, started_at, Poll.Status.NOT_MODIFIED)
    digest = hashlib.sha256(fetched.body).hexdigest()
    if digest == source.payload_hash and not force:
        return _log_poll(source, started_at, Poll.Status.NOT_MODIFIED)
    poll = ingest_payload(source, fetched.body, started_at=started_at)
    if poll.status == Poll.Status.OK:
        Source.objects.filter(pk=source_id).update(payload_hash=digest)
    return poll


def ingest_payload(
    source: Source,
    payload: bytes,
    *,
    started_at: datetime,
    name_hint: str = "",
    snapshot: bool = True,
) -> Poll:
    """Parse and apply one payload; shared by polling, uploads and `manage.py ingest`."""
    try:
        result = parse_payload(source.kind, payload, name_hint=name_hint or source.url)
    except PayloadError as exc:
        poll = reject_payload(source, exc, started_at=started_at)
        metrics.POLLS.labels(kind=source.kind, status=poll.status).inc()
        return poll
    poll = apply_parse_result(
        source, result, fetched_at=started_at, started_at=started_at, snapshot=snapshot
    )
    metrics.POLLS.labels(kind=source.kind, status=poll.status).inc()
    return poll


def fetch_source(source: Source) -> FetchResult:
    if source.url.startswith(("http://", "https://")):
        return fetch_url(
            source.url,
            etag=source.etag,
            last_modified=source.last_modified,
            connect_timeout_s=settings.FETCH_CONNECT_TIMEOUT_S,
            read_timeout_s=settings.FETCH_READ_TIMEOUT_S,
            total_timeout_s=settings.FETCH_TOTAL_TIMEOUT_S,
            max_bytes=settings.FETCH_MAX_BYTES,
            allow_private=settings.FETCH_ALLOW_PRIVATE_ADDRESSES,
        )
    return read_local(source.url, max_bytes=settings.FETCH_MAX_BYTES)


def _admit(source_id: int, now: float) -> tuple[bool, Source]:
    with transaction.atomic():
        source = Source.objects.select_for_update().get(pk=source_id)
        before = _breaker(source)
        allowed, breaker = admit(before, policy_from_settings("SOURCE_BREAKER"), now)
        if breaker != before:  # closed, or open and cooling down: nothing to write
            _set_breaker(source, breaker)
            source.save(update_fields=["breaker_state", "breaker_opened_at", "breaker_window"])
    return allowed, source


def _settle(
    source_id: int, now: float, *, failed: bool, error: str = "", permanent: bool | None = None
) -> None:
    with transaction.atomic():
        source = Source.objects.select_for_update().get(pk=source_id)
        breaker = record(
            _breaker(source), policy_from_settings("SOURCE_BREAKER"), now, failed=failed
        )
        _set_breaker(source, breaker)
        if error:
            source.last_error = error
            source.last_error_permanent = permanent
            source.last_error_at = timezone.now()
        else:
            source.last_success_at = timezone.now()
        source.save()


def _breaker(source: Source) -> BreakerState:
    return BreakerState.from_json(
        {
            "state": source.breaker_state,
            "opened_at": source.breaker_opened_at.timestamp() if source.breaker_opened_at else None,
            **source.breaker_window,
        }
    )


def _set_breaker(source: Source, breaker: BreakerState) -> None:
    data = breaker.to_json()
    source.breaker_state = breaker.state
    source.breaker_opened_at = (
        datetime.fromtimestamp(breaker.opened_at, tz=UTC) if breaker.opened_at else None
    )
    source.breaker_window = {
        "probe_started_at": data["probe_started_at"],
        "outcomes": data["outcomes"],
    }


def _log_poll(source: Source, started_at: datetime, status: str, error: str = "") -> Poll:
    metrics.POLLS.labels(kind=source.kind, status=status).inc()
    return Poll.objects.create(
        source=source,
        started_at=started_at,
        finished_at=timezone.now(),
        status=status,
        error=error,
    )
