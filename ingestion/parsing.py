"""One entry point from a source kind and its bytes to a ParseResult."""

from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from ingestion.drafts import ParseResult
from ingestion.models import Source
from ingestion.parsers.calendar import parse_calendar
from ingestion.parsers.editorial import parse_editorial
from ingestion.parsers.feed import parse_feed


def parse_payload(kind: str, payload: bytes, *, name_hint: str = "") -> ParseResult:
    """Raises PayloadError when the whole payload is rejected."""
    if kind == Source.Kind.FEED:
        return parse_feed(payload)
    if kind == Source.Kind.CALENDAR:
        now = timezone.now()
        return parse_calendar(
            payload,
            window_start=now - timedelta(days=settings.CALENDAR_WINDOW_PAST_DAYS),
            window_end=now + timedelta(days=settings.CALENDAR_WINDOW_FUTURE_DAYS),
            max_occurrences_per_event=settings.CALENDAR_MAX_OCCURRENCES_PER_EVENT,
        )
    if kind == Source.Kind.EDITORIAL:
        return parse_editorial(payload, filename_hint=name_hint)
    raise ValueError(f"unknown source kind {kind!r}")
