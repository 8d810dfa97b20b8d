"""100,000 listings with realistic text and real MiniLM vectors, built quickly.

Embedding 100,000 texts would take a quarter of an hour here, so 2,000 base listings are
embedded for real and each synthetic listing combines two of them: its title joins words
of both titles, its vector is a weighted mean of both vectors (the first weighing between
a half and all of it) plus a little noise, normalised. The texts and vectors stay
consistent with each other, which is what both branches need.

The listings spread along the lines between the base listings rather than crowding round
them: with a fixed weight and noise of 0.01 in each dimension, 1,000,000 listings made
2,000 crowds of 500 near-copies. Neither set is the real thing: bench/vector_spread.py
estimates their local intrinsic dimension beside the real listings' (docs/benchmarks.md,
"Search at 1,000,000 listings")."""

import contextlib
import os
import random
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import numpy as np
import numpy.typing as npt
import psutil
from django.db import connection, transaction

from ingestion import generations
from ingestion.embedding import DIMENSIONS, get_embedder
from ingestion.models import IndexGeneration
from ingestion.text import embedding_text
from retrieval.pg import vocabulary

BASE = 2000
_LISTING_DEFAULTS = "\t".join(
    [
        "{}",
        "",
        "f",
        "",
        "active",
        "2026-11-29T00:00:00Z",
        "2026-11-29T00:00:00Z",
        "1",
        "editorial",
        "public",
        "f",
        # The kind of the source record `record_listings` gives every listing, set here so
        # that those records' inserts leave the listings as they are.
        "{editorial}",
    ]
)


@dataclass(frozen=True)
class IndexBuild:
    """How an HNSW index was built."""

    seconds: float
    peak_mb: float  # the building backend's and its parallel workers' own memory, at most
    maintenance_work_mem: str
    parallel_workers: int


# A synthetic listing's vector: how much of the first base listing's, and the noise's
# standard deviation in each dimension (bench/vector_spread.py measures what they give).
WEIGHTS = (0.5, 1.0)
NOISE = 0.002


def blend(
    first: npt.NDArray[np.float32],
    second: npt.NDArray[np.float32],
    weight: float,
    noise: npt.NDArray[np.float64],
) -> npt.NDArray[np.float64]:
    vector = weight * first + (1 - weight) * second + noise
    return vector / np.linalg.norm(vector)


def build(
    count: int, base_records: list[dict[str, object]], generation: int, seed: int = 11
) -> IndexBuild | None:
    """Builds the listings unless exactly these are there already: the rows by COPY,
    streamed, with the generation's HNSW index dropped, then the index built at once
    (pgvector's advice: inserting into a graph row by row is far slower), timed. None when
    the listings were there."""
    if _already_built(count, generation):
        return None
    rng = random.Random(seed)
    base = base_records[:BASE]
    texts = [
        embedding_text(str(r["title"]), str(r["venue"]), [], str(r["description"])[:300])
        for r in base
    ]
    vectors = get_embedder().embed_documents(texts)
    noise = np.random.default_rng(seed)

    def rows() -> Iterator[tuple[str, str]]:
        for number in range(1, count + 1):
            a, b = rng.randrange(len(base)), rng.randrange(len(base))
            words_a, words_b = str(base[a]["title"]).split(), str(base[b]["title"]).split()
            half_a = words_a[: max(1, len(words_a) // 2 + 1)]
            title = " ".join(half_a + words_b[len(words_b) // 2 :])
            description = f"{str(base[a]['description'])[:200]} {str(base[b]['description'])[:100]}"
            weight = rng.uniform(*WEIGHTS)
            vector = blend(vectors[a], vectors[b], weight, noise.normal(0, NOISE, DIMENSIONS))
            listing = "\t".join(
                [
                    str(number),
                    _clean(title),
                    _clean(description),
                    _clean(str(base[a]["venue"])),
                    _LISTING_DEFAULTS,
                    _start(number).isoformat(),
                ]
            )
            text = ",".join(f"{x:.5f}" for x in vector)
            yield listing + "\n", f"{number}\t{generation}\t[{text}]\t1\t2026-11-29T00:00:00Z\n"

    return _copy(rows(), generation)


# Every listing gets a start, spread evenly and in no relation to its text over a year
# that has not begun yet, so a date window selects a known share of listings (the
# filtered figures of bench/search.py) and the default filter (not ended) keeps them all.
DATED_FROM = "2027-01-01T00:00:00Z"
DATED_DAYS = 360


def _start(number: int) -> datetime:
    """The start `date_listings` gives listing `number`, given at COPY instead."""
    first = datetime.fromisoformat(DATED_FROM)
    return first + (number * 7919 % 100_000) * (timedelta(days=DATED_DAYS) / 100_000)


def date_listings() -> None:
    """Give every undated listing its start (idempotent; bench databases built before
    listings were dated get theirs here)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE ingestion_listing SET starts_at = %s::timestamptz"
            " + (id * 7919 %% 100000) * (%s * interval '1 day' / 100000)"
            " WHERE starts_at IS NULL",
            [DATED_FROM, DATED_DAYS],
        )
        if cursor.rowcount:  # as many dead rows as it dated: vacuumed, as after the build
            _vacuum(cursor)


# Every listing came from a source: ingestion gives each its record, with the draft it was
# made from. Built by COPY, the bench's listings had none, so the records table held only
# what a bench ingested and was empty when a search statement was planned: the generic plan
# read a result's sources by a sequential scan, and a burst's 5,000 records made that 14 ms
# of a search (10-18 times the statement's 0.8 ms; pg_stat_statements, 2026-12-06).
CORPUS_SOURCE = "bench corpus"


def record_listings() -> None:
    """Give every listing without a source record its record from the bench corpus's
    editorial source, as ingestion would have (idempotent: bench databases built before
    listings had records get theirs here)."""
    from ingestion.models import Source

    source, _ = Source.objects.get_or_create(
        name=CORPUS_SOURCE, defaults={"kind": Source.Kind.EDITORIAL, "active": False}
    )
    with transaction.atomic(), connection.cursor() as cursor:
        # Without the records' per-row triggers, which set each listing's source kinds: on
        # a records table empty when the statement was planned, each trigger's lookup read
        # the records inserted so far, and 1,000,000 took hours. The kinds are set below.
        cursor.execute("SET LOCAL session_replication_role = replica")
        cursor.execute(
            "INSERT INTO ingestion_sourcerecord (source_id, external_id, content_hash,"
            " listing_id, withdrawn, data, first_seen_at, updated_at)"
            " SELECT %s, 'bench-' || l.id,"
            " encode(sha256(convert_to(l.title || l.description, 'UTF8')), 'hex'), l.id, false,"
            " jsonb_build_object('title', l.title, 'description', l.description,"
            " 'venue', l.venue, 'starts_at', l.starts_at, 'audience', l.audience),"
            " l.created_at, l.created_at"
            " FROM ingestion_listing l"
            " WHERE NOT EXISTS (SELECT FROM ingestion_sourcerecord r WHERE r.listing_id = l.id)",
            [source.pk],
        )
        inserted = cursor.rowcount
        # What the triggers would have set: a listing without kinds had no records, and
        # now has this one. None for listings copied with their kind.
        cursor.execute(
            "UPDATE ingestion_listing l SET source_kinds = ARRAY[%s] WHERE source_kinds = '{}'"
            " AND EXISTS (SELECT FROM ingestion_sourcerecord r"
            " WHERE r.listing_id = l.id AND r.source_id = %s)",
            [source.kind, source.pk],
        )
    if inserted:
        with connection.cursor() as cursor:
            for table in ("ingestion_sourcerecord", "ingestion_listing"):
                cursor.execute(f"VACUUM (ANALYZE) {table}")


def _already_built(count: int, generation: int) -> bool:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT (SELECT count(*) FROM ingestion_listing),"
            " (SELECT count(*) FROM ingestion_listing_embedding WHERE generation_id = %s)",
            [generation],
        )
        listings, embeddings = cursor.fetchone()
    if listings and (listings, embeddings) != (count, count):
        raise SystemExit(f"the database holds {listings} other listings: use a fresh --data-dir")
    return int(listings) == count


def _vacuum(cursor: Any) -> None:
    """VACUUM, not only ANALYZE: rows just written carry no hint bits and no page is
    all-visible, so a search's first read of a row wrote its page back, and rows an UPDATE
    replaced were read through (a fresh build, then dated, measured 140 ms of Postgres CPU
    a search; 10.5 ms once vacuumed)."""
    for table in (
        "ingestion_listing",
        "ingestion_listing_embedding",
        "ingestion_embedding_candidate",
    ):
        cursor.execute(f"VACUUM (ANALYZE) {table}")


def _clean(text: str) -> str:
    return " ".join(text.replace("\\", " ").split())[:480]


def _copy(rows: Iterator[tuple[str, str]], generation: int) -> IndexBuild:
    raw = connection.connection  # psycopg's own connection: COPY is far faster than INSERTs
    made = IndexGeneration.objects.get(pk=generation)
    index = generations.hnsw_index_name(made)
    with raw.cursor() as cursor:
        cursor.execute(f"DROP INDEX IF EXISTS {index}")
        listings, embeddings = [], []
        for listing, embedding in rows:
            listings.append(listing)
            embeddings.append(embedding)
            if len(listings) == COPY_CHUNK:
                _copy_chunk(cursor, listings, embeddings)
        _copy_chunk(cursor, listings, embeddings)
        cursor.execute(
            "SELECT setval('ingestion_listing_id_seq', (SELECT max(id) FROM ingestion_listing))"
        )
        # The listings' trigger marked each an embedding candidate (migrations/0012), and
        # their vectors came by COPY, not through a claim that would have settled them:
        # left, every lag read and claim of the first run probes all 100,000.
        cursor.execute("DELETE FROM ingestion_embedding_candidate")
    raw.commit()
    built = _index(raw, made)
    with raw.cursor() as cursor:
        _vacuum(cursor)
        for view in vocabulary.VIEWS:
            cursor.execute(f"REFRESH MATERIALIZED VIEW {view}")
    raw.commit()
    return built


# Rows a COPY statement takes at a time: 1,000,000 listings' text held at once would be
# gigabytes of the bench's memory.
COPY_CHUNK = 50_000
# For the index build: the graph of 1,000,000 384-dimension vectors is about 2 GB, and a
# build whose graph outgrows maintenance_work_mem goes on far slower (pgvector's notice).
BUILD_MEMORY = os.environ.get("BENCH_MAINTENANCE_WORK_MEM", "3GB")
BUILD_WORKERS = int(os.environ.get("BENCH_PARALLEL_WORKERS", "1"))


def _copy_chunk(cursor: Any, listings: list[str], embeddings: list[str]) -> None:
    with cursor.copy(
        "COPY ingestion_listing (id, title, description, venue, aliases, timezone,"
        " all_day, url, status, created_at, updated_at, content_version, fetched_kind,"
        " audience, withdrawn_by_editor, source_kinds, starts_at)"
        " FROM STDIN"
    ) as copy:
        copy.write("".join(listings))
    with cursor.copy(
        "COPY ingestion_listing_embedding (listing_id, generation_id, embedding,"
        " content_version, embedded_at) FROM STDIN"
    ) as copy:
        copy.write("".join(embeddings))
    listings.clear()
    embeddings.clear()


def _index(raw: Any, generation: IndexGeneration) -> IndexBuild:
    """The generation's HNSW index built in one statement after the rows."""
    built = timed_index_build(
        raw, generations.hnsw_index_sql(generation.pk, DIMENSIONS, generation.vector_type)
    )
    raw.commit()
    return built


def timed_index_build(conn: Any, statement: str) -> IndexBuild:
    """An index built by `statement`, timed, its memory sampled. Parallel workers
    (BENCH_PARALLEL_WORKERS, 1 by default: on two cores the leader and one worker) each
    hold their part; maintenance_work_mem is the whole build's."""
    with conn.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        (backend,) = cursor.fetchone()
        cursor.execute(f"SET maintenance_work_mem = '{BUILD_MEMORY}'")
        cursor.execute(f"SET max_parallel_maintenance_workers = {BUILD_WORKERS}")
        peak = [0.0]
        done = threading.Event()
        sampler = threading.Thread(target=_sample_memory, args=(backend, peak, done))
        sampler.start()
        started = time.perf_counter()
        try:
            cursor.execute(statement)
        finally:
            done.set()
            sampler.join()
        seconds = time.perf_counter() - started
        cursor.execute("RESET maintenance_work_mem; RESET max_parallel_maintenance_workers")
    return IndexBuild(seconds, peak[0], BUILD_MEMORY, BUILD_WORKERS)


def _sample_memory(backend: int, peak: list[float], done: threading.Event) -> None:
    """The most memory the building backend and its parallel workers held of their own
    (USS: not the shared buffers they touch), every half second."""
    leader = psutil.Process(backend)
    postmaster = leader.parent()
    while not done.wait(0.5):
        processes = [leader] + [
            child
            for child in (postmaster.children() if postmaster else [])
            if "parallel worker" in " ".join(_cmdline(child))
        ]
        total = 0
        for process in processes:
            with contextlib.suppress(psutil.Error):
                total += process.memory_full_info().uss
        peak[0] = max(peak[0], total / 2**20)


def _cmdline(process: psutil.Process) -> list[str]:
    try:
        return process.cmdline()
    except psutil.Error:
        return []
