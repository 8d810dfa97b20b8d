"""Searches beside ingestion (issue 35, item 4): open-loop searches at fractions of the
capacity limit, quiet and beside each shape in which listings arrive, at 100,000 listings.

    .venv/bin/python bench/scenarios.py [--data-dir /tmp/bench100k] [--fractions 0.5,0.7]
        [--steps 3] [--step-seconds 10] [--trickle 5] [--burst 5000] [--feed-share 0.8]
        [--burst-limit-s 600] [--burst-workers 1] [--shapes trickle,burst,feed]
        [--limit SEARCHES_PER_S] [--out docs/img/ingest-scenarios.png]

In one run: the capacity limit and the ingestion ceiling (as bench/load.py measures them),
a web server and an embedding worker on the bench data, then at each fraction of the limit
`--steps` steps of searches each:
- quiet, before the first shape and again after each (once its listings are removed and one
  unmeasured step has let the removal settle);
- (a) beside a trickle of --trickle listings a second (bench/feed.py's stream);
- (b) beside a burst of --burst listings arriving at once, half as venue calendars (250
  events each) and half as RSS feeds (100 items each), each payload applied as its poll
  would be (bench/feed.py's `burst`); its steps go on until every vector is written or
  --burst-limit-s has passed;
- (c) beside the feed at --feed-share of the ingestion ceiling;
- (d) beside a generation built in the background over the active one's vectors
  (`manage.py generations build --copy`: the rows copied, then the HNSW index built
  concurrently), its steps going on until it is built; the generation is retired after.
  The model's part of a build (embedding every listing again) is left out: at 1,000,000
  listings it takes hours here, and the burst (b) measures what the model's work does.

The ingestion ceiling is measured only for the feed (c).

Per scenario: the p99 of its steps (the median step's and the worst's) and its move
against the quiet steps just before and just after it (the machine is shared, and its
quiet p99 drifts within a run by more than the 20 % measured here), the fallback share,
the lexical lag (a stream: the most its committed listings fell behind its arrivals, in
seconds of them; a burst: when the last was committed) and the vector lag (a burst: when
the last vector was written; a stream: how many listings waited for theirs at the end,
and how fast that grew).
Every ingested listing is removed again after its scenario. A table, a JSON file beside
--out, and a plot at --out.
"""

import argparse
import asyncio
import itertools
import json
import statistics
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import REPO, running

sys.path.insert(0, str(REPO))
from capacity import feed_skip, ingestion_capacity, limit_rate, query_pool
from feed import BURST_SOURCES, FEED_SOURCE, burst, feed_stream
from load import HEADER, Options, Step, steps
from stack import Groups, add_stack_arguments, prepare, serve, step_probes

# How often the watcher reads the ingest's progress, and what it reads: how many of the
# shape's records are committed, every SAMPLE_S, and, every WAITING_EVERY samples, of their
# listings among the sweep's candidates, those without a vector of the active generation
# for their text. The sweep's own count of every pending listing took 40-76 ms under a
# burst, twice a second; the candidates' count still takes about 25 ms with a burst's
# 5,000 waiting (pg_stat_statements, 2026-12-07): a slice of a core at normal priority, in
# the ingest's steps only, that a search arriving behind it waits for. Read every 5 s, it
# is a fifth of that; the vectors' lag is then known to within 5 s, and the lexical lag,
# a cheap count through the records' source index, to within one. While listings are being
# committed, it is counted every sample.
SAMPLE_S = 1.0
WAITING_EVERY = 5
# The sources' ids first (an ARRAY subquery, evaluated once): joined by name instead, the
# planner merge-joined the records' source index from its start up to the bench's sources
# (the newest, so the highest ids), 4-9 ms a count at 100,000 listings against 0.3.
_SOURCE_IDS = "ARRAY(SELECT id FROM ingestion_source WHERE name = ANY(%(sources)s))"
_COMMITTED = f"""
    SELECT count(*) FROM ingestion_sourcerecord r WHERE r.source_id = ANY({_SOURCE_IDS})
"""
_WAITING = f"""
    SELECT count(DISTINCT l.id) FROM ingestion_embedding_candidate c
    JOIN ingestion_listing l ON l.id = c.listing_id AND l.status = 'active'
    JOIN ingestion_sourcerecord r ON r.listing_id = l.id
    WHERE r.source_id = ANY({_SOURCE_IDS}) AND NOT EXISTS (
        SELECT 1 FROM ingestion_listing_embedding e
        WHERE e.generation_id = %(generation)s AND e.listing_id = l.id
          AND e.content_version >= l.content_version)
"""
SHAPES = ("trickle", "burst", "feed", "generation")


@dataclass
class Progress:
    """An ingest shape's progress, read from its own thread every SAMPLE_S: how many of
    its listings are committed (lexically searchable) and how many wait for a vector."""

    sources: Sequence[str]
    expected: Callable[[float], float]  # listings arrived by then, seconds from the start
    samples: list[tuple[float, int, int]] = field(default_factory=list)  # (s, committed, waiting)

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def __enter__(self) -> "Progress":
        self.started = time.monotonic()
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()

    def _watch(self) -> None:
        from django.db import connection

        from ingestion.embedding import DIMENSIONS, MODEL_NAME
        from ingestion.generations import ensure_active_generation

        generation = ensure_active_generation(MODEL_NAME, DIMENSIONS).pk
        params: dict[str, list[str] | int] = {
            "sources": list(self.sources),
            "generation": generation,
        }
        waiting, counted_at = 0, None  # the last count of waiting, and the committed then
        try:
            with connection.cursor() as cursor:
                for n in itertools.count():
                    if self._stop.wait(SAMPLE_S):
                        return
                    elapsed = time.monotonic() - self.started
                    cursor.execute(_COMMITTED, params)
                    (committed,) = cursor.fetchone()
                    # Counted again whenever listings were committed since: a count carried
                    # over is then only ever too high, never a premature "all embedded".
                    if n % WAITING_EVERY == 0 or committed != counted_at:
                        cursor.execute(_WAITING, params)
                        (waiting,), counted_at = cursor.fetchone(), committed
                    self.samples.append((elapsed, committed, waiting))
        finally:
            connection.close()

    def done(self, count: int) -> bool:
        """Every one of `count` listings committed and with its vector."""
        return bool(self.samples) and self.samples[-1][1] >= count and self.samples[-1][2] == 0

    def lexical_lag_s(self, rate: float) -> float:
        """The most the committed listings fell behind those arrived, in seconds of
        arrivals at `rate`."""
        behind = (self.expected(s) - committed for s, committed, _ in self.samples)
        return max(0.0, *behind) / rate

    def arrival(self, count: int, since: float = 0.0) -> tuple[float | None, float | None]:
        """Seconds from `since` until `count` listings were committed, and until, with
        them committed, none waited for a vector (None: not seen)."""
        after = [(s - since, c, w) for s, c, w in self.samples if s >= since]
        lexical = next((s for s, c, _ in after if c >= count), None)
        vectors = next((s for s, c, w in after if c >= count and w == 0), None)
        return lexical, vectors


@dataclass
class Scenario:
    fraction: float
    shape: str  # quiet, trickle, burst, feed, generation
    steps: list[Step]
    ingest: dict[str, Any]
    around: list[Step] = field(default_factory=list)  # the quiet steps before and after it

    @property
    def p99s(self) -> list[float]:
        return [step.figures.latency_ms["p99"] for step in self.steps]

    def figures(self) -> dict[str, Any]:
        p99 = statistics.median(self.p99s)
        shares = [step.figures.fallback_share for step in self.steps]
        quiet = statistics.median(
            step.figures.latency_ms["p99"] for step in self.around or self.steps
        )
        return {
            "fraction": self.fraction,
            "shape": self.shape,
            "rate": round(statistics.mean(s.figures.offered_rate for s in self.steps), 1),
            "p99_ms": round(p99, 1),
            "worst_p99_ms": round(max(self.p99s), 1),
            "quiet_around_ms": round(quiet, 1),
            "p99_move": round(p99 / quiet - 1, 3),
            "fallback_share": round(statistics.mean(shares), 4),
            "worst_fallback_share": round(max(shares), 4),
            **self.ingest,
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fractions", default="0.5,0.7", help="of the capacity limit")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--step-seconds", type=float, default=10.0)
    parser.add_argument("--trickle", type=float, default=5.0, help="listings a second")
    parser.add_argument("--burst", type=int, default=5000, help="listings at once")
    parser.add_argument("--burst-limit-s", type=float, default=600.0)
    parser.add_argument("--burst-workers", type=int, default=1, help="processes applying it")
    parser.add_argument("--feed-share", type=float, default=0.8, help="of the ceiling")
    parser.add_argument("--shapes", default=",".join(SHAPES), help="quiet is always run")
    parser.add_argument("--fallback-objective", type=float, default=0.10)
    parser.add_argument("--capacity-queries", type=int, default=300)
    parser.add_argument("--limit", type=float, help="searches/s (else measured first)")
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "img" / "ingest-scenarios.png")
    add_stack_arguments(parser)
    args = parser.parse_args()
    with running(args.data_dir), ExitStack() as stack:
        from django.conf import settings
        from django.db import connection

        postmaster = prepare(args.data_dir)
        options = Options(
            args.step_seconds, args.timeout_s, 1024, False, settings.SEARCH_DEADLINE_MS,
            args.fallback_objective,
        )  # fmt: skip
        pool = query_pool(60_000)
        limit = limit_rate(args.limit, pool, args.capacity_queries, postmaster)
        shapes = args.shapes.split(",")
        ceiling = ingestion_capacity(args.ingest_records) if "feed" in shapes else None
        connection.close()
        print(f"capacity limit {limit:.1f} searches/s; ingestion ceiling {ceiling} listings/s")
        base_url, groups = serve(stack, args.url, args.data_dir / "scenarios-web.log", postmaster)
        run = Runner(base_url, groups, options, itertools.cycle(pool), args)
        print(HEADER, flush=True)
        run.steps("warm-up", limit * 0.25, 1)
        found: list[Scenario] = []
        for fraction in (float(part) for part in args.fractions.split(",")):
            rate = fraction * limit
            before = run.quiet(fraction, rate, settle=False)
            found.append(before)
            for shape in (name for name in SHAPES if name in shapes):
                if shape == "feed" and ceiling is None:
                    continue
                scenario = run.shape(shape, fraction, rate, ceiling)
                after = run.quiet(fraction, rate, settle=True)
                scenario.around = before.steps + after.steps
                found += [scenario, after]
                before = after
    report(found, limit, ceiling, args)


class Runner:
    def __init__(
        self,
        base_url: str,
        groups: Groups,
        options: Options,
        queries: Iterator[str],
        args: argparse.Namespace,
    ) -> None:
        self.base_url, self.groups, self.options = base_url, groups, options
        self.queries, self.args = queries, args

    def steps(
        self,
        name: str,
        rate: float,
        count: int | None = None,
        until: Callable[[], bool] | None = None,
    ) -> list[Step]:
        """`count` steps at `rate` (--steps by default); with `until`, more after them
        until it holds (bounded by --burst-limit-s)."""

        async def measured() -> list[Step]:
            async with step_probes(self.base_url) as probes:
                done: list[Step] = []
                started = time.monotonic()
                for number in itertools.count():
                    enough = number >= (count or self.args.steps)
                    if enough and (until is None or until()):
                        break
                    if until is not None and time.monotonic() - started > self.args.burst_limit_s:
                        break
                    one = [(f"{name}.{number}", rate)]
                    done += await steps(
                        self.base_url, name, one, self.queries, self.options, self.groups, probes
                    )
                return done

        return asyncio.run(measured())

    def quiet(self, fraction: float, rate: float, *, settle: bool) -> Scenario:
        """Quiet steps; after a shape (`settle`), one step first that is not counted: the
        bench removes the shape's listings and vacuums after them, and a search's first
        step after that was the slowest of a run's quiet steps (docs/reliability.md)."""
        if settle:
            self.steps(f"settle@{fraction:g}", rate, 1)
        return Scenario(fraction, "quiet", self.steps(f"quiet@{fraction:g}", rate), {})

    def shape(self, shape: str, fraction: float, rate: float, ceiling: float | None) -> Scenario:
        if shape == "trickle":
            return self.stream(fraction, rate, shape, self.args.trickle)
        if shape == "feed":
            assert ceiling is not None
            return self.stream(fraction, rate, shape, self.args.feed_share * ceiling)
        if shape == "burst":
            return self.burst(fraction, rate)
        return self.generation(fraction, rate)

    def stream(self, fraction: float, rate: float, shape: str, listings_per_s: float) -> Scenario:
        seconds = self.args.steps * (self.args.step_seconds + self.args.timeout_s) + 30
        skip = feed_skip(self.args.ingest_records)
        with feed_stream(listings_per_s, seconds, skip) as feed:
            progress = Progress([FEED_SOURCE], lambda s: listings_per_s * s)
            with progress:
                found = self.steps(f"{shape}@{fraction:g}", rate)
        span = progress.samples[-1][0] - progress.samples[0][0] if progress.samples else 1.0
        waiting = [w for _, _, w in progress.samples] or [0]
        ingest = {
            "listings_per_s": round(listings_per_s, 1),
            "achieved_per_s": round(feed.rate, 1),
            "lexical_lag_s": round(progress.lexical_lag_s(listings_per_s), 1),
            "waiting_at_end": waiting[-1],
            "waiting_growth_per_s": round((waiting[-1] - waiting[0]) / span, 1),
        }
        return Scenario(fraction, shape, found, ingest)

    def generation(self, fraction: float, rate: float) -> Scenario:
        from django.db import connection

        from ingestion import generations

        active = generations.active_generation()
        assert active is not None
        built: list[Any] = []

        def build() -> None:
            started = time.monotonic()
            try:
                built.append(generations.copy_build(active))
                built.append(time.monotonic() - started)
            finally:
                connection.close()  # this thread's own

        builder = threading.Thread(target=build)
        builder.start()
        found = self.steps(f"generation@{fraction:g}", rate, until=lambda: not builder.is_alive())
        builder.join()
        generation, seconds = built
        generations.retire(generation)
        with connection.cursor() as cursor:
            # Its 100,000 vectors are dead rows now: vacuumed here, as bench/feed.py does after
            # its listings, not by autovacuum during the next scenario's steps.
            cursor.execute("VACUUM (ANALYZE) ingestion_listing_embedding")
        return Scenario(
            fraction,
            "generation",
            found,
            {"listings": generations.progress(active)[1], "build_s": round(seconds, 1)},
        )

    def burst(self, fraction: float, rate: float) -> Scenario:
        count = self.args.burst
        with burst(count, feed_skip(self.args.ingest_records), self.args.burst_workers):
            progress = Progress(list(BURST_SOURCES.values()), lambda _: count)
            with progress:
                found = self.steps(f"burst@{fraction:g}", rate, until=lambda: progress.done(count))
        lexical, vectors = progress.arrival(count)
        ingest = {
            "listings": count,
            "lexical_s": None if lexical is None else round(lexical, 1),
            "vectors_s": None if vectors is None else round(vectors, 1),
            "waiting_at_end": progress.samples[-1][2] if progress.samples else None,
            "waiting": [(round(s, 1), w) for s, _, w in progress.samples],
        }
        return Scenario(fraction, "burst", found, ingest)


def report(
    found: Sequence[Scenario], limit: float, ceiling: float | None, args: argparse.Namespace
) -> None:
    rows = []
    for fraction in dict.fromkeys(s.fraction for s in found):
        mine = [s for s in found if s.fraction == fraction]
        quiet = [step for s in mine if s.shape == "quiet" for step in s.steps]
        rows.append(Scenario(fraction, "quiet", quiet, {}).figures())
        rows += [s.figures() for s in mine if s.shape != "quiet"]
    print()
    print(
        f"{'rate':>10} {'shape':<8} {'p99':>7} {'worst':>7} {'quiet':>7} {'move':>7}"
        f" {'fallback':>9} {'lexical lag':>12} {'vector lag':>24}"
    )
    for row in rows:
        if row["shape"] == "burst":
            lexical = f"{row['lexical_s']} s"
            vectors = (
                f"{row['vectors_s']} s"
                if row["vectors_s"] is not None
                else (f"{row['waiting_at_end']} waiting")
            )
        elif row["shape"] == "quiet":
            lexical = vectors = "-"
        elif row["shape"] == "generation":
            lexical, vectors = "-", f"built in {row['build_s']} s"
        else:
            lexical = f"{row['lexical_lag_s']} s"
            vectors = f"{row['waiting_at_end']} waiting, {row['waiting_growth_per_s']:+}/s"
        print(
            f"{row['fraction']:>4g} {row['rate']:>5.1f} {row['shape']:<8} {row['p99_ms']:7.1f}"
            f" {row['worst_p99_ms']:7.1f} {row['quiet_around_ms']:7.1f} {row['p99_move']:+7.0%}"
            f" {row['fallback_share']:9.1%}"
            f" {lexical:>12} {vectors:>24}"
        )
    document = {
        "command": " ".join(sys.argv),
        "capacity_limit": round(limit, 1),
        "ingestion_ceiling": None if ceiling is None else round(ceiling, 1),
        "scenarios": rows,
        "steps": [step.as_json() for s in found for step in s.steps],
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".json").write_text(json.dumps(document, indent=1))
    plot(rows, args.out)
    print(f"wrote {args.out} and {args.out.with_suffix('.json')}")


def plot(rows: Sequence[dict[str, Any]], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (p99, waiting) = plt.subplots(1, 2, figsize=(11, 4.5))
    shapes = [shape for shape in ("quiet", *SHAPES) if any(r["shape"] == shape for r in rows)]
    fractions = sorted({row["fraction"] for row in rows})
    width = 0.8 / len(fractions)
    for n, fraction in enumerate(fractions):
        by_shape = {row["shape"]: row for row in rows if row["fraction"] == fraction}
        xs = [i + n * width for i in range(len(shapes))]
        heights = [by_shape[shape]["p99_ms"] if shape in by_shape else 0 for shape in shapes]
        worst = [by_shape[shape]["worst_p99_ms"] if shape in by_shape else 0 for shape in shapes]
        bars = p99.bar(xs, heights, width, label=f"{fraction:g} x capacity: median step")
        p99.scatter(xs, worst, marker="_", s=200, color=bars.patches[0].get_facecolor(),
                    label=f"{fraction:g} x capacity: worst step")  # fmt: skip
        targets = [1.2 * by_shape[shape]["quiet_around_ms"] if shape in by_shape else 0
                   for shape in shapes]  # fmt: skip
        p99.hlines(targets, [x - width / 2 for x in xs], [x + width / 2 for x in xs],
                   linestyles=":", colors="black", zorder=3)  # fmt: skip
    p99.set_xticks([i + width * (len(fractions) - 1) / 2 for i in range(len(shapes))], shapes)
    p99.set_ylabel("search p99, ms (dotted: the quiet steps around it + 20 %)")
    p99.legend(fontsize="small")
    p99.grid(axis="y", alpha=0.3)
    for row in rows:
        if row["shape"] == "burst":
            points = row["waiting"]
            waiting.plot([s for s, _ in points], [w for _, w in points],
                         label=f"{row['fraction']:g} x capacity")  # fmt: skip
    waiting.axvline(300, color="red", linestyle="-.", label="5 minutes")
    waiting.set_xlabel("seconds from the burst's arrival")
    waiting.set_ylabel("burst listings waiting for a vector")
    waiting.legend(fontsize="small")
    waiting.grid(alpha=0.3)
    figure.tight_layout()
    figure.savefig(out, dpi=100)


if __name__ == "__main__":
    main()
