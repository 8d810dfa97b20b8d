"""Listings for the browser tests and the screenshots: events over the coming fortnight
from a feed, a venue calendar and the editors, indexed and embedded with the real model,
so that the live app answers as it would in production."""

from datetime import UTC, datetime, timedelta

from django.db import transaction

from ingestion import generations
from ingestion.demo import DEMO_DIR
from ingestion.embedding import DIMENSIONS, MODEL_NAME
from ingestion.indexing import embed_pending_batch
from ingestion.models import Source
from ingestion.parsing import parse_payload
from ingestion.upsert import apply_draft, apply_drafts
from retrieval.pg import suggestions, vocabulary
from tests.factories import draft, source

DEMO_CALENDAR = DEMO_DIR / "venue-calendar.ics"
# (title, venue, description, days ahead, hour, minute, source)
EVENTS = [
    ("Jazz quartet at the riverside", "Riverside Hall",
     "Modern jazz standards and bebop by the water.", 3, 19, 30, "Time Out feed"),
    ("Late-night jazz jam", "The Cellar Bar",
     "Bring an instrument; the house band starts at eleven.", 5, 23, 0, "Time Out feed"),
    ("Big band swing night", "Barbican Hall",
     "A sixteen-piece orchestra plays Ellington and Basie.", 9, 20, 0, "Barbican calendar"),
    ("Blues guitar workshop", "The Cellar Bar",
     "Slide, bends and twelve-bar forms for improvers.", 12, 18, 0, "Time Out feed"),
    ("Piano trio: Schubert and Brahms", "Wigmore Hall",
     "Chamber music for a winter evening.", 8, 19, 30, "Barbican calendar"),
    ("Sourdough baking class", "Town Bakery",
     "Learn to bake bread with a natural starter.", 2, 10, 0, "Editorial desk"),
    ("Organ recital", "St Mary's Church",
     "Bach and Buxtehude on the restored organ.", 6, 13, 0, "Barbican calendar"),
    ("Children's science fair", "Town Hall",
     "Robots, volcanoes and a planetarium.", 4, 9, 30, "Editorial desk"),
]  # fmt: skip
SOURCE_KINDS = {
    "Time Out feed": Source.Kind.FEED,
    "Barbican calendar": Source.Kind.CALENDAR,
    "Editorial desk": Source.Kind.EDITORIAL,
}


def index_events(now: datetime | None = None, *, with_demo_calendar: bool = False) -> int:
    """The events, dated from `now`, indexed and embedded (with the demo's venue calendar
    too if asked); the active generation's id."""
    now = now or datetime.now(UTC)
    generation = generations.ensure_active_generation(MODEL_NAME, DIMENSIONS)
    with transaction.atomic():
        sources = {name: source(name, kind) for name, kind in SOURCE_KINDS.items()}
        for number, (title, venue, description, days, hour, minute, name) in enumerate(EVENTS):
            day = (now + timedelta(days=days)).replace(hour=hour, minute=minute, second=0)
            event = draft(
                f"event-{number}",
                title=title,
                venue=venue,
                description=description,
                starts_at=day,
                ends_at=day + timedelta(hours=2),
                timezone="Europe/London",
                url=f"https://example.org/events/{number}",
            )
            apply_draft(sources[name], event, now)
        if with_demo_calendar:  # `make run`'s: its weekly blues session is one series
            demo = source("Blue Note Riverside", Source.Kind.CALENDAR)
            apply_drafts(demo, parse_payload(demo.kind, DEMO_CALENDAR.read_bytes()).drafts, now)
    while embed_pending_batch():
        pass
    # As beat does: the texts suggested as a visitor types, and the words a typo meets.
    suggestions.refresh()
    vocabulary.refresh()
    return generation.pk
