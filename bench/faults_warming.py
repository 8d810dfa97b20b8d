"""Fault benchmarks of cache warming and of a cold start (issue 12, item 3), printing the
figures the issue names. Its sub-commands join bench/faults.py's.

    .venv/bin/python bench/faults_warming.py vector-stall [--listings 100000] [--stall-s 30]
        [--rate 25] [--ingest-rate 20] [--no-warming] [--data-dir DIR]
    .venv/bin/python bench/faults_warming.py cold-start [--listings 100000] [--rate 25]
        [--seconds 6] [--no-warm-up] [--data-dir DIR]

vector-stall: searches for distinct queries at --rate/s while new listings stream in at
--ingest-rate/s, and the embeddings table is locked for --stall-s seconds (the vector
stage stalls on it; so does embedding). Prints each phase's modes, the warming events and
the warming queue's high-water mark, and the embedding catch-up: from the stall's end
until every listing ingested during it is embedded. Target: the catch-up within 10 % of a
run with --no-warming (no warming worker: the tasks wait unrun).

cold-start: stops Postgres, evicts its files from the OS page cache (posix_fadvise
DONTNEED, which needs no root; with --drop-all-caches, `echo 3 >
/proc/sys/vm/drop_caches`, which needs root and empties the cache of every process on the
machine, the model's file included; the line `page cache` says which ran), starts Postgres
again, runs `manage.py bootstrap` (its warm-up) unless --no-warm-up, starts the workers
and the web server, waits until the web server is ready (/healthz/ready; /healthz/live
with --no-warm-up, the old behaviour), then searches at --rate/s for --seconds. Target:
>= 95 % hybrid (before: 124 of 150 `cache_fallback` with `breaker_open` at 100,000).

Both reset the vector breaker before they start, and run the embedding and warming
workers as `make run` does (searchsite/supervisor.py WORKERS).
"""

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from feed import STALL_SOURCE, deliver, remove_bench_sources
from harness import REPO, SHARED_DATA, running
from listings import records

# The warming queue's list in Redis, and the counter the web's /metrics sums over every
# process (each writes into PROMETHEUS_MULTIPROC_DIR).
WARMING_QUEUE = "warming"
WARMING_METRIC = "retrieval_cache_warming_total"


@dataclass
class Outcome:
    sent_at: float
    status: int
    mode: str
    reasons: tuple[str, ...]


@dataclass
class Traffic:
    """Searches sent at a steady rate, each for a query not sent before."""

    api: str
    rate: float
    texts: list[str]
    outcomes: list[Outcome] = field(default_factory=list)

    async def run(self, seconds: float, start_at: int = 0) -> None:
        async with httpx.AsyncClient(timeout=5) as client:
            started = time.monotonic()
            sent: list[asyncio.Task[None]] = []
            for number in range(int(seconds * self.rate)):
                await asyncio.sleep(max(0.0, started + number / self.rate - time.monotonic()))
                text = self.texts[(start_at + number) % len(self.texts)]
                sent.append(asyncio.create_task(self._one(client, f"{text} {start_at + number}")))
            await asyncio.gather(*sent)

    async def _one(self, client: httpx.AsyncClient, text: str) -> None:
        sent_at = time.monotonic()
        try:
            response = await client.get(self.api, params={"q": text})
        except Exception as exc:  # the figure is the outcome, whatever it was
            self.outcomes.append(Outcome(sent_at, 0, type(exc).__name__, ()))
            return
        body = response.json() if response.status_code in (200, 503) else {}
        mode = body.get("mode", f"http_{response.status_code}")
        self.outcomes.append(
            Outcome(sent_at, response.status_code, mode, tuple(body.get("reasons", ())))
        )


def summary(outcomes: list[Outcome]) -> dict[str, object]:
    modes = Counter(o.mode for o in outcomes)
    reasons = Counter(reason for o in outcomes for reason in o.reasons)
    breaker_cached = sum(
        o.mode == "cache_fallback" and "breaker_open" in o.reasons for o in outcomes
    )
    return {
        "searches": len(outcomes),
        "hybrid_share": round(modes["hybrid"] / len(outcomes), 3) if outcomes else None,
        "modes": dict(modes),
        "reasons": dict(reasons),
        "cache_fallback_breaker_open": breaker_cached,
    }


def warming_events(metrics_url: str) -> dict[str, float]:
    from prometheus_client.parser import text_string_to_metric_families

    text = httpx.get(metrics_url, timeout=5).text
    return {
        sample.labels["event"]: sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == WARMING_METRIC
    }


@contextmanager
def stack(*, warming: bool) -> Iterator[str]:
    """The embedding (and warming) workers and the web server; yields the site's address."""
    from resilience.redis_clients import get_redis
    from searchsite.celery import QUEUES
    from searchsite.supervisor import WORKERS, web_argv

    redis = get_redis()
    redis.delete(*QUEUES)
    for key in redis.scan_iter("searchsite:breaker:*"):
        redis.delete(key)
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = tempfile.mkdtemp(prefix="bench-metrics-")
    port = _free_port()
    wanted = {"embed-worker", "warm-worker"} if warming else {"embed-worker"}
    started = [(w.argv(), w.env()) for w in WORKERS if w.name in wanted]
    started.append((web_argv(port, "warning"), {}))
    children = [
        subprocess.Popen(argv, cwd=REPO, env={**os.environ, **env}, start_new_session=True)
        for argv, env in started
    ]
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(1200):  # the web server answers once it has loaded the model
            try:
                httpx.get(f"{base}/healthz/live", timeout=1)
                break
            except httpx.HTTPError:
                time.sleep(0.1)
        yield base
    finally:
        for child in reversed(children):
            os.killpg(child.pid, signal.SIGTERM)
        for child in children:
            child.wait(60)


def _free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def build(listings: int) -> list[str]:
    """The listings, built unless they are there already; query texts for the traffic."""
    from django.db import connection
    from search import queries
    from search_data import build as build_listings

    from ingestion import generations
    from ingestion.embedding import DIMENSIONS, MODEL_NAME

    data_dir = SHARED_DATA if SHARED_DATA.exists() else None
    generation = generations.ensure_active_generation(MODEL_NAME, DIMENSIONS)
    base_records = records(2000, data_dir)
    started = time.perf_counter()
    built = build_listings(listings, base_records, generation.pk)
    took_s = time.perf_counter() - started
    print(f"{'built' if built else 'reused'} {listings} listings in {took_s:.0f} s")
    connection.close()
    return queries(2000, base_records)


class Ingest(threading.Thread):
    """New listings at `rate`/s, embedding scheduled as a poll schedules it."""

    def __init__(self, rate: int, pool: list[dict[str, object]]) -> None:
        super().__init__(name="ingest")
        self.rate, self.pool, self.stop = rate, pool, threading.Event()
        self.sent: list[tuple[float, str]] = []  # (when, external id)

    def run(self) -> None:
        from django.db import connection

        from ingestion.models import Source

        source = Source.objects.create(name=STALL_SOURCE, kind=Source.Kind.EDITORIAL, active=False)
        ticks_per_s, per_tick = 4, max(1, self.rate // 4)
        started, tick = time.monotonic(), 0
        while not self.stop.is_set() and len(self.sent) < len(self.pool):
            time.sleep(max(0.0, started + tick / ticks_per_s - time.monotonic()))
            batch = self.pool[len(self.sent) : len(self.sent) + per_tick]
            deliver(source, batch, "stream.json")
            now = time.monotonic()
            self.sent += [(now, str(record["id"])) for record in batch]
            tick += 1
        connection.close()


def _unembedded(external_ids: list[str]) -> int:
    from ingestion.models import Listing

    return (
        Listing.objects.filter(records__external_id__in=external_ids, listingembedding__isnull=True)
        .distinct()
        .count()
    )


def _caught_up_after(external_ids: list[str], since: float, bound_s: float = 600) -> float:
    """Seconds from `since` (time.monotonic()) until every listing of `external_ids` has a
    vector, polled every 0.1 s for at most `bound_s`."""
    from django.db import connection

    try:
        while _unembedded(external_ids) and time.monotonic() - since < bound_s:
            time.sleep(0.1)
        return time.monotonic() - since
    finally:
        connection.close()  # this thread's own


def vector_stall(args: argparse.Namespace) -> None:
    import psycopg

    from resilience.redis_clients import get_redis
    from retrieval.pg.pool import conninfo

    remove_bench_sources()  # a run that did not clean up
    texts = build(args.listings)
    pool = records(int(args.ingest_rate * (args.stall_s + 60)) + 100, None, seed=23)
    pool = [{**record, "id": f"stall-{record['id']}"} for record in pool]
    redis, high_water, sampling = get_redis(), [0], threading.Event()

    def sample_queue() -> None:
        while not sampling.wait(0.1):
            high_water[0] = max(high_water[0], int(redis.llen(WARMING_QUEUE)))

    with stack(warming=not args.no_warming) as base:
        traffic = Traffic(f"{base}/api/search", args.rate, texts)
        ingest = Ingest(args.ingest_rate, pool)
        sampler = threading.Thread(target=sample_queue)
        ingest.start()
        sampler.start()
        before_s, after_s = 5.0, 15.0
        with psycopg.connect(conninfo()) as holder:

            async def run() -> tuple[float, float, float, list[str], float]:
                phases = asyncio.create_task(traffic.run(before_s + args.stall_s + after_s))
                await asyncio.sleep(before_s)
                # The stall begins when the lock is asked for: queued behind a transaction
                # of the embedding worker's, it already blocks every later reader. Asked on
                # the event loop, the wait stopped the searches' sends too (once 15 s).
                asked = time.monotonic()
                await asyncio.to_thread(
                    holder.execute,
                    "LOCK TABLE ingestion_listing_embedding IN ACCESS EXCLUSIVE MODE",
                )
                granted = time.monotonic()
                await asyncio.sleep(args.stall_s - (granted - asked))
                await asyncio.to_thread(holder.rollback)
                released = time.monotonic()
                # Watched while the searches after the stall run: a catch-up shorter than
                # that phase (15 s) was once read only after it, and printed as 15.0 s.
                during = [eid for when, eid in ingest.sent if asked <= when < released]
                catch_up = asyncio.create_task(
                    asyncio.to_thread(_caught_up_after, during, released)
                )
                await phases
                return asked, granted, released, during, await catch_up

            asked, granted, released, during, catch_up_s = asyncio.run(run())
        ingest.stop.set()
        sampling.set()
        ingest.join()
        sampler.join()
        events = warming_events(f"{base}/metrics")
    remove_bench_sources()  # the bench database keeps exactly the listings it was built with
    phases = {
        "before": [o for o in traffic.outcomes if o.sent_at < asked],
        "stall": [o for o in traffic.outcomes if asked <= o.sent_at < released],
        "after": [o for o in traffic.outcomes if o.sent_at >= released],
    }
    warming = "off" if args.no_warming else "on"
    waited = granted - asked
    print(
        f"vector stall of {released - asked:.1f} s (the lock granted after {waited:.1f} s),"
        f" warming {warming}"
    )
    for name, outcomes in phases.items():
        print(f"  {name:7} {json.dumps(summary(outcomes))}")
    print(f"  warming events {json.dumps(events)}; queue high-water {high_water[0]}")
    print(
        f"  embedding catch-up {catch_up_s:.1f} s after the stall for {len(during)} listings "
        "ingested during it (target: within 10 % of a run with --no-warming)"
    )


def _drop_page_cache(pgdata: Path, *, everything: bool) -> str:
    """Empty the OS page cache of Postgres's files (of every file with `everything`,
    which needs root and slows every other process of the machine); which way it was."""
    if everything:
        try:
            subprocess.run(["sync"], check=True)
            Path("/proc/sys/vm/drop_caches").write_text("3\n")
            return "dropped whole (drop_caches)"
        except OSError as exc:
            print(f"drop_caches failed ({exc}): evicting Postgres's files instead")
    evicted = 0
    for path in pgdata.rglob("*"):
        if path.is_file():
            try:
                fd = os.open(path, os.O_RDONLY)
            except OSError:
                continue
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                evicted += 1
            finally:
                os.close(fd)
    return f"of Postgres's {evicted} files evicted (posix_fadvise DONTNEED)"


def cold_start(args: argparse.Namespace) -> None:
    from django.db import connections

    from searchsite import embedded
    from searchsite.embedded import postgres

    texts = build(args.listings)
    connections.close_all()
    pgdata = embedded.pgdata_dir(Path(os.environ["SEARCHSITE_RUN_DIR"]))
    postgres.stop(pgdata)
    cache = _drop_page_cache(pgdata, everything=args.drop_all_caches)
    started = time.monotonic()
    postgres.start(pgdata)
    if not args.no_warm_up:
        env = {**os.environ, "DEMO_DATA": "0"}
        bootstrap = [sys.executable, "manage.py", "bootstrap"]
        subprocess.run(bootstrap, cwd=REPO, env=env, check=True)
    with stack(warming=True) as base:
        # The readiness probe would warm the stack itself: the old behaviour took traffic
        # as soon as the process answered.
        probe = f"{base}/healthz/live" if args.no_warm_up else f"{base}/healthz/ready"
        while httpx.get(probe, timeout=5).status_code != 200:
            time.sleep(0.1)
        ready_s = time.monotonic() - started
        traffic = Traffic(f"{base}/api/search", args.rate, texts)
        asyncio.run(traffic.run(args.seconds))
    print(f"cold start, warm-up {'off' if args.no_warm_up else 'on'}; page cache {cache}")
    print(f"  ready {ready_s:.1f} s after Postgres started")
    print(
        f"  first {args.seconds:.0f} s at {args.rate:.0f}/s {json.dumps(summary(traffic.outcomes))}"
    )
    print("  target: hybrid_share >= 0.95")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    stall = commands.add_parser("vector-stall", help="a vector stall under distinct queries")
    stall.add_argument("--stall-s", type=float, default=30.0)
    stall.add_argument("--ingest-rate", type=int, default=20)
    stall.add_argument("--no-warming", action="store_true")
    cold = commands.add_parser("cold-start", help="the first seconds after a cold restart")
    cold.add_argument("--seconds", type=float, default=6.0)
    cold.add_argument("--no-warm-up", action="store_true")
    cold.add_argument(
        "--drop-all-caches",
        action="store_true",
        help="drop the whole OS page cache (root), not only Postgres's files",
    )
    for command in (stall, cold):
        command.add_argument("--listings", type=int, default=100_000)
        command.add_argument("--rate", type=float, default=25.0)
        command.add_argument(
            "--data-dir", type=Path, help="keep the database here and reuse it on later runs"
        )
    args = parser.parse_args()
    with running(args.data_dir):
        {"vector-stall": vector_stall, "cold-start": cold_start}[args.command](args)


if __name__ == "__main__":
    main()
