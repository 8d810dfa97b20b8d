"""The sweep's ingest stream: editorial records posted at a fixed rate to the running
system's /api/editorial/records as a source made for the run in the swept evaluation
set's own audience, so its listings are upserted by the API, embedded by the real workers
into that set's generation (moving the HNSW index the sweep searches, and standing among
its documents as unjudged distractors, as new listings do) and never reach a public
search; and removed again at the end, so repeated sweeps start equal."""

import asyncio
import contextlib
import json
import math
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import httpx
from django.db import transaction

from ingestion.api import MAX_RECORDS
from ingestion.models import Audience, Listing, Source, SourceRecord
from retrieval.pg import vocabulary

RECORDS_PATH: Final = "/api/editorial/records"
STREAM_SOURCE: Final = "evaluation: sweep stream"
STREAM_INTERVAL_S: Final = 0.5
_PROJECT = Path(__file__).resolve().parents[1]
STREAM_TEXTS: Final = (
    Path(os.environ.get("SHARED_DATA_DIR") or _PROJECT.parent / "shared" / "data")
    / "listings"
    / "open-house-london"
    / "data"
    / "2026"
)


@dataclass
class IngestFigures:
    rate_asked: float
    posted: int = 0  # records sent
    accepted: int = 0  # of which the API made or updated a listing
    failed_posts: int = 0  # requests without a 200
    seconds: float = 0.0
    embedded: int = 0  # stream listings with a vector by the end of the run

    @property
    def rate_achieved(self) -> float:
        return self.accepted / self.seconds if self.seconds else 0.0


class IngestStream:
    """Posts `rate` records a second in batches every STREAM_INTERVAL_S, as many as are
    due by the time elapsed (a slow post is caught up by the next)."""

    def __init__(
        self,
        client: httpx.AsyncClient,
        figures: IngestFigures,
        run_id: str,
        texts: Path,
    ) -> None:
        self.client, self.figures, self.run_id = client, figures, run_id
        self.texts = stream_texts(texts)

    async def run(self, stop: asyncio.Event) -> None:
        """Post until `stop` is set. A post under way then is finished, never cut off:
        the server would still commit it, after the run had removed the stream's
        listings, and leave those listings behind without a record (a first sweep left 48)."""
        started = time.monotonic()
        try:
            while not stop.is_set():
                elapsed = time.monotonic() - started
                due = math.floor(self.figures.rate_asked * elapsed) - self.figures.posted
                if due > 0:
                    await self._post(min(due, MAX_RECORDS))
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), STREAM_INTERVAL_S)
        finally:
            self.figures.seconds = time.monotonic() - started
            await self.client.aclose()

    async def _post(self, count: int) -> None:
        first = self.figures.posted
        records = []
        for number in range(first, first + count):
            title, description = self.texts[number % len(self.texts)]
            records.append(
                {"id": f"sweep-{self.run_id}-{number}", "title": title, "description": description}
            )
        self.figures.posted += count
        try:
            response = await self.client.post(RECORDS_PATH, json=records)
        except httpx.HTTPError:
            self.figures.failed_posts += 1
            return
        if response.status_code != 200:
            self.figures.failed_posts += 1
            return
        counts = response.json()["counts"]
        self.figures.accepted += counts["new"] + counts["updated"]


def stream_texts(directory: Path) -> Sequence[tuple[str, str]]:
    """(title, description) pairs: real venue listings (Open House London's venue files)
    when `directory` holds them, else generated ones."""
    texts = []
    for path in sorted(directory.glob("*.json")) if directory.is_dir() else ():
        venue = json.loads(path.read_text(encoding="utf-8"))
        if venue.get("name"):
            texts.append((venue["name"][:500], (venue.get("description") or "")[:10_000]))
    if texts:
        return texts
    return [
        (f"{kind} at {place}", f"A {kind.lower()} at {place}, open to everyone; {note}.")
        for kind in ("Guided tour", "Open day", "Talk", "Workshop", "Concert", "Exhibition")
        for place in ("the old town hall", "a riverside warehouse", "the botanical garden")
        for note in ("no booking needed", "booking required", "step-free access")
    ]


def fresh_stream_source(audience: str) -> Source:
    """The stream's source in `audience` (an evaluation set's), with nothing left of an
    earlier run that did not clean up."""
    if not Audience.is_evaluation(audience):
        raise ValueError("the ingest stream only ever goes to an evaluation audience")
    earlier = Source.objects.filter(name=STREAM_SOURCE).first()
    if earlier is not None:
        if not Audience.is_evaluation(earlier.audience):
            # Posting to it would publish the stream to every public search.
            raise ValueError(f"source {STREAM_SOURCE!r} exists and is not an evaluation source")
        remove_stream(earlier)
    return Source.objects.create(
        name=STREAM_SOURCE,
        kind=Source.Kind.EDITORIAL,
        audience=audience,
        url="",
        active=False,  # nothing to poll
    )


def remove_stream(source: Source) -> None:
    """Delete the stream's listings (their vectors with them) and its source (records,
    polls, tokens). A listing another source's record also reaches is kept, and so is one
    that was there before the stream, which a record of the stream only merged into (a
    bench database's listings are loaded without records: a burst merged into a few dozen
    of them a run, and removing it deleted them)."""
    elsewhere = (
        SourceRecord.objects.exclude(source=source)
        .filter(listing__isnull=False)  # NOT IN a list with a NULL matches nothing
        .values("listing_id")
    )
    ids = list(
        Listing.objects.filter(records__source=source, created_at__gte=source.created_at)
        .exclude(pk__in=elsewhere)
        .values_list("pk", flat=True)
    )
    # Withdrawn first, committed on its own: the embedding workers claim active listings
    # only, and a claim in progress holds its rows until its vectors are written, which
    # withdrawing then deletes (migrations/0003's trigger). Deleting them straight away
    # raced a worker writing a vector (a foreign-key violation at commit).
    Listing.objects.filter(pk__in=ids).update(status=Listing.Status.WITHDRAWN)
    with transaction.atomic():
        Listing.objects.filter(pk__in=ids).delete()
        source.delete()
    # The set's term statistics may have been refreshed while the stream's listings were
    # there: weigh its terms by its own documents again before anything else measures it.
    vocabulary.refresh()
