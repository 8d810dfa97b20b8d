"""Embedder benchmark: the ONNX runtime against the torch fp32 reference, in one run.

    .venv/bin/python bench/embed.py [--queries 200] [--listings 512] [--batch-size 32]

- query p50/p95: embed_query with the query cache disabled, i.e. the path a new search pays.
- sorted/s: one embed_documents call over all listings, which sorts them by length and runs
  batches of --batch-size.
- 32/call: embed_documents on --batch-size listings at a time in arrival order, as an
  ingestion task embedding one claimed batch does: no length sorting to gain from.
- cos: each runtime's vectors against torch fp32 for the same queries and listings.

About a minute on an idle 2-core box. Each phase stops after --budget seconds once it has a
minimum sample, so a box busy with other work still finishes in about three.
"""

import argparse
import contextlib
import random
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

# Run as a plain script (`python bench/embed.py`), so the repository root is not on sys.path.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ingestion.embedding import Embedder
from ingestion.embedding.embedder import default_threads

TARGET_QUERY_P50_MS = 4.0
TARGET_PER_S = 120.0
TARGET_MIN_COSINE = 0.99

MODIFIERS = ["free", "cheap", "outdoor", "late", "family", "live", "weekend", "indie", "local"]
TOPICS = ["jazz", "techno", "yoga", "pottery", "comedy", "poetry", "salsa", "wine", "film"]
EVENTS = ["concert", "workshop", "class", "festival", "night", "market", "screening", "tour"]
PLACES = ["brooklyn", "downtown", "riverside", "soho", "harbour", "uptown", "park", "campus"]
TIMES = ["tonight", "tomorrow", "saturday", "sunday", "friday", "morning", "afternoon"]
VENUES = ["The Blue Room", "Old Mill Hall", "Riverside Pavilion", "Civic Arts Centre", "Dock 7"]
OPENERS = [
    "Join us for",
    "Don't miss",
    "Back by popular demand,",
    "An evening of",
    "Celebrate the season with",
]
DETAILS = [
    "with guest performers and a pay-what-you-can bar",
    "suitable for complete beginners, all materials provided",
    "followed by a Q&A with the artists and a short reception",
    "featuring local food trucks, craft stalls and a kids' corner",
    "in the restored main hall, step-free access via the side entrance",
    "tickets include a drink on arrival; doors open thirty minutes before",
]
CLOSERS = [
    "Booking recommended.",
    "Free entry before 9pm.",
    "Ages 18+ with ID.",
    "Bring a friend and a blanket if the weather is fine.",
    "Part of the city's autumn festival programme, running all month across venues.",
]


def make_queries(rng: random.Random, n: int) -> list[str]:
    pools = (MODIFIERS, TOPICS, EVENTS, PLACES, TIMES)
    return [" ".join(rng.choice(pool) for pool in pools) for _ in range(n)]


def make_listings(rng: random.Random, n: int) -> list[str]:
    listings = []
    for _ in range(n):
        topic, event = rng.choice(TOPICS), rng.choice(EVENTS)
        title = f"{rng.choice(MODIFIERS).title()} {topic.title()} {event.title()}"
        venue = f"{rng.choice(VENUES)}, {rng.choice(PLACES).title()}"
        details = ", ".join(rng.sample(DETAILS, rng.randint(0, 3)))
        sentence = f"{rng.choice(OPENERS)} {topic} {event} {details}".rstrip(", ") + "."
        closers = " ".join(rng.sample(CLOSERS, rng.randint(0, 3)))
        listings.append(f"{title}. {venue}. {sentence} {closers}".strip())
    return listings


@dataclass
class Workload:
    queries: list[str]
    listings: list[str]
    batch_size: int
    passes: int
    # Torch's OpenMP collapses when other processes compete for the cores: a budget keeps a
    # busy box from turning a one-minute benchmark into a ten-minute one.
    budget_s: float


@dataclass
class Row:
    label: str
    latencies_ms: npt.NDArray[np.float64]
    sorted_per_s: float
    per_call_per_s: float
    query_vectors: npt.NDArray[np.float32]
    listing_vectors: npt.NDArray[np.float32]

    def cosines(self, reference: "Row") -> npt.NDArray[np.float32]:
        n = min(len(self.query_vectors), len(reference.query_vectors))
        return np.concatenate(
            [
                np.sum(self.query_vectors[:n] * reference.query_vectors[:n], axis=1),
                np.sum(self.listing_vectors * reference.listing_vectors, axis=1),
            ]
        )


def measure(
    label: str,
    embedder: Embedder,
    work: Workload,
    context: Callable[[], contextlib.AbstractContextManager[object]] = contextlib.nullcontext,
) -> Row:
    with context():
        for query in work.queries[:20]:
            embedder.embed_query(query)
        embedder.embed_documents(work.listings[: work.batch_size], work.batch_size)

        latencies, query_vectors = [], []
        deadline = time.monotonic() + work.budget_s
        for query in work.queries:
            start = time.perf_counter()
            query_vectors.append(embedder.embed_query(query))
            latencies.append((time.perf_counter() - start) * 1000)
            if len(latencies) >= 20 and time.monotonic() > deadline:
                break

        rates = []
        deadline = time.monotonic() + work.budget_s
        for _ in range(max(work.passes, 1)):
            start = time.perf_counter()
            listing_vectors = embedder.embed_documents(work.listings, work.batch_size)
            rates.append(len(work.listings) / (time.perf_counter() - start))
            if time.monotonic() > deadline:
                break

        done, elapsed = 0, 0.0
        deadline = time.monotonic() + work.budget_s / 2
        for i in range(0, len(work.listings), work.batch_size):
            batch = work.listings[i : i + work.batch_size]
            start = time.perf_counter()
            embedder.embed_documents(batch, work.batch_size)
            elapsed += time.perf_counter() - start
            done += len(batch)
            if time.monotonic() > deadline:
                break
    return Row(
        label,
        np.array(latencies),
        float(np.median(rates)),
        done / elapsed,
        np.stack(query_vectors),
        listing_vectors,
    )


@contextlib.contextmanager
def bf16_autocast() -> Iterator[None]:
    import torch

    with torch.autocast("cpu", dtype=torch.bfloat16):
        yield


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--listings", type=int, default=512)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--passes", type=int, default=2, help="sorted passes (median)")
    parser.add_argument("--budget", type=float, default=6.0, help="seconds per phase")
    args = parser.parse_args()

    rng = random.Random(20240601)
    work = Workload(
        make_queries(rng, args.queries),
        make_listings(rng, args.listings),
        args.batch_size,
        args.passes,
        args.budget,
    )
    words = [len(text.split()) for text in work.listings]
    print(
        f"{len(work.queries)} queries of 5 words; {len(work.listings)} listings of "
        f"{min(words)}-{max(words)} words (mean {np.mean(words):.0f}); batches of "
        f"{work.batch_size}\n"
    )

    chosen = default_threads()
    onnx_rows = {}
    for threads, spin in sorted({(1, False), (2, False), (2, True), (chosen, False)}):
        onnx = Embedder.load("onnx", threads=threads, spin=spin, query_cache_size=0)
        label = f"onnx, {threads} thr{', spin' if spin else ''}"
        if (threads, spin) == (chosen, False):
            label += " *"
        onnx_rows[threads, spin] = measure(label, onnx, work)
    rows = list(onnx_rows.values())
    # Torch runs after ONNX: its OpenMP threads keep spinning after each call and would steal
    # the cores from an onnxruntime measurement that followed in the same process.
    torch_embedder = Embedder.load("torch", query_cache_size=0)
    reference = measure("torch fp32 (ref)", torch_embedder, work)
    rows.append(reference)
    rows.append(measure("torch bf16 autocast", torch_embedder, work, bf16_autocast))

    per_call = f"{work.batch_size}/call"
    header = (
        f"{'runtime':24} {'query p50':>9} {'query p95':>9} {'sorted/s':>8} {per_call:>7} "
        f"{'cos min':>8} {'cos mean':>8}"
    )
    print(header)
    print("-" * len(header))
    for row in rows:
        p50, p95 = np.percentile(row.latencies_ms, [50, 95])
        cosines = row.cosines(reference)
        print(
            f"{row.label:24} {p50:7.2f}ms {p95:7.2f}ms {row.sorted_per_s:8.0f} "
            f"{row.per_call_per_s:7.0f} {cosines.min():8.5f} {cosines.mean():8.5f}"
        )
    for row in rows:
        if len(row.latencies_ms) < len(work.queries):
            print(f"  ({row.label}: budget spent after {len(row.latencies_ms)} queries)")

    best = onnx_rows[chosen, False]
    best_p50 = float(np.percentile(best.latencies_ms, 50))
    # The batch target is the runtime's (issue 2), on the two threads it was set for; the
    # default leaves a core to the rest of the pipeline where there are only two
    # (docs/decisions/embedder-threads-one-per-query-a-core-left-beside-a-batch.md), and its
    # row above shows what that costs a batch.
    fastest = onnx_rows[2, False]
    checks = [
        (f"query p50 <= {TARGET_QUERY_P50_MS} ms", best_p50 <= TARGET_QUERY_P50_MS),
        (
            f"sorted batches on 2 threads >= {TARGET_PER_S:.0f} listings/s",
            fastest.sorted_per_s >= TARGET_PER_S,
        ),
        (
            f"cosine >= {TARGET_MIN_COSINE} vs fp32",
            best.cosines(reference).min() >= TARGET_MIN_COSINE,
        ),
    ]
    print(f"\n* default: onnx, EMBEDDER_THREADS={chosen}, no spin-waiting")
    for name, ok in checks:
        print(f"  {'PASS' if ok else 'FAIL'}  {name}")
    return 0 if all(ok for _, ok in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
