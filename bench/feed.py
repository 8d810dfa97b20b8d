"""A feed stream at a fixed rate, in a process of its own, for bench/load.py and
bench/soak.py: records parsed and upserted as a feed poll does (`ingest_payload`, a small
batch every 250 ms) into one source, and embedded by the stack's Celery worker. The
benches start it with `feed_stream`, which removes its listings again at the end, as
`remove_bench_sources` removes whatever the benches ingested.

    python bench/feed.py --source-id ID --rate 16 --seconds 300 [--skip 256]

Its own process, not a thread of the load generator: parsing and upserting hold the GIL,
and would delay the generator's sends (which it would then count as the server's latency).
It prints "ready" once it can keep time, stops after --seconds or on SIGTERM (finishing
the batch in hand), and prints one JSON line: records sent, seconds, achieved rate.
"""

import argparse
import itertools
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from html import escape
from pathlib import Path
from typing import TYPE_CHECKING

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import REPO, SHARED_DATA
from listings import records

if TYPE_CHECKING:
    from ingestion.models import Source

TICKS_PER_S = 4  # a steady stream, not one burst a second


FEED_SOURCE = "bench load feed"
STALL_SOURCE = "bench stall stream"  # bench/faults_warming.py's listings during a stall
# A burst's sources (`burst`): venue calendars and publisher feeds, as polls bring them.
BURST_SOURCES = {"calendar": "bench burst calendars", "feed": "bench burst feeds"}
# Events a venue calendar holds, items a feed carries: the shared corpora's larger ones.
CALENDAR_EVENTS = 250
FEED_ITEMS = 100


@dataclass
class FeedFigures:
    rate_asked: float
    sent: int = 0
    seconds: float = 0.0

    @property
    def rate(self) -> float:
        return self.sent / self.seconds if self.seconds else 0.0


def remove_bench_sources() -> None:
    """The sources the benches ingest into (the feed's, the stall's, bench/ingest.py's) and
    their listings, from this run or one that did not clean up: the bench database keeps
    exactly the listings it was built with."""
    from django.db import connection

    from evaluation.sweep_stream import remove_stream
    from ingestion.models import Source

    removed = False
    names = (FEED_SOURCE, STALL_SOURCE, *BURST_SOURCES.values())
    for source in Source.objects.filter(name__in=names) | (
        Source.objects.filter(name__startswith="bench one payload")
    ):
        remove_stream(source)
        removed = True
    if removed:
        # A soak's feed leaves tens of thousands of dead rows, in the HNSW index too: until
        # they are vacuumed, the next bench's searches read through them (after a 30-minute
        # soak every lexical stage timed out). VACUUM of the embeddings took 89 s then.
        with connection.cursor() as cursor:
            for table in ("ingestion_listing_embedding", "ingestion_listing"):
                cursor.execute(f"VACUUM (ANALYZE) {table}")


@contextmanager
def feed_stream(rate: float, seconds: float, skip: int) -> Iterator[FeedFigures]:
    """bench/feed.py running at `rate` for at most `seconds` while the block runs; its
    listings removed at the end. `skip`: records of bench/listings.py used elsewhere in the
    run (so the feed's titles are not the same events, which de-duplication would merge)."""
    from ingestion.models import Source

    remove_bench_sources()
    source = Source.objects.create(name=FEED_SOURCE, kind=Source.Kind.EDITORIAL, active=False)
    figures = FeedFigures(rate)
    argv = [sys.executable, str(REPO / "bench" / "feed.py"), f"--source-id={source.pk}",
            f"--rate={rate}", f"--seconds={seconds}", f"--skip={skip}"]  # fmt: skip
    feed = subprocess.Popen(argv, cwd=REPO, stdout=subprocess.PIPE, env=dict(os.environ))
    try:
        assert feed.stdout is not None  # a pipe: asked for above
        if feed.stdout.readline().strip() != b"ready":  # b"": it exited first
            raise SystemExit("the feed stream did not start")
        yield figures
    finally:
        feed.send_signal(signal.SIGTERM)  # it finishes the batch in hand, then reports
        out, _ = feed.communicate(timeout=60)
        remove_bench_sources()
        if feed.returncode != 0:
            raise SystemExit(f"the feed stream exited with {feed.returncode}")
        report = json.loads(out.decode().strip().splitlines()[-1])
        figures.sent, figures.seconds = report["sent"], report["seconds"]


def deliver(source: "Source", batch: list[dict[str, object]], name_hint: str) -> None:
    """One feed poll's worth: `batch` parsed and upserted as a poll does, then the
    embedding sweep asked for, as the poll task does."""
    poll(source, json.dumps(batch).encode(), name_hint, snapshot=False)


def poll(source: "Source", payload: bytes, name_hint: str, *, snapshot: bool = True) -> None:
    """`payload` applied as a poll of `source` applies it, then the embedding sweep asked
    for, as the poll task does."""
    from django.utils import timezone

    from ingestion.polling import ingest_payload
    from ingestion.tasks import schedule_embedding

    ingest_payload(
        source, payload, started_at=timezone.now(), name_hint=name_hint, snapshot=snapshot
    )
    schedule_embedding()


def stream(source_id: int, rate: float, seconds: float, skip: int, stop: threading.Event) -> int:
    """Records `skip` onwards of bench/listings.py's, `rate` a second; returns how many."""
    from ingestion.models import Source

    source = Source.objects.get(pk=source_id)
    data_dir = SHARED_DATA if SHARED_DATA.exists() else None
    pool = records(skip + int(rate * seconds) + TICKS_PER_S, data_dir)[skip:]
    print("ready", flush=True)  # the parent starts its load once the stream can keep time
    started, sent, tick = time.monotonic(), 0, 0
    while not stop.is_set() and (tick := tick + 1) <= seconds * TICKS_PER_S:
        # As many as are due by now: a slow batch is caught up by the next.
        due = min(len(pool), int(rate * (time.monotonic() - started))) - sent
        if due > 0:
            deliver(source, pool[sent : sent + due], "feed.json")
            sent += due
        stop.wait(max(0.0, started + tick / TICKS_PER_S - time.monotonic()))
    return sent


def burst_sources() -> dict[str, "Source"]:
    """The burst's sources (one per kind), none of an earlier run's left."""
    from ingestion.models import Source

    remove_bench_sources()
    return {
        kind: Source.objects.create(name=name, kind=kind, active=False)
        for kind, name in BURST_SOURCES.items()
    }


def start_burst(
    sources: dict[str, "Source"], count: int, skip: int, workers: int = 1
) -> list["subprocess.Popen[bytes]"]:
    """`count` listings arriving now, half as venue calendars and half as publisher feeds,
    each payload parsed and applied as its poll would be, as fast as they go, by `workers`
    processes (bench/feed.py --burst --part), as the ingest worker's processes take polls
    due together. `skip`: records of bench/listings.py used before."""
    argv = [sys.executable, str(REPO / "bench" / "feed.py"), f"--burst={count}",
            f"--calendar-source-id={sources['calendar'].pk}",
            f"--feed-source-id={sources['feed'].pk}", f"--skip={skip}"]  # fmt: skip
    return [
        subprocess.Popen([*argv, f"--part={part}/{workers}"], cwd=REPO, env=dict(os.environ))
        for part in range(workers)
    ]


def finish_burst(processes: list["subprocess.Popen[bytes]"]) -> None:
    """Waits for the burst's last payload."""
    for process in processes:
        process.wait(timeout=600)
    if any(process.returncode != 0 for process in processes):
        raise SystemExit(f"a burst's process exited with {[p.returncode for p in processes]}")


@contextmanager
def burst(count: int, skip: int, workers: int = 1) -> Iterator[list[int]]:
    """`start_burst` while the block runs. Yields the burst's source ids; waits for the
    last payload at the end, then removes the burst's listings."""
    sources = burst_sources()
    processes = start_burst(sources, count, skip, workers)
    try:
        yield [source.pk for source in sources.values()]
    finally:
        try:
            finish_burst(processes)
        finally:
            remove_bench_sources()


def _calendar(events: list[dict[str, object]], first: int, starts: datetime) -> bytes:
    """A venue calendar: a VEVENT per record, a week apart in turn across eight weeks."""
    lines = ["BEGIN:VCALENDAR", "VERSION:2.0", "PRODID:-//searchsite bench//EN"]
    for number, event in enumerate(events, start=first):
        start = starts + timedelta(days=number % 56, hours=number % 5)
        lines += [
            "BEGIN:VEVENT",
            f"UID:{event['id']}@bench.invalid",
            f"DTSTAMP:{starts:%Y%m%dT%H%M%SZ}",
            f"DTSTART:{start:%Y%m%dT%H%M%SZ}",
            f"DTEND:{start + timedelta(hours=2):%Y%m%dT%H%M%SZ}",
            f"SUMMARY:{_ics_text(str(event['title']))}",
            f"LOCATION:{_ics_text(str(event['venue']))}",
            f"DESCRIPTION:{_ics_text(str(event['description']))}",
            "END:VEVENT",
        ]
    return "\r\n".join([*lines, "END:VCALENDAR", ""]).encode()


def _ics_text(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace(";", "\\;").replace(",", "\\,")
    return escaped.replace("\n", "\\n")


def _rss(items: list[dict[str, object]], first: int, starts: datetime) -> bytes:
    """A publisher's RSS feed, each item an event (the ev: extension's dates and place)."""
    out = [
        '<?xml version="1.0" encoding="utf-8"?>',
        '<rss version="2.0" xmlns:ev="http://purl.org/rss/1.0/modules/event/"><channel>',
        "<title>Bench listings</title><link>https://bench.invalid/</link>",
    ]
    for number, item in enumerate(items, start=first):
        start = starts + timedelta(days=number % 56, hours=number % 5)
        out.append(
            f"<item><title>{escape(str(item['title']))}</title>"
            f"<link>https://bench.invalid/{item['id']}</link><guid>{item['id']}</guid>"
            f"<description>{escape(str(item['description']))}</description>"
            f"<ev:startdate>{start.isoformat()}</ev:startdate>"
            f"<ev:enddate>{(start + timedelta(hours=2)).isoformat()}</ev:enddate>"
            f"<ev:location>{escape(str(item['venue']))}</ev:location></item>"
        )
    return "".join([*out, "</channel></rss>"]).encode()


def deliver_burst(
    calendar_id: int, feed_id: int, count: int, skip: int, part: tuple[int, int] = (0, 1)
) -> None:
    """The burst's payloads, in arrival order; of them, every `part[1]`-th from the
    `part[0]`-th."""
    from django.utils import timezone

    from ingestion.models import Source

    data_dir = SHARED_DATA if SHARED_DATA.exists() else None
    pool = records(skip + count, data_dir)[skip:]
    starts = timezone.now().replace(minute=0, second=0, microsecond=0) + timedelta(days=1)
    half = count // 2
    calendars = [
        (
            calendar_id,
            "venue.ics",
            _calendar(pool[at : min(at + CALENDAR_EVENTS, half)], at, starts),
        )
        for at in range(0, half, CALENDAR_EVENTS)
    ]
    feeds = [
        (feed_id, "feed.xml", _rss(pool[at : min(at + FEED_ITEMS, count)], at, starts))
        for at in range(half, count, FEED_ITEMS)
    ]
    # Calendars and feeds interleaved, as their polls come due.
    payloads = [p for pair in itertools.zip_longest(calendars, feeds) for p in pair if p]
    sources = {pk: Source.objects.get(pk=pk) for pk in (calendar_id, feed_id)}
    at, every = part
    for source_id, hint, payload in payloads[at::every]:
        poll(sources[source_id], payload, hint)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source-id", type=int)
    parser.add_argument("--rate", type=float, help="records per second")
    parser.add_argument("--seconds", type=float)
    parser.add_argument("--skip", type=int, default=0, help="records of listings.py to skip")
    parser.add_argument("--burst", type=int, default=0, help="listings at once, not a stream")
    parser.add_argument("--calendar-source-id", type=int)
    parser.add_argument("--feed-source-id", type=int)
    parser.add_argument("--part", default="0/1", help="K/N: a burst's every N-th payload from K")
    args = parser.parse_args()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    sys.path.insert(0, str(REPO))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "searchsite.settings")
    import django

    django.setup()  # DATABASE_URL and REDIS_URL come from the parent's environment
    if args.burst:
        at, every = (int(n) for n in args.part.split("/"))
        deliver_burst(
            args.calendar_source_id, args.feed_source_id, args.burst, args.skip, (at, every)
        )
        return
    started = time.monotonic()
    sent = stream(args.source_id, args.rate, args.seconds, args.skip, stop)
    seconds = time.monotonic() - started
    print(json.dumps({"sent": sent, "seconds": round(seconds, 2), "rate": sent / seconds}))


if __name__ == "__main__":
    main()
