"""Soak (issue 12, item 6; issue 35): search at half the sustainable rate, for --minutes, on
the bench data, beside a feed stream at 80 % of the ingestion ceiling or, with
--bursts-every-minutes, a burst of --burst listings (bench/feed.py's `start_burst`: venue
calendars and RSS feeds) that often, the first after one minute.

    .venv/bin/python bench/soak.py --minutes 30 --sustainable-rate R [--data-dir DIR]
        [--url URL] [--ingest-rate N | --bursts-every-minutes 5 [--burst 5000]]
        [--out soak.json]

R is bench/load.py's sustainable rate (with ingestion) of a run on the same machine (or
bench/scenarios.py's capacity limit). Each burst's listings are new ones, kept until the
end. Reported, as markdown tables and JSON:
- per window (--window-minutes, 5): requests, p99 (from the intended send instant),
  errors (neither a 200 nor a 503; target 0), 503s, fallback share;
- the resident memory of every process (web, worker and its pool, Postgres and its
  backends, Valkey) after --warm-up-minutes against the end (target: growth <= 5 %);
- Postgres client connections, in all and of each role (application_name), and Valkey's
  used memory, sampled each minute (flat), with its keys that have a time to live: the
  result cache keeps each distinct query's ranking for a day, and the soak's queries are
  all distinct, so its memory grows by design; the keys say how much of it that is;
- per burst: when its last listing was committed (lexically searchable) and when its last
  vector was written (no listing waiting for one), in seconds from its arrival.

The load runs in one-minute open-loop runs back to back (bench/openloop.py); each ends
when its last request has, so between two there is a gap of one request's latency.
"""

import argparse
import asyncio
import itertools
import json
import sys
import threading
import time
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import REPO, running

sys.path.insert(0, str(REPO))  # openloop's loopback guard is the sweep's (evaluation/)
import psycopg
from capacity import feed_skip, ingestion_capacity, query_pool
from feed import (
    BURST_SOURCES,
    FeedFigures,
    burst_sources,
    feed_stream,
    finish_burst,
    remove_bench_sources,
    start_burst,
)
from openloop import Connections, Record, Run, Schedule, run, summarise
from scenarios import Progress
from stack import (
    Groups,
    add_stack_arguments,
    postgres_connections,
    prepare,
    rss_mb,
    serve,
    valkey_memory,
)

MINUTE_S = 60.0
ROLE_PREFIX = "pg_connections:"
SEARCH_PATH = "/api/search"


@dataclass
class Minute:
    """One minute's run, and what was sampled at its end."""

    run: Run
    rss_mb: dict[str, float]
    pg_connections: float
    pg_roles: dict[str, float]  # the connections of each application_name
    valkey_used_memory_mb: float
    valkey_keys_with_ttl: float


class Bursts:
    """A burst every `every_s` from `first_s`, in a thread of its own, while the soak
    runs; each burst's listings new ones, all removed at the end. `progress` watches
    them all."""

    def __init__(self, count: int, every_s: float, first_s: float, skip: int) -> None:
        self.count, self.every_s, self.first_s, self.skip = count, every_s, first_s, skip
        self.arrivals: list[float] = []  # seconds from the start, as `progress` counts
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> "Bursts":
        self._sources = burst_sources()
        self.progress = Progress(list(BURST_SOURCES.values()), lambda _: 0).__enter__()
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()
        self.progress.__exit__()
        remove_bench_sources()

    def _run(self) -> None:
        for number in itertools.count():
            due = self.first_s + number * self.every_s
            if self._stop.wait(max(0.0, due - (time.monotonic() - self.progress.started))):
                return
            self.arrivals.append(time.monotonic() - self.progress.started)
            skip = self.skip + number * self.count
            finish_burst(start_burst(self._sources, self.count, skip))

    def figures(self) -> list[dict[str, Any]]:
        """Per burst: seconds from its arrival to its last listing committed, and to no
        listing waiting for a vector (None: not by the end)."""
        rows = []
        for number, arrived in enumerate(self.arrivals):
            lexical, vectors = self.progress.arrival((number + 1) * self.count, since=arrived)
            rows.append(
                {
                    "burst": number + 1,
                    "arrived_min": round(arrived / MINUTE_S, 1),
                    "lexical_s": None if lexical is None else round(lexical, 1),
                    "vectors_s": None if vectors is None else round(vectors, 1),
                }
            )
        return rows


async def soak(
    base_url: str, rate: float, minutes: int, groups: Groups, timeout_s: float, pool: list[str]
) -> list[Minute]:
    from retrieval.pg.pool import conninfo

    connections = Connections(base_url, limit=1024)
    queries = itertools.cycle(pool)
    result: list[Minute] = []
    try:
        async with await psycopg.AsyncConnection.connect(conninfo(), autocommit=True) as pg:
            probes = [postgres_connections(pg), valkey_memory()]
            for number in range(minutes):
                step = await run(
                    connections, SEARCH_PATH, queries, Schedule.fixed(rate, MINUTE_S), timeout_s
                )
                seen: dict[str, float] = {}
                for probe in probes:
                    seen.update(await probe())
                minute = Minute(
                    step,
                    rss_mb(groups),
                    seen["pg_connections"],
                    {
                        key.removeprefix(ROLE_PREFIX): value
                        for key, value in seen.items()
                        if key.startswith(ROLE_PREFIX)
                    },
                    seen["valkey_used_memory_mb"],
                    seen["valkey_keys_with_ttl"],
                )
                result.append(minute)
                print(_minute_line(number, minute), flush=True)
    finally:
        await connections.close()
    return result


def _minute_line(number: int, minute: Minute) -> str:
    figures = summarise(minute.run)
    return (
        f"minute {number + 1}: p99 {figures.latency_ms['p99']:.1f} ms, "
        f"errors {_errors(minute.run.records)}, 503 {figures.status_503}, "
        f"fallback {figures.fallback_share:.1%}, Postgres connections "
        f"{minute.pg_connections:.0f}, Valkey {minute.valkey_used_memory_mb:.1f} MB"
    )


def _errors(records: list[Record]) -> int:
    return sum(1 for record in records if record.status not in {200, 503})


def windows(result: list[Minute], window_minutes: int) -> list[dict[str, Any]]:
    rows = []
    for first in range(0, len(result), window_minutes):
        chunk = result[first : first + window_minutes]
        records = [record for minute in chunk for record in minute.run.records]
        figures = summarise(Run(records, MINUTE_S * len(chunk)))
        rows.append(
            {
                "window": f"{first}-{first + len(chunk)} min",
                "requests": len(records),
                "p99_ms": figures.latency_ms["p99"],
                "errors": _errors(records),
                "status_503": figures.status_503,
                "fallback_share": round(figures.fallback_share, 4),
            }
        )
    return rows


def memory(result: list[Minute], warm_up_minutes: int) -> list[dict[str, Any]]:
    """Every process present both after warm-up and at the end, its RSS then and now."""
    base = result[min(warm_up_minutes, len(result)) - 1].rss_mb
    end = result[-1].rss_mb
    return [
        {
            "process": name,
            "after_warm_up_mb": round(base[name], 1),
            "end_mb": round(end[name], 1),
            "growth": round(end[name] / base[name] - 1, 4),
        }
        for name in sorted(base.keys() & end.keys())
    ]


def table(rows: list[dict[str, Any]]) -> str:
    keys = list(rows[0]) if rows else []
    lines = ["| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
    lines += ["| " + " | ".join(str(row[key]) for key in keys) + " |" for row in rows]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=int, default=30)
    parser.add_argument("--sustainable-rate", type=float, required=True, help="bench/load.py's")
    parser.add_argument("--search-share", type=float, default=0.5, help="of the sustainable rate")
    parser.add_argument("--ingest-rate", type=float, help="listings/s (default: 0.8 x measured)")
    parser.add_argument("--bursts-every-minutes", type=float, help="bursts, not a feed stream")
    parser.add_argument("--burst", type=int, default=5000, help="listings a burst")
    parser.add_argument("--warm-up-minutes", type=int, default=2)
    parser.add_argument("--window-minutes", type=int, default=5)
    parser.add_argument("--out", type=Path, default=Path("soak.json"))
    add_stack_arguments(parser)
    args = parser.parse_args()
    if not 0 < args.minutes <= 24 * 60 or not 0 < args.warm_up_minutes <= args.minutes:
        parser.error("--minutes must be from 1 to a day, --warm-up-minutes from 1 to it")
    with running(args.data_dir), ExitStack() as stack:
        from django.db import connection

        postmaster = prepare(args.data_dir)
        skip = feed_skip(args.ingest_records)
        rate = args.search_share * args.sustainable_rate
        seconds = args.minutes * (MINUTE_S + args.timeout_s)
        feed: FeedFigures | None = None
        bursts: Bursts | None = None
        if args.bursts_every_minutes:
            said = f"a burst of {args.burst} every {args.bursts_every_minutes:g} min"
        else:
            ingest_rate = args.ingest_rate or 0.8 * ingestion_capacity(args.ingest_records)
            feed = stack.enter_context(feed_stream(ingest_rate, seconds, skip))
            said = f"ingestion {ingest_rate:.1f}/s"
        connection.close()
        base_url, groups = serve(stack, args.url, args.data_dir / "soak-web.log", postmaster)
        if args.bursts_every_minutes:
            every_s = args.bursts_every_minutes * MINUTE_S
            bursts = stack.enter_context(Bursts(args.burst, every_s, MINUTE_S, skip))
        print(f"search {rate:.1f}/s and {said} for {args.minutes} min")
        # Each minute's queries are new to the web process: the pool outlasts its cache.
        pool = query_pool(int(rate * MINUTE_S * args.minutes) + 1)
        result = asyncio.run(soak(base_url, rate, args.minutes, groups, args.timeout_s, pool))
        # Before the stack closes: the bursts' listings go with it.
        per_burst = bursts.figures() if bursts else []
    by_window = windows(result, args.window_minutes)
    rss = memory(result, args.warm_up_minutes)
    roles = sorted({role for minute in result for role in minute.pg_roles})
    samples = [
        {
            "minute": number + 1,
            "pg_connections": minute.pg_connections,
            **{role: minute.pg_roles.get(role, 0.0) for role in roles},
            "valkey_used_memory_mb": round(minute.valkey_used_memory_mb, 2),
            "valkey_keys_with_ttl": int(minute.valkey_keys_with_ttl),
        }
        for number, minute in enumerate(result)
    ]
    print(f"\n{table(by_window)}\n\n{table(rss)}\n\n{table(samples)}")
    if per_burst:
        print(f"\n{table(per_burst)}")
    if feed:
        print(f"feed {feed.rate:.1f} listings/s of {feed.rate_asked:.1f}/s asked")
    args.out.write_text(
        json.dumps(
            {
                "command": " ".join(sys.argv),
                "search_rate": rate,
                "feed": feed and {"asked": feed.rate_asked, "achieved": feed.rate},
                "bursts": per_burst,
                "windows": by_window,
                "rss": rss,
                "samples": samples,
            },
            indent=1,
        )
    )
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
