"""Counts on the filters at 100,000 listings: the one statement behind an answer's
`facets` (retrieval/pg/facets.py), counted afresh each time (none kept), for the filters
readers use most: none (upcoming), each date bucket, a source kind, a venue, and a range
with both ends. Their budget is SEARCH_FACETS_BUDGET_MS; a search gives them only if they
are done when its results are, so what matters is how often they beat a search.

    .venv/bin/python bench/facets.py --data-dir /tmp/bench100k

The database is bench/search.py's (built with --data-dir); the suggestions' view, whose
top venues are counted, is read afresh first."""

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import REPO, percentile, running

sys.path.insert(0, str(REPO))  # stack's loopback guard is the sweep's (evaluation/)
from stack import add_stack_arguments

RUNS = 200


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_stack_arguments(parser)
    args = parser.parse_args()
    import uvloop

    with running(args.data_dir):
        from django.utils import timezone

        from ingestion.generations import active_generation
        from retrieval.bounds.deadline import Deadline
        from retrieval.pg import facets, suggestions
        from retrieval.query.filters import parse_filters

        suggestions.refresh()
        generation = active_generation()
        assert generation is not None, "no active generation: build the database first"
        top = None
        cases = {
            "upcoming": {},
            "when=this-weekend": {"when": "this-weekend"},
            "when=later": {"when": "later"},
            "kind=calendar": {"kind": "calendar"},
            "from/to 30 days": {"from": "2027-01-01", "to": "2027-01-31"},
        }

        async def run() -> None:
            nonlocal top
            for name, params in cases.items():
                kinds = [params.pop("kind")] if "kind" in params else []
                filters = parse_filters(params, kinds)
                took = []
                for _ in range(RUNS):
                    facets.forget()
                    started = time.perf_counter()
                    counted = await facets.count(
                        filters, generation.pk, 50, Deadline.after(1000), timezone.now()
                    )
                    took.append((time.perf_counter() - started) * 1000)
                    top = top or counted.venue[:1]
                print(
                    f"{name:<18} p50 {percentile(took, 0.5):6.2f}  p95"
                    f" {percentile(took, 0.95):6.2f}  p99 {percentile(took, 0.99):6.2f} ms"
                )

        uvloop.run(run())
        print(f"top venue counted: {top}")


if __name__ == "__main__":
    main()
