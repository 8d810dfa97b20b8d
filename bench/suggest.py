"""Suggestions as a visitor types, at 100,000 listings: the statement behind
`GET /api/suggest` (retrieval/pg/suggestions.py) in this process, and the endpoint over
HTTP through uvicorn on loopback. Target (issue 33): server-side p99 <= 10 ms.

    .venv/bin/python bench/suggest.py --data-dir /tmp/bench100k

The database is bench/search.py's (built with --data-dir); the suggestions' view is made
by the migration and read afresh here first (its refresh is timed too). What is typed:
words of the bench data's own titles as a visitor types them, a keystroke at a time (two
to six characters of a word, after zero to two whole words before it), and the same with
one typo (two letters swapped) for the near-miss tier. Each side runs every input once to
warm, then twice, in opposite orders."""

import argparse
import random
import sys
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import REPO, SHARED_DATA, percentile, rounds, running

sys.path.insert(0, str(REPO))  # openloop's loopback guard is the sweep's (evaluation/)
from capacity import BASE_RECORDS
from listings import records
from search import queries
from stack import add_stack_arguments, web_server

TARGET_P99_MS = 10.0


def typed_inputs(count: int) -> list[str]:
    """What visitors have typed so far: a prefix of a title word after whole words."""
    rng = random.Random(5)
    texts = records(BASE_RECORDS, SHARED_DATA if SHARED_DATA.exists() else None)
    out = []
    for text in queries(count, texts):
        words = text.lower().split()
        last = words[-1]
        prefix = last[: rng.randint(2, min(6, len(last)))]
        typed = " ".join([*words[:-1], prefix])
        if rng.random() < 0.25 and len(last) >= 5:  # a typo: two letters swapped
            i = rng.randint(1, len(last) - 2)
            typed = " ".join([*words[:-1], last[:i] + last[i + 1] + last[i] + last[i + 2 :]])
        out.append(typed)
    return out


def summary(name: str, values: list[float]) -> str:
    p50, p95, p99 = (percentile(values, share) for share in (0.5, 0.95, 0.99))
    return f"{name:<24} p50 {p50:7.2f}  p95 {p95:7.2f}  p99 {p99:7.2f} ms"


async def in_process(inputs: list[str]) -> tuple[list[float], int]:
    from django.conf import settings

    from retrieval.bounds.deadline import Deadline
    from retrieval.pg.pool import close_pools
    from retrieval.pg.suggestions import suggest

    took, empty = [], 0
    try:
        for block, keep in rounds([inputs]):
            for typed in block:
                started = time.perf_counter()
                found = await suggest(typed, settings.SEARCH_SUGGEST_LIMIT, Deadline.after(1000))
                if keep:
                    took.append((time.perf_counter() - started) * 1000)
                    empty += not found
    finally:
        await close_pools()
    return took, empty


def over_http(base_url: str, inputs: list[str]) -> list[float]:
    took = []
    with httpx.Client(base_url=base_url, timeout=10) as client:
        for block, keep in rounds([inputs]):
            for typed in block:
                started = time.perf_counter()
                response = client.get("/api/suggest", params={"q": typed})
                response.raise_for_status()
                if keep:
                    took.append((time.perf_counter() - started) * 1000)
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_stack_arguments(parser)
    parser.add_argument("--inputs", type=int, default=300)
    args = parser.parse_args()
    import uvloop  # the web server's loop (searchsite.supervisor.web_argv)

    with running(args.data_dir):
        from django.db import connection

        from retrieval.pg import suggestions

        started = time.perf_counter()
        suggestions.refresh()
        refreshed_s = time.perf_counter() - started
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT count(*) FROM {suggestions.VIEW}")
            (rows,) = cursor.fetchone() or (0,)
        connection.close()
        print(f"{rows} suggested texts, refreshed in {refreshed_s:.2f} s")
        inputs = typed_inputs(args.inputs)
        took, empty = uvloop.run(in_process(inputs))
        print(summary("statement, in-process", took) + f"  ({empty} of {len(took)} empty)")
        with web_server(args.data_dir / "suggest-web.log") as base_url:
            print(summary("GET /api/suggest", over_http(base_url, inputs)))
        p99 = percentile(took, 0.99)
        verdict = "PASS" if p99 <= TARGET_P99_MS else "FAIL"
        print(f"  {verdict}  statement p99 <= {TARGET_P99_MS:g} ms ({p99:.2f})")


if __name__ == "__main__":
    main()
