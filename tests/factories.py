"""Small builders for tests."""

from datetime import UTC, datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from ingestion.drafts import ListingDraft, ParseResult
from ingestion.models import Source
from ingestion.upsert import apply_draft

CONCERT_START = datetime(2027, 3, 14, 19, 30, tzinfo=UTC)


def source(name: str = "Publisher feed", kind: str = Source.Kind.FEED) -> Source:
    return Source.objects.create(name=name, kind=kind, url=f"/dev/null/{name}")


def draft(
    external_id: str = "item-1", title: str = "Nina Simone tribute", **fields: Any
) -> ListingDraft:
    values: dict[str, Any] = {
        "position": 0,
        "venue": "Blue Note",
        "starts_at": CONCERT_START,
        "description": "An evening of songs.",
    }
    values.update(fields)
    return ListingDraft(external_id=external_id, title=title, **values)


def assert_well_formed_calendar(result: ParseResult) -> None:
    """What every parsed calendar must be: unique ids, zone-aware times, reasons."""
    ids = [draft.external_id for draft in result.drafts]
    assert len(ids) == len(set(ids))
    assert all(draft.starts_at and draft.starts_at.tzinfo for draft in result.drafts)
    assert all(draft.ends_at and draft.ends_at.tzinfo for draft in result.drafts)
    assert all(bad.reason for bad in result.bad)


class FakeClock:
    """A clock a test moves by hand, so that nothing waits on real time."""

    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds

    def advance_ms(self, ms: float) -> None:
        self.advance(ms / 1000)


@transaction.atomic
def undated_listings(*titles: str) -> None:
    """One listing per title, undated and without a venue, from one feed."""
    feed = source()
    for number, title in enumerate(titles):
        apply_draft(
            feed, draft(f"id-{number}", title=title, venue="", starts_at=None), timezone.now()
        )
