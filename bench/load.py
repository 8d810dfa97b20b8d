"""Open-loop load curve at 100,000 listings (issue 12, items 1 and 2), beside the capacity
limit and the ingestion ceiling measured in the same run.

    .venv/bin/python bench/load.py [--data-dir /tmp/bench100k] [--url URL]
        [--step-seconds 8] [--multiples 0.25,0.5,0.6,0.7,0.8,0.9,1,1.5,2,3,4]
        [--out docs/img/load-curve.png]

In order, in one run:
1. the capacity limit (bench/capacity.py: the API's search and hydration back to back in
   this process, no HTTP) and the ingestion ceiling (end to end, one process);
2. a web server and an embedding worker on the bench data (or, with --url, the stack
   already serving it on loopback, e.g. `make run`'s);
3. a ramp of fixed-rate steps (each a multiple of the capacity limit), quiet, then the
   same ramp while a feed stream is ingested at --ingest-share of the ceiling;
4. per ramp, the sustainable rate: the fastest step before the first whose p99 exceeds the
   latency objective (SEARCH_DEADLINE_MS) or whose fallback share (requests not answered
   `hybrid`) exceeds --fallback-objective; then steps at 2x and 4x it (item 2's overload
   targets);
5. a table, a JSON file beside --out, and the curve as a PNG at --out.

Every request carries a query no earlier request of the run carried until the pool of
distinct title-word queries wraps; the pool is larger than the web process's query cache,
so each search embeds its query, as the capacity limit's do.
"""

import argparse
import asyncio
import itertools
import json
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import REPO, running

sys.path.insert(0, str(REPO))  # openloop's loopback guard is the sweep's (evaluation/)
import psutil
from capacity import feed_skip, ingestion_capacity, query_pool, search_capacity
from feed import feed_stream
from openloop import Connections, Probe, Schedule, StepFigures, run, summarise
from stack import (
    Groups,
    add_stack_arguments,
    cores_used,
    cpu_seconds,
    prepare,
    serve,
    step_probes,
)

SEARCH_PATH = "/api/search"
# Tenths near the knee, which sat between 0.5 and 0.75: a coarser ramp
# reports the step below it, however close it came.
DEFAULT_MULTIPLES = "0.25,0.5,0.6,0.7,0.8,0.9,1,1.5,2,3,4"
QUERY_CACHE = 4096  # the web process's query-embedding cache (ingestion/embedding)


@dataclass(frozen=True)
class Options:
    step_s: float
    timeout_s: float
    max_connections: int
    poisson: bool
    objective_ms: float
    fallback_objective: float
    readers: int = 0  # distinct reader cookies the requests cycle through (openloop.py)


@dataclass(frozen=True)
class Step:
    ramp: str  # "quiet" or "ingesting"
    label: str  # the step's multiple of the capacity limit, or of the sustainable rate
    figures: StepFigures
    cores: dict[str, float]  # CPU each group of processes used, in cores

    def passes(self, options: Options) -> bool:
        return (
            self.figures.latency_ms["p99"] <= options.objective_ms
            and self.figures.fallback_share <= options.fallback_objective
        )

    def as_json(self) -> dict[str, Any]:
        figures = asdict(self.figures) | {"fallback_share": self.figures.fallback_share}
        return {"ramp": self.ramp, "label": self.label, "cores": self.cores, **figures}


def fixed_rate(
    base_url: str, rate: float, step_s: float, timeout_s: float
) -> Callable[[str, Sequence[str], Groups], list[Step]]:
    """Steps of searches at one fixed `rate` (bench/feed_probe.py, bench/co_runner.py),
    unlike the ramp's fractions of a limit, so that runs compare step for step:
    `run(ramp, labels, groups)` measures one step per label, `groups`' cores with it."""
    from django.conf import settings

    options = Options(step_s, timeout_s, 1024, False, settings.SEARCH_DEADLINE_MS, 0.10)
    queries = itertools.cycle(query_pool(60_000))

    def run(ramp: str, labels: Sequence[str], groups: Groups) -> list[Step]:
        async def measured() -> list[Step]:
            async with step_probes(base_url) as probes:
                rates = [(label, rate) for label in labels]
                return await steps(base_url, ramp, rates, queries, options, groups, probes)

        return asyncio.run(measured())

    return run


async def steps(
    base_url: str,
    ramp: str,
    rates: Sequence[tuple[str, float]],
    queries: Iterator[str],
    options: Options,
    groups: Groups,
    probes: Sequence[Probe],
) -> list[Step]:
    connections = Connections(base_url, options.max_connections, options.readers)
    done = []
    try:
        for label, rate in rates:
            make = Schedule.poisson if options.poisson else Schedule.fixed
            schedule = make(rate, options.step_s)
            before, own, started = cpu_seconds(groups), time.process_time(), time.monotonic()
            stolen = psutil.cpu_times().steal
            result = await run(
                connections, SEARCH_PATH, queries, schedule, options.timeout_s, probes
            )
            seconds = time.monotonic() - started
            cores = cores_used(before, cpu_seconds(groups), seconds)
            # This process alone: the web server and the worker are its children.
            cores["generator"] = round((time.process_time() - own) / seconds, 3)
            # What the host ran elsewhere while our processes were ready to run (a shared
            # machine's neighbours): steps it disturbed stall with cores to spare.
            cores["steal"] = round((psutil.cpu_times().steal - stolen) / seconds, 3)
            step = Step(ramp, label, summarise(result), cores)
            print(row(step), flush=True)
            done.append(step)
    finally:
        await connections.close()
    return done


def sustainable(ramp: Sequence[Step], options: Options) -> Step | None:
    """The fastest step before the first that fails (None: even the slowest failed)."""
    passing = list(itertools.takewhile(lambda step: step.passes(options), ramp))
    return passing[-1] if passing else None


def overload_checks(step: Step, sustainable_rate: float, deadline_ms: float) -> dict[str, Any]:
    """Item 2's targets at a multiple of the sustainable rate."""
    figures = step.figures
    good = figures.completed_rate / sustainable_rate
    within = figures.latency_ms["max"] <= deadline_ms + 50 and figures.no_response == 0
    return {
        "label": step.label,
        "good_share_of_sustainable": round(good, 3),
        "on_time": within,
        "slowest_ms": figures.slowest_ms,
    }


HEADER = (
    f"{'ramp':<10}{'step':>8}{'offered':>9}{'done/s':>8}{'p50':>8}{'p95':>8}{'p99':>8}"
    f"{'max':>9}{'fallbk':>8}{'503':>6}{'5xx':>5}{'nores':>6}{'L=λW':>7}{'inflt':>7}"
    f"{'srvvec':>7}{'pgact':>6}{'poolms':>7}{'shed':>6}{'embpend':>8}"
    "  cores web/postgres/worker/valkey/generator/steal"
)
CORE_COLUMNS = ("web", "postgres", "worker", "valkey", "generator", "steal")


def row(step: Step) -> str:
    f, lat = step.figures, step.figures.latency_ms
    cores = "/".join(f"{step.cores.get(name, 0):.2f}" for name in CORE_COLUMNS)
    return (
        f"{step.ramp:<10}{step.label:>8}{f.offered_rate:9.1f}{f.completed_rate:8.1f}"
        f"{lat['p50']:8.1f}{lat['p95']:8.1f}{lat['p99']:8.1f}{lat['max']:9.1f}"
        f"{f.fallback_share:8.1%}{f.status_503:6d}{f.status_5xx:5d}{f.no_response:6d}"
        f"{f.in_flight_littles_law:7.1f}{f.in_flight_sampled:7.1f}"
        f"{f.probes.get('server_in_flight_vector', 0):7.1f}{f.probes.get('pg_active', 0):6.1f}"
        f"{pool_wait_ms(f):7.1f}{f.probes.get('shed_at_door_total', 0):6.0f}"
        f"{f.probes.get('embeddings_pending', 0):8.0f}  {cores}"
    )


def pool_wait_ms(figures: StepFigures) -> float:
    """The step's mean wait for a pooled search connection (0 where none was timed)."""
    waits = figures.probes.get("pool_waits_total", 0)
    return 1000 * figures.probes.get("pool_wait_seconds_total", 0) / waits if waits else 0.0


def plot(
    ramps: dict[str, list[Step]],
    overloads: dict[str, list[Step]],
    limit: float,
    sustained: dict[str, float],
    options: Options,
    out: Path,
) -> None:
    import matplotlib
    import matplotlib.ticker

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (done, p99, fallback) = plt.subplots(3, 1, figsize=(8, 10), sharex=True)
    for ramp, style, marker in (("quiet", "o-", "x"), ("ingesting", "s--", "+")):
        # The ramp's steps as a line; the 2x and 4x steps after it as points of their own
        # (in the line they made it turn back on itself).
        for points, how, label in (
            (ramps.get(ramp, []), style, ramp),
            (overloads.get(ramp, []), marker, f"{ramp}: 2x, 4x sustainable"),
        ):
            if not points:
                continue
            points = sorted(points, key=lambda step: step.figures.offered_rate)
            offered = [step.figures.offered_rate for step in points]
            done.plot(offered, [step.figures.completed_rate for step in points], how, label=label)
            p99.plot(offered, [step.figures.latency_ms["p99"] for step in points], how, label=label)
            fallback.plot(
                offered, [step.figures.fallback_share for step in points], how, label=label
            )
        if ramp in sustained:
            for axes in (done, p99, fallback):
                axes.axvline(sustained[ramp], linestyle=":", color="grey")
    top = max(
        (s.figures.offered_rate for steps in [*ramps.values(), *overloads.values()] for s in steps),
        default=1,
    )
    done.plot([0, top], [0, top], color="lightgrey", label="completed = offered")
    done.axvline(limit, color="red", linestyle="-.", label=f"capacity limit {limit:.0f}/s")
    done.set_ylabel("completed 200s per s")
    p99.axhline(options.objective_ms, color="red", linestyle="-.", label="objective")
    p99.set_yscale("log")
    p99.set_ylabel("p99 ms (from intended send)")
    fallback.axhline(options.fallback_objective, color="red", linestyle="-.", label="objective")
    fallback.set_ylim(0, 1.02)
    fallback.yaxis.set_major_formatter(matplotlib.ticker.PercentFormatter(1.0))
    fallback.set_ylabel("fallback share (not hybrid)")
    fallback.set_xlabel("offered searches per s (dotted: sustainable rate of each ramp)")
    for axes in (done, p99, fallback):
        axes.legend(loc="best", fontsize="small")
        axes.grid(alpha=0.3)
    figure.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(out, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--step-seconds", type=float, default=8.0)
    parser.add_argument("--multiples", default=DEFAULT_MULTIPLES, help="of the capacity limit")
    parser.add_argument("--capacity-queries", type=int, default=300)
    parser.add_argument("--ingest-share", type=float, default=0.8, help="of the ceiling")
    # The runbook's objective, which the alert rules page on (docs/runbook.md).
    parser.add_argument("--fallback-objective", type=float, default=0.10)
    parser.add_argument("--max-connections", type=int, default=1024)
    parser.add_argument("--poisson", action="store_true", help="Poisson arrivals, not fixed")
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "img" / "load-curve.png")
    add_stack_arguments(parser)
    args = parser.parse_args()
    multiples = [float(part) for part in args.multiples.split(",")]
    with running(args.data_dir), ExitStack() as stack:
        from django.conf import settings
        from django.db import connection

        from retrieval.service import vector_breaker

        postmaster = prepare(args.data_dir)
        options = Options(
            args.step_seconds,
            args.timeout_s,
            args.max_connections,
            args.poisson,
            settings.SEARCH_DEADLINE_MS,
            args.fallback_objective,
        )

        # Far more than the web's query cache holds: cycled, the pool never hits it.
        pool = query_pool(60_000)
        capacity = search_capacity(
            pool[-args.capacity_queries :],
            pool[-args.capacity_queries - 50 : -args.capacity_queries],
            postmaster,
        )
        limit = capacity.limit_rate
        ceiling = ingestion_capacity(args.ingest_records)
        connection.close()
        cores = psutil.cpu_count() or 1
        print(
            f"capacity limit {limit:.1f} searches/s ({json.dumps(capacity.as_json(cores))}); "
            f"ingestion ceiling {ceiling:.1f} listings/s; {len(pool)} distinct queries"
            f"{'' if len(pool) > QUERY_CACHE else ' (fewer than the query cache: repeats hit it)'}"
        )
        base_url, groups = serve(stack, args.url, args.data_dir / "load-web.log", postmaster)
        rates = [(f"x{multiple:g}", multiple * limit) for multiple in multiples]
        queries = itertools.cycle(pool)

        async def ramp(name: str) -> tuple[list[Step], list[Step]]:
            async with step_probes(base_url) as probes:
                warm = [("warm", rates[0][1])]
                await steps(base_url, "warm-up", warm, queries, options, groups, probes)
                # The vector breaker is shared through Valkey: one the warm-up left open
                # (its cool-down is shorter than a step) turns this ramp's first steps into
                # fallbacks that say nothing of their own rate.
                state = await asyncio.to_thread(vector_breaker().state)
                print(f"{name}: the vector breaker is {state} after the warm-up", flush=True)
                found = await steps(base_url, name, rates, queries, options, groups, probes)
                best = sustainable(found, options)
                if best is None:
                    return found, []
                rate = best.figures.offered_rate
                overload = [(f"{m}xS", m * rate) for m in (2, 4)]
                return found, await steps(
                    base_url, name, overload, queries, options, groups, probes
                )

        print(HEADER)
        ramps: dict[str, list[Step]] = {}
        overloads: dict[str, list[Step]] = {}
        ramps["quiet"], overloads["quiet"] = asyncio.run(ramp("quiet"))
        feed_rate = args.ingest_share * ceiling
        feed_seconds = (len(rates) + 3) * (args.step_seconds + args.timeout_s)
        with feed_stream(feed_rate, feed_seconds, feed_skip(args.ingest_records)) as feed:
            ramps["ingesting"], overloads["ingesting"] = asyncio.run(ramp("ingesting"))
    report(
        args.out, options, capacity.as_json(cores), ceiling, feed_rate, feed.rate, ramps, overloads
    )


def report(
    out: Path,
    options: Options,
    capacity: dict[str, float],
    ceiling: float,
    feed_asked: float,
    feed_achieved: float,
    ramps: dict[str, list[Step]],
    overloads: dict[str, list[Step]],
) -> None:
    limit = capacity["limit_rate"]
    summary: dict[str, Any] = {}
    sustained: dict[str, float] = {}
    for name, ramp in ramps.items():
        best = sustainable(ramp, options)
        if best is None:
            print(f"{name}: no step met the objectives")
            summary[name] = None
            continue
        rate = sustained[name] = best.figures.offered_rate
        checks = [overload_checks(step, rate, options.objective_ms) for step in overloads[name]]
        summary[name] = {
            "sustainable_rate": round(rate, 1),
            "of_capacity_limit": round(rate / limit, 3),
            "p99_ms": best.figures.latency_ms["p99"],
            "overload": checks,
        }
        print(
            f"{name}: sustainable {rate:.1f}/s = {rate / limit:.2f} x the capacity limit "
            f"{limit:.1f}/s (target >= 0.70); p99 {best.figures.latency_ms['p99']:.1f} ms; "
            f"overload {checks} (targets: good >= 0.90, on time)"
        )
    quiet = sustainable(ramps["quiet"], options)
    if quiet is not None:
        # The same step of the other ramp: how much the feed moved the p99 at that rate.
        same = next(step for step in ramps["ingesting"] if step.label == quiet.label)
        moved = same.figures.latency_ms["p99"] / quiet.figures.latency_ms["p99"] - 1
        summary["ingestion_moves_p99"] = round(moved, 3)
        # A step answered by fallbacks has a fallbacks' p99, which can be the lower: the
        # move is only a pass when the feed's step met the objectives too.
        passes = summary["ingestion_step_passes"] = same.passes(options)
        print(f"at {quiet.label} the feed moved the p99 by {moved:+.0%} (target <= +20 %)")
        if not passes:
            share = same.figures.fallback_share
            print(f"  not a pass: the feed's step missed its objectives ({share:.1%} not hybrid)")
    print(f"feed {feed_achieved:.1f} listings/s of {feed_asked:.1f}/s asked")
    # The overload steps too: the curve runs to 4x each ramp's sustainable rate.
    plot(ramps, overloads, limit, sustained, options, out)
    document = {
        "command": " ".join(sys.argv),
        "options": asdict(options),
        "capacity": capacity,
        "ingestion_ceiling": round(ceiling, 1),
        "feed": {"asked": round(feed_asked, 1), "achieved": round(feed_achieved, 1)},
        "summary": summary,
        "steps": [step.as_json() for name in ramps for step in ramps[name] + overloads[name]],
    }
    out.with_suffix(".json").write_text(json.dumps(document, indent=1))
    print(f"wrote {out} and {out.with_suffix('.json')}")


if __name__ == "__main__":
    main()
