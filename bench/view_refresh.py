"""Searches beside beat's refreshes of the views they read (retrieval/pg/views.py): the
lexical stage's vocabulary and statistics, and the suggestions.

    .venv/bin/python bench/view_refresh.py [--data-dir /tmp/bench100k] [--fraction 0.5]
        [--pairs 5] [--step-seconds 10] [--limit SEARCHES_PER_S]

Open-loop searches at --fraction of the capacity limit (measured first unless --limit is
given) on the bench data, in pairs of steps: one plain, one in which, REFRESH_AT_S into
it, the views are refreshed as beat's two tasks refresh them when a listing changed
(`vocabulary.refresh`, then `suggestions.refresh`, in this process). Prints each step,
then the plain and the refreshing steps' median p99 and fallback share, and how long the
refreshes took. Run from a worktree of another commit, it measures that commit's refresh.
"""

import argparse
import itertools
import statistics
import sys
import threading
import time
from contextlib import ExitStack
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import REPO, running

sys.path.insert(0, str(REPO))
from capacity import add_rate_arguments, limit_rate, query_pool
from load import HEADER, Options, Step
from scenarios import Runner
from stack import add_stack_arguments, prepare, serve

# Into its step: the refresh begins once the step's searches are under way.
REFRESH_AT_S = 2.0


def refreshed_during(run: Runner, name: str, rate: float) -> tuple[Step, float]:
    """One step with the views refreshed REFRESH_AT_S into it, and the refresh's seconds."""
    took: list[float] = []

    def refresh() -> None:
        from django.db import connection

        from retrieval.pg import suggestions, vocabulary

        time.sleep(REFRESH_AT_S)
        started = time.monotonic()
        try:
            vocabulary.refresh()
            suggestions.refresh()
        finally:
            took.append(time.monotonic() - started)
            connection.close()

    thread = threading.Thread(target=refresh)
    thread.start()
    (step,) = run.steps(name, rate, 1)
    thread.join()
    return step, took[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=5)
    add_rate_arguments(parser, step_seconds=10.0)
    add_stack_arguments(parser)
    args = parser.parse_args()
    if not 0 < args.fraction <= 1 or not 0 < args.pairs <= 50:
        parser.error("--fraction in (0, 1] and --pairs from 1 to 50")
    with running(args.data_dir), ExitStack() as stack:
        from django.conf import settings
        from django.db import connection

        postmaster = prepare(args.data_dir)
        options = Options(
            args.step_seconds, args.timeout_s, 1024, False, settings.SEARCH_DEADLINE_MS, 0.10
        )
        pool = query_pool(60_000)
        limit = limit_rate(args.limit, pool, args.capacity_queries, postmaster)
        connection.close()
        rate = args.fraction * limit
        print(f"capacity limit {limit:.1f} searches/s; searches at {rate:.1f}/s")
        web_log = args.data_dir / "view-refresh-web.log"
        base_url, groups = serve(stack, args.url, web_log, postmaster)
        run = Runner(base_url, groups, options, itertools.cycle(pool), args)
        print(HEADER, flush=True)
        run.steps("warm-up", limit * 0.25, 1)
        plain: list[Step] = []
        refreshing: list[tuple[Step, float]] = []
        for number in range(args.pairs):
            plain += run.steps(f"plain.{number}", rate, 1)
            refreshing.append(refreshed_during(run, f"refresh.{number}", rate))
    print()
    for name, steps in (("plain", plain), ("refreshing", [step for step, _ in refreshing])):
        p99s = [step.figures.latency_ms["p99"] for step in steps]
        shares = [step.figures.fallback_share for step in steps]
        print(
            f"{name:<11} p99 median {statistics.median(p99s):6.1f} ms"
            f" ({min(p99s):.1f}-{max(p99s):.1f}), fallbacks median"
            f" {statistics.median(shares):.1%} (most {max(shares):.1%})"
        )
    took = [seconds for _, seconds in refreshing]
    print(f"refreshes took {statistics.median(took):.1f} s ({min(took):.1f}-{max(took):.1f})")


if __name__ == "__main__":
    main()
