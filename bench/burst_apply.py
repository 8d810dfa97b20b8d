"""What a burst's listings cost to apply, alone (issue 35): bench/feed.py's burst (venue
calendars of 250 events and RSS feeds of 100 items, interleaved) applied in this process,
one payload after another as a poll applies it, on the bench data with nothing else
running; then removed again.

    .venv/bin/python bench/burst_apply.py [--data-dir /tmp/bench100k] [--burst 5000]
        [--runs 2]

Per run: the wall time, this process's CPU (parsing, Django, the client) and Postgres' CPU
(every backend's), and the statements that took the most time in all, with their count.
"""

import argparse
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import REPO, running

sys.path.insert(0, str(REPO))  # bench/openloop.py's loopback guard is evaluation/'s
from capacity import feed_skip
from feed import burst_sources, deliver_burst, remove_bench_sources
from stack import cpu_seconds, cpu_used, postgres_postmaster

SHOWN = 6  # statements, the costliest first


def one_run(count: int, skip: int, postmaster: psutil.Process) -> None:
    from django.db import connection

    sources = burst_sources()
    spent: dict[str, list[float]] = defaultdict(lambda: [0, 0.0])

    def timed(execute: Callable[..., Any], sql: str, *args: Any) -> Any:
        started = time.perf_counter()
        try:
            return execute(sql, *args)
        finally:
            entry = spent[" ".join(sql.split())[:72]]
            entry[0] += 1
            entry[1] += time.perf_counter() - started

    groups = {"this process": [psutil.Process()], "postgres": [postmaster]}
    before, started = cpu_seconds(groups), time.perf_counter()
    with connection.execute_wrapper(timed):
        deliver_burst(sources["calendar"].pk, sources["feed"].pk, count, skip)
    wall = time.perf_counter() - started
    used = cpu_used(before, cpu_seconds(groups))
    remove_bench_sources()
    print(
        f"{count} listings in {wall:.2f} s; CPU: this process {used['this process']:.2f} s,"
        f" Postgres {used['postgres']:.2f} s"
    )
    for statement, (calls, seconds) in sorted(spent.items(), key=lambda kv: -kv[1][1])[:SHOWN]:
        print(f"  {seconds:6.2f} s {calls:4.0f}x  {statement}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=Path(tempfile.gettempdir()) / "bench100k",
        help="the database bench/search.py built with --data-dir",
    )
    parser.add_argument("--burst", type=int, default=5000, help="listings")
    parser.add_argument("--runs", type=int, default=2)
    args = parser.parse_args()
    if not 0 < args.burst <= 100_000 or not 0 < args.runs <= 10:
        parser.error("--burst from 1 to 100,000 and --runs from 1 to 10")
    with running(args.data_dir):
        from retrieval.pg.pool import conninfo

        postmaster = postgres_postmaster(conninfo())
        for _ in range(args.runs):
            one_run(args.burst, feed_skip(256), postmaster)


if __name__ == "__main__":
    main()
