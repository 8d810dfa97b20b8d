"""Each of the search bench's queries through the lexical stage alone, slowest first: which
queries make its tail, on a database `bench/search.py` built.

    .venv/bin/python bench/lexical_queries.py --data-dir /tmp/b1000000-v2 [--rounds 4]

Every distinct query runs once untimed, then `--rounds` times; printed: each query's median
and worst, the slowest `--shown`, and the p50 and p99 of every timed search.
"""

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import SHARED_DATA, percentile, running
from listings import records
from search import lexical_stage_ms, queries


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--queries", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--shown", type=int, default=12)
    args = parser.parse_args()
    with running(args.data_dir):
        import uvloop

        from retrieval.pg.pool import close_pools

        data_dir = SHARED_DATA if SHARED_DATA.exists() else None
        distinct = list(dict.fromkeys(queries(args.queries, records(2000, data_dir))))

        async def run() -> dict[str, list[float]]:
            taken: dict[str, list[float]] = {q: [] for q in distinct}
            try:
                for round_ in range(args.rounds + 1):
                    for q in distinct:
                        took = await lexical_stage_ms(q)
                        if round_:  # the first round reads what the later ones find cached
                            taken[q].append(took)
            finally:
                await close_pools()
            return taken

        taken = uvloop.run(run())
    slowest = sorted(taken.items(), key=lambda item: statistics.median(item[1]), reverse=True)
    print(f"{len(distinct)} queries, {args.rounds} rounds; median and worst, slowest first")
    for q, times in slowest[: args.shown]:
        print(f"{statistics.median(times):8.2f} {max(times):8.2f} ms  {q}")
    every = [ms for times in taken.values() for ms in times]
    print(f"all: p50 {percentile(every, 0.5):.2f} p99 {percentile(every, 0.99):.2f} ms")


if __name__ == "__main__":
    main()
