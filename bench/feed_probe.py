"""What a feed does to searches at one fixed rate: bench/load.py's steps, without its
ramp, so that two commits can be compared step for step with the same load.

    .venv/bin/python bench/feed_probe.py [--searches 20] [--feed 40 | --burst 5000]
        [--steps 3] [--step-seconds 20] [--pairs N] [--data-dir /tmp/bench100k]

With --burst, the listings arrive at once instead (bench/feed.py delivering them as fast
as its polls go), and the bench also prints when the last of them was lexically
searchable (committed) and when the last got its vector, from the burst's start.

A web server and an embedding worker on the bench data (as bench/load.py starts them),
one warm-up step and one quiet step at --searches a second, then --steps steps at the
same rate while bench/feed.py ingests --feed listings a second. The rows are
bench/load.py's, with its columns (`embpend`: listings waiting for their embedding).
Unlike bench/load.py's ramp, both rates are fixed, not fractions of limits measured in
the run, so runs of two commits offer exactly the same load.

With --pairs N, quiet steps and feed steps alternate, N of each, the feed started for
each of its steps and its listings removed after it (with their vectors, done or not), so
that every feed step is compared with the quiet steps around it rather than with one
quiet step before them all: on this shared machine a quiet step's p99 alone varies by
half from one run to the next. It prints the median of the feed steps' p99 over the
quiet steps', with a 95 % interval from resampling the pairs.
"""

import argparse
import statistics
import sys
from collections.abc import Sequence
from contextlib import ExitStack
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import REPO, paired_interval, running

sys.path.insert(0, str(REPO))
from capacity import feed_skip
from feed import FEED_SOURCE, feed_stream
from load import HEADER, Step, fixed_rate
from scenarios import Progress
from stack import add_stack_arguments, prepare, serve


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--searches", type=float, default=20.0, help="a second")
    parser.add_argument("--feed", type=float, default=40.0, help="listings a second")
    parser.add_argument("--burst", type=int, default=0, help="listings at once, not a feed")
    parser.add_argument("--steps", type=int, default=3, help="with the feed")
    parser.add_argument("--step-seconds", type=float, default=20.0)
    parser.add_argument("--pairs", type=int, default=0, help="quiet and feed steps alternated")
    add_stack_arguments(parser)
    args = parser.parse_args()
    with running(args.data_dir), ExitStack() as stack:
        from django.db import connection

        postmaster = prepare(args.data_dir)
        connection.close()
        log = args.data_dir / "feed-probe-web.log"
        base_url, groups = serve(stack, args.url, log, postmaster)
        fixed = fixed_rate(base_url, args.searches, args.step_seconds, args.timeout_s)

        def run(ramp: str, labels: Sequence[str]) -> list[Step]:
            return fixed(ramp, labels, groups)

        print(HEADER, flush=True)
        run("warm-up", ["warm"])
        if args.pairs:
            skip, pairs = feed_skip(args.ingest_records), []
            for n in range(args.pairs):
                (quiet,) = run("quiet", [f"q{n}"])
                with feed_stream(args.feed, args.step_seconds + args.timeout_s + 30, skip):
                    (fed,) = run("feed", [f"f{n}"])
                pairs.append((quiet.figures.latency_ms["p99"], fed.figures.latency_ms["p99"]))
            print(pairs_report(pairs), flush=True)
            return
        run("quiet", ["q"])
        labels = [f"{'b' if args.burst else 'f'}{n}" for n in range(args.steps)]
        if args.burst:
            progress = Progress([FEED_SOURCE], lambda _: args.burst)
            with feed_stream(args.burst, 1.0, feed_skip(args.ingest_records)), progress:
                run("burst", labels)
            print(burst_report(progress, args.burst), flush=True)
            return
        seconds = args.steps * (args.step_seconds + args.timeout_s) + 30
        with feed_stream(args.feed, seconds, feed_skip(args.ingest_records)) as feed:
            run("feed", labels)
    print(f"feed: asked {args.feed:.1f}, achieved {feed.rate:.1f} listings/s")


def pairs_report(pairs: Sequence[tuple[float, float]], beside: str = "the feed") -> str:
    """The median p99 of the steps `beside` something over the quiet steps', with a 95 %
    interval from the pairs resampled (each pair a quiet step and the step after it)."""

    def ratio(chosen: Sequence[int]) -> float:
        fed = statistics.median(pairs[i][1] for i in chosen)
        return fed / statistics.median(pairs[i][0] for i in chosen)

    low, high = paired_interval(len(pairs), ratio)
    quiet = statistics.median(q for q, _ in pairs)
    fed = statistics.median(f for _, f in pairs)
    worse = sum(1 for q, f in pairs if f > q)
    return (
        f"p99, median of {len(pairs)} steps: quiet {quiet:.1f} ms, with {beside} {fed:.1f} ms; "
        f"ratio {ratio(range(len(pairs))):.3f} (95 % interval {low:.3f}-{high:.3f}); "
        f"the step with {beside} slower in {worse} of {len(pairs)} pairs"
    )


def burst_report(progress: Progress, count: int) -> str:
    def seconds(value: float | None) -> str:
        return f"{value:.0f} s" if value is not None else "not within the steps"

    lexical, vectors = progress.arrival(count)
    waiting = progress.samples[-1][2] if progress.samples else "?"
    return (
        f"burst: {count} listings; all lexically searchable after {seconds(lexical)}, "
        f"all with vectors after {seconds(vectors)} ({waiting} waiting at the end)"
    )


if __name__ == "__main__":
    main()
