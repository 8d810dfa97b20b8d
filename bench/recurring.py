"""What recurring events cost the index: the shared recurring-calendar corpus
(`../shared/data/calendars/recurring-ical-events-calendars`, 95 calendars of recurrence
edge cases and real venue calendars) polled into a fresh database through the real
ingestion path, then embedded with the real model until nothing is pending. Prints the
listings made, the texts the model was asked to embed, and the vectors stored in the
active generation (the HNSW index's rows).

    .venv/bin/python bench/recurring.py

The calendars are expanded in the window the parser uses from now on, so the counts move
with the date a run is made; compare runs made side by side."""

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import SHARED_DATA, running

CORPUS = SHARED_DATA / "calendars/recurring-ical-events-calendars/recurring_ical_events"


class Counted:
    """The embedder, counting the texts it is asked to embed."""

    def __init__(self, embedder: Any) -> None:
        self.embedder = embedder
        self.texts = 0

    def embed_documents(self, texts: list[str], **options: Any) -> Any:
        self.texts += len(texts)
        return self.embedder.embed_documents(texts, **options)


def main() -> None:
    if not CORPUS.exists():
        sys.exit(f"{CORPUS} is missing: this bench needs ../shared beside the checkout")
    with running():
        from ingestion import generations, indexing
        from ingestion.embedding import DIMENSIONS, MODEL_NAME, get_embedder
        from ingestion.models import Listing, ListingEmbedding, Source
        from ingestion.polling import poll_source

        generation = generations.ensure_active_generation(MODEL_NAME, DIMENSIONS)
        calendars = sorted(CORPUS.rglob("*.ics"))
        for number, path in enumerate(calendars):
            source = Source.objects.create(
                name=f"calendar {number}", kind=Source.Kind.CALENDAR, url=str(path)
            )
            poll_source(source.pk)
        counted = Counted(get_embedder())
        # The sweep's own embedder, counted: set where the sweep looks it up.
        setattr(indexing, "get_embedder", lambda: counted)  # noqa: B010
        while indexing.embed_pending_batch():
            pass
        listings = Listing.objects.filter(status=Listing.Status.ACTIVE).count()
        rows = ListingEmbedding.objects.filter(generation=generation).count()
        print(f"{len(calendars)} calendars: {listings} listings")
        print(f"texts embedded by the model: {counted.texts}")
        print(f"vectors in the active generation (HNSW rows): {rows}")


if __name__ == "__main__":
    main()
