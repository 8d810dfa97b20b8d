"""The ceilings a load run is judged against, measured in the same run on the same data.

Search, "what the CPU allows": the API's own search and hydration (`retrieval.search.answer`
with the site's budgets and wiring, less the shared vector breaker) run in this process,
one query after another, no HTTP, on queries the load sends, each embedded afresh (this
process has not seen them, and the load never repeats a query within the web process's
query cache). Its rate, searches per wall-clock second, is the **capacity limit**: what
one process can do with the CPU a search costs when nothing waits in a queue.

On two cores that is a single-core figure. One search's CPU is split between the Python
side (the query's ONNX embedding, psycopg, fusion, hydration) and its Postgres backend,
which runs on the other core; back to back the two halves never overlap. A web process
serving several searches at once can overlap them, so it could in principle exceed the
limit, up to the machine's CPU bound, cores / (Python + Postgres CPU per search), which is
reported beside it; the issue's target (sustainable >= 0.7 x the limit) is against the
single-process figure.

Ingestion: bench/ingest.py's end-to-end rate (poll a local file, parse, upsert, embed
everything, one process), on a fresh batch that is removed again afterwards so the bench
database keeps exactly its listings.
"""

import argparse
import dataclasses
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import psutil
from feed import remove_bench_sources
from harness import SHARED_DATA
from listings import records
from stack import cpu_seconds, cpu_used

# The bench data's texts are bench/listings.py's first 2,000 records (bench/search_data.py).
BASE_RECORDS = 2000


def feed_skip(ceiling_records: int) -> int:
    """Records a feed skips: the bench data's and the ingestion ceiling's."""
    return BASE_RECORDS + ceiling_records


def _data_dir() -> Path | None:
    return SHARED_DATA if SHARED_DATA.exists() else None


@dataclass(frozen=True)
class SearchCapacity:
    searches: int
    wall_s: float
    python_cpu_s: float  # this process, every thread (ONNX's included)
    postgres_cpu_s: float  # every Postgres process
    unanswered: int  # NoAnswerError: a search that missed its deadline even alone

    @property
    def limit_rate(self) -> float:
        return self.searches / self.wall_s

    def cpu_bound_rate(self, cores: int) -> float:
        return cores * self.searches / (self.python_cpu_s + self.postgres_cpu_s)

    def as_json(self, cores: int) -> dict[str, float]:
        return {
            "searches": self.searches,
            "limit_rate": round(self.limit_rate, 1),
            "wall_ms_per_search": round(1000 * self.wall_s / self.searches, 2),
            "python_cpu_ms_per_search": round(1000 * self.python_cpu_s / self.searches, 2),
            "postgres_cpu_ms_per_search": round(1000 * self.postgres_cpu_s / self.searches, 2),
            "cpu_bound_rate": round(self.cpu_bound_rate(cores), 1),
            "cores": cores,
            "unanswered": self.unanswered,
        }


def search_capacity(
    queries: Sequence[str], warm_up: Sequence[str], postmaster: psutil.Process
) -> SearchCapacity:
    """`queries` back to back after `warm_up` (model, pool, buffers: not counted)."""
    import uvloop  # the web server's loop (searchsite.supervisor.web_argv)

    from retrieval.bounds.breaker_gate import NeverOpen
    from retrieval.bounds.deadline import SearchDeadline
    from retrieval.pg.pool import close_pools
    from retrieval.query.parse import parse_query
    from retrieval.search import answer
    from retrieval.service import budget_policy, dependencies
    from retrieval.types import NoAnswerError

    # Every search tries its vector stage, and none tells the site's shared breaker about
    # it: a slow one here must neither skip later searches' work nor open the breaker the
    # web server is about to read.
    deps = dataclasses.replace(dependencies(), breaker=NeverOpen())

    async def searches(texts: Sequence[str]) -> int:
        unanswered = 0
        for text in texts:
            deadline = SearchDeadline.planned(budget_policy())
            try:
                await answer(parse_query(text, "10"), deadline, deps)
            except NoAnswerError:
                unanswered += 1
        return unanswered

    async def measure() -> SearchCapacity:
        try:
            await searches(warm_up)
            postgres = cpu_seconds({"postgres": [postmaster]})
            cpu, started = time.process_time(), time.perf_counter()
            unanswered = await searches(queries)
            wall = time.perf_counter() - started
            return SearchCapacity(
                searches=len(queries),
                wall_s=wall,
                python_cpu_s=time.process_time() - cpu,
                # Per backend, as the load's steps are.
                postgres_cpu_s=cpu_used(postgres, cpu_seconds({"postgres": [postmaster]}))[
                    "postgres"
                ],
                unanswered=unanswered,
            )
        finally:
            await close_pools()

    return uvloop.run(measure())


def add_rate_arguments(parser: argparse.ArgumentParser, step_seconds: float) -> None:
    """Searches at --fraction of the capacity limit, in steps of --step-seconds: the limit
    as given (--limit) or measured with --capacity-queries (`limit_rate`)."""
    parser.add_argument("--fraction", type=float, default=0.5, help="of the capacity limit")
    parser.add_argument("--step-seconds", type=float, default=step_seconds)
    parser.add_argument("--capacity-queries", type=int, default=300)
    parser.add_argument("--limit", type=float, help="searches/s (else measured first)")


def limit_rate(
    given: float | None, pool: Sequence[str], queries: int, postmaster: psutil.Process
) -> float:
    """`given` (searches/s), else the capacity limit measured with the pool's last
    `queries` after the 50 before them (bench/scenarios.py, bench/canary_whatif.py)."""
    if given:
        return given
    return search_capacity(pool[-queries:], pool[-queries - 50 : -queries], postmaster).limit_rate


def query_pool(needed: int) -> list[str]:
    """Distinct title-word queries (bench/search.py's, of the bench data's own titles), as
    many as `needed` if the words allow."""
    from search import queries

    distinct = list(dict.fromkeys(queries(3 * needed, records(BASE_RECORDS, _data_dir()))))
    return distinct[:needed]


def ingestion_capacity(count: int) -> float:
    """Listings per second, end to end in one process, on `count` records after the bench
    data's own (a feed started with `feed_skip(count)` then sends others again); they are
    removed afterwards."""
    from ingest import one_payload_rate

    try:
        batch = records(BASE_RECORDS + count, _data_dir())[BASE_RECORDS:]
        rate, _, _ = one_payload_rate(batch)
    finally:
        remove_bench_sources()
    return rate
