"""A replica's replay lag, and where searches read, while a season's listings are ingested:
against `SEARCH_REPLICAS=1 make run` on this machine (issue 36).

Open-loop searches at `--rate` in steps of `--step-seconds`: quiet steps, then
`manage.py ingest --kind editorial` of one file of `--listings` dated listings (one
payload, as an editor's upload is), steps going on until it ends and its vectors are
written (`--after-steps`). Twice a second the primary is asked how far behind its
replicas are (`pg_stat_replication`: `replay_lag`, and the bytes between its WAL position
and their replay), and the web's /metrics where searches read. Each step prints its
search p99, its share of answers that read the primary for a replica's sake
(`replica_lagging`, `replica_unavailable`), and the replay lag's median and worst over
the step: the figures `SEARCH_REPLICA_MAX_LAG_S` is chosen from.

    SEARCH_REPLICAS=1 make run     # in another terminal
    .venv/bin/python bench/replica_lag.py --rate 40

Against `make run` without a replica the replica's columns stay at 0, and the steps say
what the season's file does to the searches beside it (issue 35's figure).
"""

import argparse
import asyncio
import itertools
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import REPO

sys.path.insert(0, str(REPO))  # openloop's loopback guard is the sweep's (evaluation/)
import numpy as np
import psycopg
from openloop import Connections, Schedule, run, summarise

SEARCH_PATH = "/api/search"
WORDS = ("concert", "jazz", "market", "workshop", "exhibition", "organ", "family", "dance")
LAG = (
    "SELECT coalesce(max(extract(epoch FROM replay_lag)), 0),"
    " coalesce(max(pg_wal_lsn_diff(pg_current_wal_lsn(), replay_lsn)), 0)"
    " FROM pg_stat_replication"
)


@dataclass(frozen=True)
class Sample:
    at: float  # monotonic
    lag_s: float
    behind_bytes: float


def season(count: int) -> list[dict[str, str]]:
    """`count` dated editorial listings over the coming weeks, titles of distinct words."""
    first = datetime.now(UTC).replace(minute=0, second=0, microsecond=0) + timedelta(days=2)
    return [
        {
            "id": f"replica-bench-{number}",
            "title": f"{WORDS[number % len(WORDS)].title()} evening number {number}",
            "description": f"Season listing {number}: {WORDS[(number * 7) % len(WORDS)]}.",
            "venue": f"Hall {number % 40}",
            "start": (first + timedelta(hours=3 * number)).isoformat(),
        }
        for number in range(count)
    ]


async def sample_lag(database_url: str, samples: list[Sample], stop: asyncio.Event) -> None:
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        while not stop.is_set():
            row = await (await conn.execute(LAG)).fetchone()
            if row is not None:
                samples.append(Sample(time.monotonic(), float(row[0]), float(row[1])))
            await asyncio.sleep(0.5)


def services_env() -> dict[str, str]:
    """The running stack's URLs, as `manage.py services` prints them."""
    printed = subprocess.run(
        [sys.executable, "manage.py", "services"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    return dict(line.split("=", 1) for line in printed.splitlines() if "=" in line)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="http://127.0.0.1:8000")
    parser.add_argument("--rate", type=float, default=40.0)
    parser.add_argument("--step-seconds", type=float, default=10.0)
    parser.add_argument("--quiet-steps", type=int, default=3)
    parser.add_argument("--listings", type=int, default=5000)
    parser.add_argument(
        "--after-steps", type=int, default=20, help="after the file is applied: its vectors"
    )
    parser.add_argument("--max-steps", type=int, default=60, help="bound on the steps in all")
    args = parser.parse_args()
    urls = services_env()
    if not urls.get("SEARCH_REPLICA_URLS"):
        print("no replica is running: the searches alone are measured")
    connections = Connections(args.url, limit=1024)
    queries = itertools.cycle(f"{w} {n}" for n in range(500) for w in WORDS)
    samples: list[Sample] = []
    stop = asyncio.Event()
    sampler = asyncio.create_task(sample_lag(urls["DATABASE_URL"], samples, stop))
    with tempfile.TemporaryDirectory() as scratch:
        payload = Path(scratch) / "season.json"
        payload.write_text(json.dumps(season(args.listings)))
        ingest: subprocess.Popen[bytes] | None = None
        after_steps = 0
        print(
            "step | phase | p99 ms | fallbacks | replica_lagging | replica_unavailable"
            " | replay lag median / max s | bytes behind max"
        )
        for step in range(args.max_steps):
            if step == args.quiet_steps:
                ingest = subprocess.Popen(
                    [sys.executable, "manage.py", "ingest", "--kind", "editorial", str(payload)],
                    cwd=REPO,
                    env=os.environ | urls,
                    stdout=subprocess.DEVNULL,
                )
            phase = "quiet" if ingest is None else "ingest" if ingest.poll() is None else "after"
            started = time.monotonic()
            figures = summarise(
                await run(
                    connections,
                    SEARCH_PATH,
                    queries,
                    Schedule.fixed(args.rate, args.step_seconds),
                    timeout_s=2.0,
                )
            )
            within = [s for s in samples if s.at >= started]
            lags = [s.lag_s for s in within] or [0.0]
            behind = max((s.behind_bytes for s in within), default=0.0)
            print(
                f"{step} | {phase} | {figures.latency_ms['p99']} | "
                f"{figures.fallback_share:.1%} | "
                f"{figures.reasons.get('replica_lagging', 0):.1%} | "
                f"{figures.reasons.get('replica_unavailable', 0):.1%} | "
                f"{float(np.median(lags)):.3f} / {max(lags):.3f} | {behind:,.0f}",
                flush=True,
            )
            if phase == "after":
                after_steps += 1
                if after_steps >= args.after_steps:
                    break
    stop.set()
    await sampler


if __name__ == "__main__":
    asyncio.run(main())
