"""What reading partial matches costs the lexical stage at 100,000 listings: for short
listing queries, whether the ranking of full matches is still the head of every answer and
how many queries read partial matches; for those and for long questions (Cranfield's dev
queries, against listings they were not written for), the statement's time with and
without partial matches. Not a test: it prints figures.

    .venv/bin/python bench/lexical_tiers.py --data-dir /tmp/bench100k

(the database bench/search.py builds; run that first). "Full matches only" is the same
statement with partial matches switched off.
"""

import argparse
import time
from pathlib import Path

from harness import SHARED_DATA, percentile, running
from listings import records
from search import queries

# Short listing queries of the kind people type, beside the benchmark's title words.
TYPED = [
    "jazz", "organ recital", "choir", "walking tour", "architecture", "garden",
    "family day", "brutalist estate", "church tower", "river walk", "museum late",
    "open studio", "victorian pub", "roof garden", "tube station",
]  # fmt: skip
K = 10


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with running(args.data_dir):
        from django.db import connection
        from django.db.backends.utils import CursorWrapper

        from evaluation.formats import read_collection
        from retrieval import hybrid
        from retrieval.pg import lexical as pg_lexical

        limit = K * hybrid.CANDIDATES_PER_RESULT  # what a search of k results asks for

        base = records(2000, SHARED_DATA if SHARED_DATA.exists() else None)
        texts = [*queries(200, base), *TYPED]
        statement = pg_lexical.statements()[pg_lexical._WEBSEARCH]

        def ranked(cursor: CursorWrapper, text: str, relax: bool) -> tuple[list[int], float]:
            params: dict[str, str | int | bool | None] = {
                "text": text,
                "pool": pg_lexical.POOL,
                "limit": limit,
                "audience": "public",
                "relax_below": K if relax else 0,
                "excluded": None,
                "exact_first": False,
            }
            started = time.perf_counter()
            cursor.execute(statement, params)
            rows = cursor.fetchall()
            return [row[0] for row in rows], (time.perf_counter() - started) * 1000

        heads = 0
        reaching: list[str] = []
        with connection.cursor() as cursor:
            for text in texts:
                full, _ = ranked(cursor, text, relax=False)
                now, _ = ranked(cursor, text, relax=True)
                heads += now[: len(full)] == full
                if len(full) < K:
                    reaching.append(text)
            typed = len(TYPED)
            print(
                f"{len(texts)} queries ({len(texts) - typed} bench title words, {typed} typed):"
                f" the full matches' ranking is the head of the answer for {heads};"
                f" {len(reaching)} read partial matches (fewer than k = {K}; limit {limit})"
            )
            cranfield = SHARED_DATA / "retrieval" / "cranfield"
            questions = (
                [q.text for q in read_collection(cranfield).queries][:50]
                if cranfield.exists()
                else []
            )
            for label, asked in (("those queries", reaching), ("50 questions", questions)):
                for relax in (True, False):
                    times = [
                        ranked(cursor, text, relax)[1] for _ in range(args.rounds) for text in asked
                    ]
                    if times:
                        print(
                            f"  {label}, {'with partial' if relax else 'full only':<12}"
                            f" p50 {percentile(times, 0.5):6.2f}"
                            f"  p95 {percentile(times, 0.95):6.2f}"
                            f"  p99 {percentile(times, 0.99):6.2f} ms  ({len(times)} runs)"
                        )


if __name__ == "__main__":
    main()
