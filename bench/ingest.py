"""Ingestion benchmark: end-to-end listings/s against raw embedding throughput in the same
run, then fetch-to-searchable lag while new listings stream in during searches.

    .venv/bin/python bench/ingest.py [--listings 1024] [--rate 20] [--seconds 60]

Targets (issue 3): end-to-end >= 0.8 x raw embedding; lexical lag p95 <= 2 s; vector lag
p95 <= 30 s at 20 new listings/s.
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
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import REPO, SHARED_DATA, percentile, running
from listings import records


def raw_embedding_rate(texts: list[str]) -> float:
    from ingestion.embedding import get_embedder

    embedder = get_embedder()
    embedder.embed_documents(texts[:64])  # warm-up: sessions, allocator
    started = time.perf_counter()
    embedder.embed_documents(texts, batch_size=32)
    return len(texts) / (time.perf_counter() - started)


def end_to_end_rate(batch: list[dict[str, object]]) -> tuple[float, float, float]:
    """Fetch (local file), parse, de-duplicate, upsert, then embed everything."""
    from ingestion.indexing import embed_pending_batch
    from ingestion.models import Source
    from ingestion.polling import poll_source

    path = Path(tempfile.mkdtemp()) / "records.json"
    path.write_text(json.dumps(batch))
    source = Source.objects.create(name="bench e2e", kind="editorial", url=str(path))
    started = time.perf_counter()
    poll = poll_source(source.pk)
    assert poll.new == len(batch), poll.__dict__
    ingested = time.perf_counter()
    while embed_pending_batch():
        pass
    done = time.perf_counter()
    return len(batch) / (done - started), ingested - started, done - ingested


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
    from django.utils import timezone

    from ingestion.models import Source
    from ingestion.polling import ingest_payload
    from ingestion.tasks import schedule_embedding
    from searchsite.supervisor import worker_argv

    env = dict(os.environ)
    worker = subprocess.Popen(
        worker_argv("embedding", 1, "bench-embed@%h", "WARNING"),
        cwd=REPO,
        env=env,
        start_new_session=True,
    )
    source = Source.objects.create(name="bench stream", kind="editorial")
    stop, searches = threading.Event(), [0]
    searcher = threading.Thread(target=_searcher, args=(stop, searches))
    searcher.start()
    ticks_per_s = 4  # a small batch every 250 ms: a steady stream, not one burst a second
    per_tick = max(1, rate // ticks_per_s)
    started, sent = time.monotonic(), 0
    try:
        for tick in range(int(seconds * ticks_per_s)):
            time.sleep(max(0.0, started + tick / ticks_per_s - time.monotonic()))
            batch = pool[sent : sent + per_tick]
            sent += len(batch)
            ingest_payload(
                source,
                json.dumps(batch).encode(),
                started_at=timezone.now(),
                name_hint="stream.json",
                snapshot=False,
            )
            schedule_embedding()
        stop.set()
        searcher.join()
        _wait_for_vectors(source.pk, sent, timeout_s=300)
    finally:
        stop.set()
        os.killpg(worker.pid, signal.SIGTERM)
        worker.wait(60)
    lexical, vector = _lags(source.pk)
    return {
        "sent": sent,
        "searches": searches[0],
        "lexical_p50": statistics.median(lexical),
        "lexical_p95": percentile(lexical, 0.95),
        "vector_p50": statistics.median(vector),
        "vector_p95": percentile(vector, 0.95),
    }


def _wait_for_vectors(source_id: int, expected: int, timeout_s: float) -> None:
    from ingestion.models import ListingEmbedding

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        done = ListingEmbedding.objects.filter(
            listing__records__source_id=source_id, generation__state="active"
        ).count()
        if done >= expected:
            return
        time.sleep(0.5)
    raise SystemExit(f"only {done}/{expected} listings were embedded within {timeout_s}s")


def _lags(source_id: int) -> tuple[list[float], list[float]]:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT extract(epoch FROM l.lexically_searchable_at - l.fetched_at),"
            "       extract(epoch FROM e.embedded_at - l.fetched_at)"
            " FROM ingestion_listing l"
            " JOIN ingestion_sourcerecord r ON r.listing_id = l.id AND r.source_id = %s"
            " JOIN ingestion_listing_embedding e ON e.listing_id = l.id"
            " JOIN ingestion_indexgeneration g ON g.id = e.generation_id AND g.state = 'active'",
            [source_id],
        )
        rows = cursor.fetchall()
    return [float(r[0]) for r in rows], [float(r[1]) for r in rows]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--listings", type=int, default=1024)
    parser.add_argument("--rate", type=int, default=20, help="new listings per second")
    parser.add_argument("--seconds", type=float, default=60.0)
    args = parser.parse_args()
    with running():
        from ingestion import generations
        from ingestion.embedding import DIMENSIONS, MODEL_NAME
        from ingestion.text import embedding_text

        generations.ensure_active_generation(MODEL_NAME, DIMENSIONS)
        data_dir = SHARED_DATA if SHARED_DATA.exists() else None
        pool = records(args.listings + int(args.rate * args.seconds) + 64, data_dir)
        batch, stream = pool[: args.listings], pool[args.listings :]
        texts = [
            embedding_text(str(r["title"]), str(r["venue"]), [], str(r["description"]))
            for r in batch
        ]
        raw = raw_embedding_rate(texts)
        e2e, ingest_s, embed_s = end_to_end_rate(batch)
        print(f"texts: {'Open House London (shared data)' if data_dir else 'generated'}")
        print(f"{'raw embedding':<28}{raw:8.1f} listings/s")
        print(
            f"{'end to end':<28}{e2e:8.1f} listings/s  (ingest {ingest_s:.2f} s, "
            f"embed {embed_s:.2f} s for {len(batch)})"
        )
        print(f"{'ratio e2e / raw':<28}{e2e / raw:8.2f}   (target >= 0.80)")
        lag = stream_lag(args.rate, args.seconds, stream)
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


if __name__ == "__main__":
    main()
