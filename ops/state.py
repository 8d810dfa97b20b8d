"""What the ops page reads from the shared state when it is loaded, not from the
roll-ups: it belongs to no process (the active generation, the quarantine, the embedding
backlog and the embedding sweep's pace, the vector breaker's shared state, the latest
recall guardrail), so every process would only repeat it."""

from dataclasses import dataclass

from django.db.models import Count, Exists, F, Min, OuterRef
from django.utils import timezone

from ingestion.generations import with_progress
from ingestion.models import Audience, IndexGeneration, Listing, ListingEmbedding, QuarantinedItem
from ingestion.pacing import Pace, reported_pace
from ops.guardrail import Guardrail, latest_guardrail
from resilience.breaker import State
from resilience.redis_clients import get_redis
from retrieval.service import vector_breaker


@dataclass(frozen=True)
class Generation:
    id: int
    model: str
    embedded: int
    listings: int

    @property
    def coverage(self) -> float | None:
        return self.embedded / self.listings if self.listings else None


@dataclass(frozen=True)
class Backlog:
    kind: str  # the source kind the listing was last fetched from ("" for none)
    listings: int  # active listings without a vector of their current text
    oldest_s: float | None  # how long ago the oldest of them had its current text written


@dataclass(frozen=True)
class Now:
    breaker: State
    generation: Generation | None
    backlog: list[Backlog]
    quarantine: dict[str, int]  # open items by source kind
    guardrail: Guardrail | None
    pace: Pace | None  # the embedding sweep's, while one runs


def read_now() -> Now:
    generation = _active_generation()
    return Now(
        breaker=vector_breaker().state(),
        generation=generation,
        backlog=_backlog(generation),
        quarantine=_quarantine(),
        guardrail=latest_guardrail(),
        pace=reported_pace(get_redis()),
    )


def _active_generation() -> Generation | None:
    active = IndexGeneration.objects.filter(
        state=IndexGeneration.State.ACTIVE, audience=Audience.PUBLIC
    )
    found = with_progress(active).first()
    if found is None:
        return None
    return Generation(found.pk, found.embedding_model, found.embedded, found.active_listings)


def _backlog(generation: Generation | None) -> list[Backlog]:
    """The vector lag now: per source kind, active public listings the active generation
    has no vector of their current text for, and the age of the oldest (since that text
    was written)."""
    if generation is None:
        return []
    embedded = ListingEmbedding.objects.filter(
        listing=OuterRef("pk"),
        generation_id=generation.id,
        content_version=OuterRef("content_version"),
    )
    rows = (
        Listing.objects.filter(status=Listing.Status.ACTIVE, audience=Audience.PUBLIC)
        .exclude(Exists(embedded))
        .values("fetched_kind")
        .annotate(listings=Count("pk"), oldest=Min(F("updated_at")))
        .order_by("fetched_kind")
    )
    now = timezone.now()
    return [
        Backlog(
            row["fetched_kind"],
            row["listings"],
            (now - row["oldest"]).total_seconds() if row["oldest"] else None,
        )
        for row in rows
    ]


def _quarantine() -> dict[str, int]:
    rows = (
        QuarantinedItem.objects.filter(resolved_at__isnull=True)
        .values("source__kind")
        .annotate(items=Count("pk"))
        .order_by("source__kind")
    )
    return {row["source__kind"]: row["items"] for row in rows}
