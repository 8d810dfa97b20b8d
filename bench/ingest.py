"""Ingestion benchmark: end-to-end listings/s against raw embedding throughput in the same
run, then fetch-to-searchable lag while new listings stream in during searches.

    .venv/bin/python bench/ingest.py [--listings 1024] [--rounds 3] [--payloads 8]
                                        [--rate 20] [--seconds 60]

End to end is the workers' pipeline: `--payloads` editorial files polled one after
another in this process, as the ingestion worker polls its sources, while a real embedding
worker (a Celery process, as `make run` starts it) embeds what each poll committed; from
the first poll's start to the last vector's commit. Raw embedding is the same texts
embedded in this process in one call, just before and just after (their mean). Identical
raw runs minutes apart differ by up to a fifth on this shared machine, in CPU seconds as
well as in time, so the comparison is made `--rounds` times, each round with new
listings between its own two raw runs, and the median round is the figure.

Each round also gives the CPU seconds each process group spent (this process, the
embedding worker, Postgres): on cores the model keeps busy, the ratio can reach at most
the raw run's CPU seconds over the pipeline's, because the polls and the vector index's
inserts need cores too; "CPU bound" prints that ceiling.

The one-payload figure (poll it all, then embed it all in this process) is printed
beside it: that is alternation by construction, as a payload is one transaction.

Targets: end-to-end >= 0.9 x raw embedding (issue 12); lexical lag p95 <= 2 s; vector lag
p95 <= 30 s at 20 new listings/s (issue 3).
"""

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
from feed import deliver
from harness import REPO, SHARED_DATA, percentile, running
from listings import records

sys.path.insert(0, str(REPO))  # stack's loopback guard is the sweep's (evaluation/)
from stack import Groups, cpu_seconds, cpu_used, postgres_postmaster

if TYPE_CHECKING:
    from django.db.models import QuerySet

    from ingestion.models import ListingEmbedding


@dataclass(frozen=True)
class Round:
    raw_before: float  # listings/s
    raw_after: float
    raw_cpu_s: float  # the mean of the two raw runs'
    e2e: float
    polls_s: float
    pipeline_cpu_s: dict[str, float]  # by process group

    @property
    def raw(self) -> float:
        return (self.raw_before + self.raw_after) / 2

    @property
    def ratio(self) -> float:
        return self.e2e / self.raw

    @property
    def cpu_bound(self) -> float:
        return self.raw_cpu_s / sum(self.pipeline_cpu_s.values())


def raw_embedding_rate(texts: list[str]) -> tuple[float, float]:
    """(listings/s, CPU seconds) of embedding `texts` in this process in one call."""
    from ingestion.embedding import get_embedder

    embedder = get_embedder()
    embedder.embed_documents(texts[:64])  # warm-up: sessions, allocator
    started, cpu = time.perf_counter(), time.process_time()  # of all the model's threads
    embedder.embed_documents(texts)
    return len(texts) / (time.perf_counter() - started), time.process_time() - cpu


def measured_round(
    batch: list[dict[str, object]], payloads: int, groups: Groups, number: int
) -> Round:
    """Raw embedding of the batch's texts, the pipeline on the batch, raw again."""
    from ingestion.text import embedding_text

    texts = [
        embedding_text(str(r["title"]), str(r["venue"]), [], str(r["description"])) for r in batch
    ]
    raw_before, cpu_before = raw_embedding_rate(texts)
    cpu_started = cpu_seconds(groups)
    e2e, polls_s, polls_cpu_s = pipeline_rate(batch, payloads, f"bench pipeline {number}")
    used = cpu_used(cpu_started, cpu_seconds(groups)) | {"polls": polls_cpu_s}
    raw_after, cpu_after = raw_embedding_rate(texts)
    return Round(raw_before, raw_after, (cpu_before + cpu_after) / 2, e2e, polls_s, used)


def _editorial_sources(name: str, batch: list[dict[str, object]], payloads: int) -> list[int]:
    from ingestion.models import Source

    folder = Path(tempfile.mkdtemp())
    size = -(-len(batch) // payloads)
    ids = []
    for number in range(payloads):
        path = folder / f"records-{number}.json"
        path.write_text(json.dumps(batch[number * size : (number + 1) * size]))
        ids.append(
            Source.objects.create(name=f"{name} {number}", kind="editorial", url=str(path)).pk
        )
    return ids


def pipeline_rate(
    batch: list[dict[str, object]], payloads: int, name: str
) -> tuple[float, float, float]:
    """(listings/s from the first poll's start to the last vector's commit, seconds the
    polls took, CPU seconds they took in this process), with the embedding worker
    already warm."""
    from django.utils import timezone

    from ingestion.models import Listing
    from ingestion.polling import poll_source
    from ingestion.tasks import schedule_embedding

    sources = _editorial_sources(name, batch, payloads)
    started_at, started, cpu = timezone.now(), time.perf_counter(), time.process_time()
    for source_id in sources:
        assert poll_source(source_id).status == "ok"
        schedule_embedding()  # what the poll task does after a poll that changed listings
    polled, polls_cpu = time.perf_counter() - started, time.process_time() - cpu
    # Items of two payloads that are one event are one listing, embedded once.
    listings = Listing.objects.filter(records__source_id__in=sources).distinct().count()
    _wait_for_vectors(sources, listings, timeout_s=600)
    seconds = (_last_embedded_at(sources) - started_at).total_seconds()
    return len(batch) / seconds, polled, polls_cpu


def one_payload_rate(batch: list[dict[str, object]]) -> tuple[float, float, float]:
    """One payload polled whole, then embedded in this process: (listings/s, ingest s,
    embed s)."""
    from ingestion.indexing import embed_pending
    from ingestion.polling import poll_source

    (source_id,) = _editorial_sources("bench one payload", batch, 1)
    started = time.perf_counter()
    poll = poll_source(source_id)
    assert poll.new + poll.updated == len(batch), poll.__dict__
    ingested = time.perf_counter()
    embed_pending(until=float("inf"))
    done = time.perf_counter()
    return len(batch) / (done - started), ingested - started, done - ingested


def _embedding_worker() -> subprocess.Popen[bytes]:
    from searchsite.supervisor import worker_argv

    return subprocess.Popen(
        worker_argv("embedding", 1, "bench-embed@%h", "WARNING"),
        cwd=REPO,
        env=dict(os.environ),
        start_new_session=True,
    )


def _warm(worker: subprocess.Popen[bytes]) -> None:
    """The worker's first task loads the model; wait for it, so no figure includes that."""
    from django.utils import timezone

    from ingestion.models import Source
    from ingestion.polling import ingest_payload
    from ingestion.tasks import schedule_embedding

    source = Source.objects.create(name="bench warm-up", kind="editorial")
    records = [{"id": "warm-up", "title": "Warm-up recital", "description": "Organ."}]
    ingest_payload(source, json.dumps(records).encode(), started_at=timezone.now())
    schedule_embedding()
    _wait_for_vectors([source.pk], 1, timeout_s=300)
    assert worker.poll() is None


def _searcher(stop: threading.Event, counter: list[int]) -> None:
    """Full-text searches alongside ingestion, as the site serves them while it ingests."""
    from django.db import connection

    terms = ["church", "garden tour", "architecture", "museum", "tower", "family"]
    with connection.cursor() as cursor:
        while not stop.is_set():
            cursor.execute(
                "SELECT id FROM ingestion_listing WHERE search_vector @@"
                " websearch_to_tsquery('english', %s) LIMIT 10",
                [terms[counter[0] % len(terms)]],
            )
            cursor.fetchall()
            counter[0] += 1
    connection.close()


def stream_lag(rate: int, seconds: float, pool: list[dict[str, object]]) -> dict[str, object]:

    from ingestion.models import Source

    source = Source.objects.create(name="bench stream", kind="editorial")
    stop, searches = threading.Event(), [0]
    searcher = threading.Thread(target=_searcher, args=(stop, searches))
    searcher.start()
    ticks_per_s = 4  # a small batch every 250 ms: a steady stream, not one burst a second
    per_tick = max(1, rate // ticks_per_s)
    started, sent = time.monotonic(), 0
    lexical: list[float] = []
    try:
        for tick in range(int(seconds * ticks_per_s)):
            time.sleep(max(0.0, started + tick / ticks_per_s - time.monotonic()))
            batch = pool[sent : sent + per_tick]
            sent += len(batch)
            fetched = time.monotonic()  # the poll's fetch time is taken as it starts
            deliver(source, batch, "stream.json")
            # Returned, the batch has committed: its listings are lexically searchable.
            lexical += [time.monotonic() - fetched] * len(batch)
        stop.set()
        searcher.join()
        _wait_for_vectors([source.pk], sent, timeout_s=300)
    finally:
        stop.set()
    vector = _vector_lags(source.pk)
    return {
        "sent": sent,
        "searches": searches[0],
        "lexical_p50": statistics.median(lexical),
        "lexical_p95": percentile(lexical, 0.95),
        "vector_p50": statistics.median(vector),
        "vector_p95": percentile(vector, 0.95),
    }


def _embedded(source_ids: list[int]) -> "QuerySet[ListingEmbedding]":
    from ingestion.models import ListingEmbedding

    return ListingEmbedding.objects.filter(
        listing__records__source_id__in=source_ids, generation__state="active"
    )


def _wait_for_vectors(source_ids: list[int], expected: int, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        done = _embedded(source_ids).count()
        if done >= expected:
            return
        time.sleep(0.05)
    raise SystemExit(f"only {done}/{expected} listings were embedded within {timeout_s}s")


def _last_embedded_at(source_ids: list[int]) -> datetime:
    from django.db.models import Max

    last: datetime | None = _embedded(source_ids).aggregate(last=Max("embedded_at"))["last"]
    assert last is not None
    return last


def _vector_lags(source_id: int) -> list[float]:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT extract(epoch FROM e.embedded_at - l.fetched_at)"
            " FROM ingestion_listing l"
            " JOIN ingestion_sourcerecord r ON r.listing_id = l.id AND r.source_id = %s"
            " JOIN ingestion_listing_embedding e ON e.listing_id = l.id"
            " JOIN ingestion_indexgeneration g ON g.id = e.generation_id AND g.state = 'active'",
            [source_id],
        )
        return [float(row[0]) for row in cursor.fetchall()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--listings", type=int, default=1024, help="per round")
    parser.add_argument("--rounds", type=int, default=3, help="of raw, pipeline, raw")
    parser.add_argument("--payloads", type=int, default=8, help="polled one after another")
    parser.add_argument("--rate", type=int, default=20, help="new listings per second")
    parser.add_argument("--seconds", type=float, default=60.0)
    args = parser.parse_args()
    with running():
        from ingestion import generations
        from ingestion.embedding import DIMENSIONS, MODEL_NAME
        from ingestion.models import Listing
        from retrieval.pg import vocabulary
        from retrieval.pg.pool import conninfo

        generations.ensure_active_generation(MODEL_NAME, DIMENSIONS)
        data_dir = SHARED_DATA if SHARED_DATA.exists() else None
        size = args.listings
        count = (args.rounds + 1) * size + int(args.rate * args.seconds) + 64
        pool = records(count, data_dir)
        single = pool[args.rounds * size : (args.rounds + 1) * size]
        stream = pool[(args.rounds + 1) * size :]
        print(f"texts: {'Open House London (shared data)' if data_dir else 'generated'}")
        worker = _embedding_worker()
        try:
            _warm(worker)
            # Not this process: the worker and the embedded services are its children.
            groups = {
                "worker": [psutil.Process(worker.pid)],
                "postgres": [postgres_postmaster(conninfo())],
            }
            done = []
            for number in range(args.rounds):
                done.append(
                    measured_round(
                        pool[number * size : (number + 1) * size], args.payloads, groups, number
                    )
                )
                _print_round(number + 1, done[-1], args.payloads)
            print(
                f"{'ratio e2e / raw':<28}{statistics.median(r.ratio for r in done):8.2f}"
                f"   (median of {args.rounds} rounds; target >= 0.90)",
                flush=True,
            )
            # The lexical stage's statistics (retrieval/pg/vocabulary.py), as beat refreshes
            # them every five minutes: their upkeep beside the writes' own.
            started = time.perf_counter()
            vocabulary.refresh()
            print(
                f"{'statistics refreshed in':<28}{time.perf_counter() - started:8.2f} s"
                f"   ({Listing.objects.count()} listings)",
                flush=True,
            )
            one, ingest_s, embed_s = one_payload_rate(single)
            raw = statistics.mean(r.raw for r in done)  # of other texts: a guide only
            print(
                f"{'one payload, then embed':<28}{one:8.1f} listings/s  (ingest {ingest_s:.2f} s, "
                f"embed {embed_s:.2f} s; {one / raw:.2f} of the rounds' mean raw)",
                flush=True,
            )
            lag = stream_lag(args.rate, args.seconds, stream)
        finally:
            os.killpg(worker.pid, signal.SIGTERM)
            worker.wait(60)
        print(
            f"stream: {lag['sent']} listings at {args.rate}/s over {args.seconds:.0f} s, "
            f"{lag['searches']} lexical searches alongside"
        )
        print(
            f"{'lexical lag p50 / p95':<28}{lag['lexical_p50']:8.3f} / {lag['lexical_p95']:.3f} s"
            "   (target p95 <= 2 s)"
        )
        print(
            f"{'vector lag p50 / p95':<28}{lag['vector_p50']:8.3f} / {lag['vector_p95']:.3f} s"
            "   (target p95 <= 30 s)"
        )


def _print_round(number: int, measured: Round, payloads: int) -> None:
    cpu = measured.pipeline_cpu_s
    print(
        f"round {number}: raw {measured.raw:.1f} listings/s ({measured.raw_before:.1f} before,"
        f" {measured.raw_after:.1f} after), end to end {measured.e2e:.1f} ({payloads} payloads"
        f" polled in {measured.polls_s:.2f} s), ratio {measured.ratio:.2f}\n"
        f"  CPU s: worker {cpu['worker']:.1f} + postgres {cpu['postgres']:.1f} + polls"
        f" {cpu['polls']:.1f} = {sum(cpu.values()):.1f}, raw {measured.raw_cpu_s:.1f}:"
        f" CPU bound {measured.cpu_bound:.2f}",
        flush=True,
    )


if __name__ == "__main__":
    main()
