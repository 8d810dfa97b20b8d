"""Demo data written for this project: a publisher feed, a venue calendar and editorial
records. The feed and the calendar both list the same concert, so a fresh install shows
de-duplication at work."""

from pathlib import Path

from ingestion import polling
from ingestion.models import Poll, Source

DEMO_DIR = Path(__file__).resolve().parent
DEMO_SOURCES = (
    ("Demo: Riverside Courier feed", Source.Kind.FEED, "publisher-feed.xml"),
    ("Demo: Blue Note Riverside calendar", Source.Kind.CALENDAR, "venue-calendar.ics"),
    ("Demo: help-center editorial", Source.Kind.EDITORIAL, "editorial.json"),
)


def load_demo_sources() -> list[Poll]:
    """Create the demo sources on first run and poll each once, through the real pipeline."""
    polls = []
    for name, kind, filename in DEMO_SOURCES:
        source, created = Source.objects.get_or_create(
            name=name, defaults={"kind": kind, "url": str(DEMO_DIR / filename)}
        )
        if created:
            polls.append(polling.poll_source(source.pk))
    return polls
