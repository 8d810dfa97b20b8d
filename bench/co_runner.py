"""Which part of the vector work moves the searches' tail (issue 35): searches at one
fixed rate, quiet steps alternated with steps beside a co-runner, each pair compared.

    .venv/bin/python bench/co_runner.py [--searches 35] [--pairs 6] [--step-seconds 10]
        [--shares 0.25,0.5,1] [--classes idle,niced] [--writes 35,70] [--write-batch 128]
        [--sweep 5000] [--data-dir /tmp/bench100k]

The co-runners, one part of the sweep each, then the sweep itself:
- **the model alone** (`--classes`, `--shares`): a process that embeds listing texts with
  the documents' model, as the embedding worker does (one onnxruntime thread, slices of
  16 texts), resting after each slice for its time x (1 - share) / share, so that it asks
  for `share` of a core, as the pacer's share does; in the kernel's SCHED_IDLE class
  (`idle`, as the sweep's model slices run, ingestion/idle_cores.py) or the normal class
  at the embedding worker's niceness (`niced`, WORKER_NICE 10, as a starved slice runs).
  It touches no database: what it moves is CPU, caches and memory shared with searches.
- **the writes alone** (`--writes`): HNSW inserts into the active generation's index at
  that many vectors a second, `--write-batch` a transaction (the sweep stores a claim of
  128), each rolled back so that the searches' answers stay as they were.
- **the sweep** (`--sweep N`): a burst of N listings applied with the embedding worker
  stopped (SIGSTOP), then quiet steps with it stopped alternated with steps with it
  running, until every vector is written.

Printed per co-runner: its cores and rate, and its steps' median p99 over the quiet
steps', with a 95 % interval from resampling the pairs (as bench/feed_probe.py's --pairs).
If a SCHED_IDLE co-runner, which searches preempt at once, still moves their p99, no CPU
priority keeps that move away: only less work beside them, or the work on another host.
"""

import argparse
import itertools
import multiprocessing
import os
import statistics
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from multiprocessing.sharedctypes import Synchronized
from multiprocessing.synchronize import Event
from pathlib import Path

import psutil
import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import REPO, running

sys.path.insert(0, str(REPO))
from capacity import feed_skip
from feed import BURST_SOURCES, burst_sources, deliver_burst, remove_bench_sources
from feed_probe import pairs_report
from load import HEADER, Step, fixed_rate
from scenarios import Progress
from stack import Groups, add_stack_arguments, prepare, process_tree, serve

TEXTS = 512
MAX_SWEEP_PAIRS = 60  # 10 minutes of sweep steps: a burst of 5,000 takes 2 to 5


def co_embed(
    texts: Sequence[str],
    share: float,
    klass: str,
    slice_size: int,
    nice: int,
    ready: Event,
    stop: Event,
    embedded: "Synchronized[int]",
) -> None:
    """Embed `texts` round and round, `slice_size` at a time (the sweep's EMBED_PACE_SLICE),
    `share` of the time, in `klass` (`nice`: the embedding worker's niceness), until
    `stop`. Both come from the parent: a spawned process has no Django settings."""
    os.environ["EMBEDDER_THREADS"] = "1"
    from ingestion.embedding import get_embedder

    if klass == "idle":
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    else:
        os.nice(nice)
    embedder = get_embedder()
    embedder.embed_documents(texts[:slice_size])  # the session made, before the step starts
    ready.set()
    for start in itertools.cycle(range(0, len(texts), slice_size)):
        began = time.monotonic()
        embedder.embed_documents(texts[start : start + slice_size])
        with embedded.get_lock():
            embedded.value += slice_size
        took = time.monotonic() - began
        if stop.wait(took * (1 - share) / share):
            return


def co_write(
    conninfo: str,
    generation: int,
    ids: Sequence[int],
    per_s: float,
    batch: int,
    ready: Event,
    stop: Event,
    written: "Synchronized[int]",
) -> None:
    """HNSW writes into the active generation's index at `per_s` vectors a second, `batch`
    a transaction as the sweep stores a claim: each listing's vector nudged (a changed vector
    is an index insert, never a HOT update), then rolled back, so the searches' answers and
    the bench data stay as they were while the index's pages are written and locked."""
    from ingestion.embedding import DIMENSIONS

    nudge = "[" + ",".join(["0.01"] + ["0"] * (DIMENSIONS - 1)) + "]"
    with psycopg.connect(conninfo, autocommit=False) as conn:
        ready.set()
        batches = itertools.cycle(range(0, len(ids), batch))
        due = time.monotonic()
        while not stop.wait(max(0.0, due - time.monotonic())):
            start = next(batches)
            conn.execute(
                "UPDATE ingestion_listing_embedding SET embedding = embedding + %s::vector"
                " WHERE generation_id = %s AND listing_id = ANY(%s)",
                [nudge, generation, list(ids[start : start + batch])],
            )
            conn.rollback()
            with written.get_lock():
                written.value += batch
            due += batch / per_s


@contextmanager
def co_runner(
    target: Callable[..., None], *args: object
) -> Iterator[tuple[psutil.Process, "Synchronized[int]"]]:
    """The co-runner's process, ready (its model loaded or its connection open), and its
    count of texts embedded or vectors written."""
    context = multiprocessing.get_context("spawn")  # no Django or threads inherited
    ready, stop, done = context.Event(), context.Event(), context.Value("q", 0)
    process = context.Process(target=target, args=(*args, ready, stop, done))
    process.start()
    try:
        if not ready.wait(120):
            raise RuntimeError("the co-runner was not ready within 120 s")
        yield psutil.Process(process.pid), done
    finally:
        stop.set()
        process.join(30)
        if process.is_alive():
            process.kill()
            process.join()


def bench_listings() -> tuple[list[int], list[str]]:
    """Ids and texts of listings with a vector of the active generation, texts as the
    sweep embeds them (title and description)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT l.id, l.title || '. ' || l.description FROM ingestion_listing l"
            " JOIN ingestion_listing_embedding e ON e.listing_id = l.id"
            " JOIN ingestion_indexgeneration g ON g.id = e.generation_id"
            " WHERE g.state = 'active' AND l.status = 'active' ORDER BY l.id LIMIT %s",
            [TEXTS],
        )
        rows = cursor.fetchall()
    return [listing_id for listing_id, _ in rows], [text for _, text in rows]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--searches", type=float, default=35.0, help="a second")
    parser.add_argument("--pairs", type=int, default=6, help="per co-runner")
    parser.add_argument("--step-seconds", type=float, default=10.0)
    parser.add_argument("--shares", default="0.25,0.5,1", help="of a core the model asks")
    parser.add_argument("--classes", default="idle,niced", help="the model's: idle, niced")
    parser.add_argument("--writes", default="", help="vectors a second, e.g. 35,70")
    parser.add_argument("--write-batch", type=int, default=128, help="vectors a transaction")
    parser.add_argument("--sweep", type=int, default=0, help="a burst's listings, e.g. 5000")
    add_stack_arguments(parser)
    args = parser.parse_args()
    shares = [float(s) for s in args.shares.split(",") if s]
    classes = [c for c in args.classes.split(",") if c]
    writes = [float(w) for w in args.writes.split(",") if w]
    if not all(0 < s <= 1 for s in shares) or not set(classes) <= {"idle", "niced"}:
        parser.error("--shares within (0, 1], --classes of idle and niced")
    if not all(0 < w <= 1000 for w in writes) or not 0 < args.write_batch <= TEXTS:
        parser.error(f"--writes from 1 to 1,000 vectors a second, --write-batch to {TEXTS}")
    if not 0 < args.pairs <= 30 or not 0 < args.searches <= 500:
        parser.error("--pairs from 1 to 30 and --searches up to 500")
    with running(args.data_dir), ExitStack() as stack:
        from django.conf import settings
        from django.db import connection

        from ingestion.embedding import DIMENSIONS, MODEL_NAME
        from ingestion.generations import ensure_active_generation
        from retrieval.pg.pool import conninfo
        from searchsite.supervisor import BACKGROUND_NICE

        postmaster = prepare(args.data_dir)
        ids, texts = bench_listings()
        generation = ensure_active_generation(MODEL_NAME, DIMENSIONS).pk
        connection.close()
        log = args.data_dir / "co-runner-web.log"
        base_url, groups = serve(stack, args.url, log, postmaster)
        fixed = fixed_rate(base_url, args.searches, args.step_seconds, args.timeout_s)

        def run(ramp: str, label: str, during: Groups) -> Step:
            (step,) = fixed(ramp, [label], during)
            return step

        model_pace = (settings.EMBED_PACE_SLICE, BACKGROUND_NICE)

        co_runners: list[tuple[str, str, Callable[..., None], tuple[object, ...]]] = [
            (f"{klass}@{share:g}", "texts", co_embed, (texts, share, klass, *model_pace))
            for klass, share in itertools.product(classes, shares)
        ]
        co_runners += [
            (
                f"writes@{per_s:g}x{args.write_batch}",
                "vectors",
                co_write,
                (conninfo(), generation, ids, per_s, args.write_batch),
            )
            for per_s in writes
        ]
        print(HEADER, flush=True)
        run("warm-up", "warm", groups)
        found = []
        for name, unit, target, co_args in co_runners:
            pairs, used, rates = [], [], []
            for n in range(args.pairs):
                quiet = run("quiet", f"q{n}", groups)
                with co_runner(target, *co_args) as (process, done):
                    before = done.value
                    beside = run(name, f"c{n}", {**groups, "co": [process]})
                    rates.append((done.value - before) / args.step_seconds)
                pairs.append((quiet.figures.latency_ms["p99"], beside.figures.latency_ms["p99"]))
                used.append(beside.cores["co"])
            found.append(
                f"{name}: the co-runner used {statistics.median(used):.2f} cores,"
                f" {statistics.median(rates):.1f} {unit}/s; " + pairs_report(pairs, "the co-runner")
            )
            print(found[-1], flush=True)
        if args.sweep:
            found.append(sweep_pairs(run, groups, args.sweep, feed_skip(args.ingest_records)))
        print("\n".join(found))


def sweep_pairs(
    run: Callable[[str, str, Groups], Step], groups: Groups, count: int, skip: int
) -> str:
    """The embedding worker's own sweep as the co-runner: a burst of `count` listings
    applied while the worker is stopped (SIGSTOP), then quiet steps with it stopped
    alternated with steps with it running, until no listing waits for its vector. Stopped
    between claims or inside one, its transaction waits open; nothing else writes."""
    workers = [p for root in groups["worker"] for p in process_tree(root)]

    def sweeping(on: bool) -> None:
        for process in workers:
            (process.resume if on else process.suspend)()

    sweeping(False)
    sources = burst_sources()
    pairs, used = [], []
    try:
        deliver_burst(sources["calendar"].pk, sources["feed"].pk, count, skip)
        with Progress(list(BURST_SOURCES.values()), lambda _: count) as progress:
            for n in range(MAX_SWEEP_PAIRS):
                quiet = run("quiet", f"q{n}", groups)
                sweeping(True)
                beside = run("sweep", f"s{n}", groups)
                sweeping(False)
                pairs.append((quiet.figures.latency_ms["p99"], beside.figures.latency_ms["p99"]))
                used.append(beside.cores["worker"])
                if progress.done(count):
                    break
    finally:
        sweeping(True)
        remove_bench_sources()
    return (
        f"the sweep of a burst of {count}: the worker used {statistics.median(used):.2f}"
        f" cores in {len(pairs)} steps; " + pairs_report(pairs, "the sweep")
    )


if __name__ == "__main__":
    main()
