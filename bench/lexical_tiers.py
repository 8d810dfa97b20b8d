"""What the lexical stage's any-term tier changes for short listing queries at 100,000
listings: whether today's every-term ranking is still the head of every answer, how many
queries reach the second tier, and what that tier costs. Not a test: it prints figures.

    .venv/bin/python bench/lexical_tiers.py --data-dir /tmp/bench100k

(the database bench/search.py builds; run that first). "Every term only" is the same
statement with the tier switched off, which is today's ranking: tier 1 is the earlier
statement unchanged.
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

        from retrieval import hybrid
        from retrieval.pg import lexical as pg_lexical

        limit = K * hybrid.CANDIDATES_PER_RESULT  # what a search of k results asks for

        base = records(2000, SHARED_DATA if SHARED_DATA.exists() else None)
        texts = [*queries(200, base), *TYPED]
        statement = pg_lexical.statements()[pg_lexical._WEBSEARCH]

        def ranked(cursor: CursorWrapper, text: str, relax: bool) -> tuple[list[int], float]:
            params: dict[str, str | int] = {
                "text": text,
                "pool": 1000,
                "limit": limit,
                "audience": "public",
                "relax_below": K if relax else 0,
            }
            started = time.perf_counter()
            cursor.execute(statement, params)
            rows = cursor.fetchall()
            return [row[0] for row in rows], (time.perf_counter() - started) * 1000

        heads = reaching = 0
        tier2_ms: list[float] = []
        every_term_ms: list[float] = []
        with connection.cursor() as cursor:
            for text in texts:
                today, _ = ranked(cursor, text, relax=False)
                now, _ = ranked(cursor, text, relax=True)
                heads += now[: len(today)] == today
                if len(today) < K:
                    reaching += 1
                    for _ in range(args.rounds):
                        tier2_ms.append(ranked(cursor, text, relax=True)[1])
                        every_term_ms.append(ranked(cursor, text, relax=False)[1])
        typed = len(TYPED)
        print(
            f"{len(texts)} queries ({len(texts) - typed} bench title words, {typed} typed):"
            f" today's ranking is the head of the answer for {heads};"
            f" {reaching} reach the any-term tier (fewer than k = {K}; limit {limit})"
        )
        for label, times in (("with the tier", tier2_ms), ("every term only", every_term_ms)):
            print(
                f"  those queries, {label:<16} p50 {percentile(times, 0.5):6.2f}"
                f"  p95 {percentile(times, 0.95):6.2f}  p99 {percentile(times, 0.99):6.2f} ms"
                f"  ({len(times)} runs)"
            )


if __name__ == "__main__":
    main()
