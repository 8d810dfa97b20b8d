"""Search benchmark at 100,000 listings, every figure measured side by side in one run.

    .venv/bin/python bench/search.py [--listings 100000] [--queries 200] [--data-dir DIR]

With --data-dir the database stays in DIR and later runs reuse it (building 100,000
listings takes about three minutes).

(a) in-process hybrid search against one single-statement RRF query of the same two
    branches (as in pgvector-python's hybrid example), with the same query embeddings;
(b) HTTP p50 overhead over (a), through uvicorn on 127.0.0.1;
(c) p99 latency while the embeddings table is locked, against a sequential search without
    budgets;
(d) from vector-budget expiry to the backend being idle;
and, not a speed: the vector stage's recall@10 against an exact scan of the generation.
"""

import argparse
import asyncio
import os
import signal
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypedDict

import numpy as np
import numpy.typing as npt
import psycopg
from psycopg.rows import TupleRow

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import REPO, SHARED_DATA, percentile, rounds, running
from listings import records

SINGLE_STATEMENT_RRF = """
WITH semantic_search AS (
    SELECT listing_id AS id,
           RANK() OVER (ORDER BY embedding::{kind}({dims}) <=> %(e)s::{kind}({dims}))
    FROM ingestion_listing_embedding WHERE generation_id = {generation}
    ORDER BY embedding::{kind}({dims}) <=> %(e)s::{kind}({dims}) LIMIT 30
),
keyword_search AS (
    SELECT id, RANK() OVER (ORDER BY ts_rank_cd(search_vector, query) DESC)
    FROM ingestion_listing, websearch_to_tsquery('english', %(q)s) query
    WHERE search_vector @@ query AND status = 'active'
    ORDER BY ts_rank_cd(search_vector, query) DESC LIMIT 30
)
SELECT COALESCE(semantic_search.id, keyword_search.id) AS id,
       COALESCE(1.0 / (60 + semantic_search.rank), 0.0)
       + COALESCE(1.0 / (60 + keyword_search.rank), 0.0) AS score
FROM semantic_search FULL OUTER JOIN keyword_search ON semantic_search.id = keyword_search.id
ORDER BY score DESC, id LIMIT 10
"""


# Each query's embedding, computed once: every side searches with the same vectors.
Embeddings = dict[str, npt.NDArray[np.float32]]


class InProcessFigures(TypedDict):
    """Milliseconds per search of each block of (a) and (b), and our search's modes."""

    ours: list[float]
    single: list[float]
    sql_work: list[float]
    lexical: list[float]
    vector: list[float]
    http: list[float]
    page: list[float]
    modes: dict[str, int]


class UnderLockFigures(TypedDict):
    """(c) and (d): latency and expiry-to-idle in milliseconds, the deadline, and the
    searches whose vector statement was never seen running (their budget ran out before
    it was sent, e.g. while the pool opened)."""

    latency: list[float]
    idle: list[float]
    deadline: float
    unsent: int


def ms(values: list[float]) -> str:
    return (
        f"p50 {statistics.median(values):7.2f}  p95 {percentile(values, 0.95):7.2f}  "
        f"p99 {percentile(values, 0.99):7.2f} ms"
    )


def queries(count: int, base_records: list[dict[str, object]]) -> list[str]:
    import random

    rng = random.Random(3)
    titles = [str(r["title"]) for r in base_records]
    out = []
    for _ in range(count):
        words = [w.strip(":,.()'") for w in rng.choice(titles).split() if len(w) > 3]
        out.append(" ".join(rng.sample(words, min(len(words), rng.randint(1, 3)))) or "church")
    return out


class FixedEmbedder:
    """Both sides get the same, precomputed query embeddings."""

    def __init__(self, table: Embeddings) -> None:
        self.table = table

    async def embed(self, text: str) -> npt.NDArray[np.float32]:
        return self.table[text]


async def in_process(
    qs: list[str], embeddings: Embeddings, generation: int, api: str
) -> InProcessFigures:
    import dataclasses

    import httpx
    from django.conf import settings
    from pgvector import Vector
    from psycopg import sql

    from ingestion.embedding import DIMENSIONS
    from retrieval.bounds.deadline import Deadline, SearchDeadline
    from retrieval.hybrid import CANDIDATES_PER_RESULT, hybrid_search
    from retrieval.pg.generation import vector_type
    from retrieval.pg.pool import connection
    from retrieval.pg.vector import PgVectorIndex
    from retrieval.query.parse import parse_query
    from retrieval.service import budget_policy, dependencies

    deps = dataclasses.replace(dependencies(), embedder=FixedEmbedder(embeddings))
    policy = budget_policy()
    kind = await vector_type(generation, Deadline.after(1000))
    rrf = sql.SQL(SINGLE_STATEMENT_RRF).format(
        generation=sql.Literal(generation), dims=sql.Literal(DIMENSIONS), kind=sql.SQL(kind)
    )
    same_ef_search = sql.SQL("SET LOCAL hnsw.ef_search = {}").format(
        sql.Literal(settings.SEARCH_HNSW_EF_SEARCH)
    )
    figures = InProcessFigures(
        ours=[], single=[], sql_work=[], lexical=[], vector=[], http=[], page=[], modes={}
    )
    modes = figures["modes"]

    async def ours(q: str, keep: bool) -> None:
        started = time.perf_counter()
        outcome = await hybrid_search(parse_query(q, "10"), SearchDeadline.planned(policy), deps)
        elapsed = (time.perf_counter() - started) * 1000
        if keep:
            figures["ours"].append(elapsed)
            # Both stages run at once: the request's SQL work ends when the later one ends.
            timings = outcome.timings
            figures["sql_work"].append(max(timings.lexical_ms or 0, timings.vector_ms or 0))
            modes[outcome.mode.value] = modes.get(outcome.mode.value, 0) + 1

    async def lexical(q: str, keep: bool) -> None:
        took = await lexical_stage_ms(q)
        if keep:
            figures["lexical"].append(took)

    async def vector(q: str, keep: bool) -> None:
        started = time.perf_counter()
        limit = 10 * CANDIDATES_PER_RESULT
        await PgVectorIndex().search(
            np.asarray(embeddings[q], np.float32), generation, limit, Deadline.after(1000)
        )
        if keep:
            figures["vector"].append((time.perf_counter() - started) * 1000)

    async def single(q: str, keep: bool) -> None:
        started = time.perf_counter()
        async with connection(1.0) as conn, conn.transaction():
            await conn.execute(same_ef_search)
            cursor = await conn.execute(rrf, {"e": Vector(embeddings[q]).to_text(), "q": q})
            await cursor.fetchall()
        if keep:
            figures["single"].append((time.perf_counter() - started) * 1000)

    # A blocking client, although this is a coroutine: httpx's async client spends 0.5 ms
    # more per request in this process, and nothing else here needs the loop meanwhile.
    # Connections idle across the other blocks are not reused: uvicorn closes them after
    # 5 s, and a request sent as it does fails ("Server disconnected").
    client = httpx.Client(timeout=5, limits=httpx.Limits(keepalive_expiry=1.0))

    async def http(q: str, keep: bool) -> None:
        started = time.perf_counter()
        client.get(api, params={"q": q}).raise_for_status()
        if keep:
            figures["http"].append((time.perf_counter() - started) * 1000)

    page_url = api.removesuffix("api/search")

    async def page(q: str, keep: bool) -> None:
        # The whole page, its last byte included: a streamed page ends with the final
        # ranking.
        started = time.perf_counter()
        client.get(page_url, params={"q": q}).raise_for_status()
        if keep:
            figures["page"].append((time.perf_counter() - started) * 1000)

    # Each side runs through all the queries in a block of its own, as it would serve them.
    # Interleaved query by query, each side ran right after the other had read the same
    # query's rows, and ours right after a statement that ranks every match (up to 100 ms
    # of scanning): the baseline found its query's pages in the CPU caches, ours found them
    # evicted. HTTP is a block of the same rotation: (b) subtracts figures taken under one
    # drift.
    with client:
        for block, keep in rounds([ours, http, page, lexical, vector, single]):
            for q in qs:
                await block(q, keep=keep)
    return figures


async def lexical_stage_ms(q: str) -> float:
    """The lexical stage alone for `q`, as a search of 10 results asks it, in ms."""
    from retrieval.bounds.deadline import SearchDeadline
    from retrieval.hybrid import CANDIDATES_PER_RESULT
    from retrieval.pg.lexical import PgLexicalIndex
    from retrieval.query.parse import parse_query
    from retrieval.service import budget_policy

    query = parse_query(q, "10")
    started = time.perf_counter()
    limit = query.k * CANDIDATES_PER_RESULT
    await PgLexicalIndex().search(query, limit, SearchDeadline.planned(budget_policy()).stages)
    return (time.perf_counter() - started) * 1000


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def web_server() -> Iterator[str]:
    """uvicorn serving the site on 127.0.0.1; yields the search API's address once it answers."""
    import logging

    import httpx

    logging.getLogger("httpx").setLevel(logging.WARNING)  # a line per request otherwise

    from searchsite.supervisor import web_argv

    port = free_port()
    server = subprocess.Popen(
        web_argv(port, "warning"),
        cwd=REPO,
        env=dict(os.environ),
        start_new_session=True,
    )
    api = f"http://127.0.0.1:{port}/api/search"
    try:
        with httpx.Client(timeout=5) as client:
            for _ in range(600):
                try:
                    client.get(api, params={"q": "warm"})
                    break
                except httpx.HTTPError:
                    time.sleep(0.1)
        yield api
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(30)


async def vector_recall(qs: list[str], embeddings: Embeddings, generation: int) -> float:
    """Mean recall@10 of the vector stage against an exact scan of the same generation."""
    from retrieval.bounds.deadline import Deadline
    from retrieval.pg.pool import connection
    from retrieval.pg.vector import _SEARCH, PgVectorIndex, vector_text

    found = []
    for q in qs:
        embedding = np.asarray(embeddings[q], dtype=np.float32)
        approximate = await PgVectorIndex().search(embedding, generation, 10, Deadline.after(1000))
        async with connection(1.0) as conn, conn.transaction():
            await conn.execute("SET LOCAL enable_indexscan = off")  # every row, exactly
            statement = _SEARCH.format(
                dims=embedding.shape[0],
                kind="vector",  # full precision, whatever the index holds
                generation=generation,
                filters="",
                next_start="starts_at",
            )
            cursor = await conn.execute(
                statement.replace("%(embedding)s", "%s").replace("%(limit)s", "10"),
                [vector_text(embedding)],
            )
            exact = {row[0] for row in await cursor.fetchall()}
        found.append(len(exact & {c.listing_id for c in approximate}) / len(exact))
    return sum(found) / len(found)


SELECTIVITIES = (0.5, 0.1, 0.01)


class FilteredFigures(TypedDict):
    share: float  # of listings the filter matches, measured
    recall: float
    latency: list[float]
    missed: int  # searches that took longer than a second, counted as finding nothing


async def filtered_vector(
    qs: list[str],
    embeddings: Embeddings,
    generation: int,
    limit: int,
    shares: tuple[float, ...] = SELECTIVITIES,
) -> list[FilteredFigures]:
    """The vector stage with a date window matching each share of listings: its time, and
    its recall@10 against an exact ranking of every listing the window matches."""
    from datetime import datetime, timedelta

    from search_data import DATED_DAYS, DATED_FROM

    from retrieval.bounds.deadline import Deadline
    from retrieval.pg.pool import connection
    from retrieval.pg.vector import PgVectorIndex
    from retrieval.types import DateFilter, SearchFilters, StageTimeoutError

    start = datetime.fromisoformat(DATED_FROM)
    figures: list[FilteredFigures] = []
    for share in shares:
        end = start + timedelta(days=DATED_DAYS * share)
        dates = DateFilter(start, end, not_ended=False, ended=False, undated=False)
        filters = SearchFilters(dates=dates)
        async with connection(5.0) as conn:
            cursor = await conn.execute(
                "SELECT e.listing_id, e.embedding::text FROM ingestion_listing_embedding e"
                " JOIN ingestion_listing l ON l.id = e.listing_id"
                " WHERE e.generation_id = %s AND l.current_until >= %s AND l.starts_at < %s",
                [generation, start, end],
            )
            rows = await cursor.fetchall()
            cursor = await conn.execute("SELECT count(*) FROM ingestion_listing")
            total = (await cursor.fetchone() or (1,))[0]
        ids = np.array([row[0] for row in rows])
        matrix = np.array([np.fromstring(row[1][1:-1], sep=",") for row in rows], np.float32)
        matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
        found, latency, missed = [], [], 0
        for q in qs:
            embedding = np.asarray(embeddings[q], dtype=np.float32)
            exact = set(ids[np.argsort(-(matrix @ embedding))[:10]].tolist())
            began = time.perf_counter()
            try:
                candidates = await PgVectorIndex().search(
                    embedding, generation, limit, Deadline.after(1000), filters
                )
            except StageTimeoutError:  # a graph read from disk, cold, can take that long
                candidates, missed = [], missed + 1
            latency.append((time.perf_counter() - began) * 1000)
            found.append(len(exact & {c.listing_id for c in candidates[:10]}) / len(exact))
        figures.append(
            {
                "share": len(rows) / total,
                "recall": sum(found) / len(found),
                "latency": latency,
                "missed": missed,
            }
        )
    return figures


async def under_lock(qs: list[str], embeddings: Embeddings, url: str) -> UnderLockFigures:
    import dataclasses

    from django.conf import settings

    from retrieval.bounds.breaker_gate import NeverOpen
    from retrieval.bounds.deadline import SearchDeadline, plan_budgets
    from retrieval.hybrid import hybrid_search
    from retrieval.query.parse import parse_query
    from retrieval.service import budget_policy, dependencies, forget_wiring

    forget_wiring()
    # A breaker that never opens: each search must really try the vector stage and time out.
    deps = dataclasses.replace(
        dependencies(), embedder=FixedEmbedder(embeddings), breaker=NeverOpen()
    )
    policy = budget_policy()
    holder = await psycopg.AsyncConnection.connect(url)
    observer = await psycopg.AsyncConnection.connect(url, autocommit=True)
    await holder.execute("LOCK TABLE ingestion_listing_embedding IN ACCESS EXCLUSIVE MODE")
    latencies, idle_after, unsent = [], [], 0
    try:
        for q in qs:
            budgets = plan_budgets(policy, caller_timeout_ms=None)
            started = time.perf_counter()
            deadline = SearchDeadline.start(budgets)
            task = asyncio.create_task(hybrid_search(parse_query(q, "10"), deadline, deps))
            expiry = started + budgets.vector_ms / 1000
            idle = await _idle_after(observer, holder.info.backend_pid, expiry, task)
            await task
            latencies.append((time.perf_counter() - started) * 1000)
            if idle is None:
                unsent += 1
            else:
                idle_after.append((idle - expiry) * 1000)
    finally:
        await holder.rollback()
        await holder.close()
        await observer.close()
    return UnderLockFigures(
        latency=latencies, idle=idle_after, deadline=settings.SEARCH_DEADLINE_MS, unsent=unsent
    )


async def _idle_after(
    observer: psycopg.AsyncConnection[TupleRow],
    holder_pid: int,
    expiry: float,
    search: "asyncio.Task[object]",
) -> float | None:
    """Poll until no vector statement is active (after the budget); None when the search
    ended without one ever seen running: a search that never sent its statement must not
    read as one whose statement outlived its budget."""
    from retrieval.pg.statement import VECTOR_TAG

    seen_active = False
    while True:
        cursor = await observer.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE state = 'active'"
            " AND pid NOT IN (pg_backend_pid(), %s)"
            " AND query LIKE %s",
            [holder_pid, f"/* {VECTOR_TAG} */%"],
        )
        row = await cursor.fetchone()
        active = row[0] if row else 0  # None only in fetchone's type: count(*) has a row
        now = time.perf_counter()
        seen_active |= bool(active)
        if seen_active and not active and now >= expiry:
            return now
        if not seen_active and search.done():
            return None
        if now > expiry + 5:
            raise SystemExit("a vector statement was still running 5 s after its budget")


async def sequential_under_lock(
    qs: list[str], embeddings: Embeddings, url: str, generation: int, hold_s: float
) -> list[float]:
    """Lexical, then vector, no budgets: each search waits until the lock is released."""
    from pgvector import Vector

    from ingestion.embedding import DIMENSIONS
    from retrieval.bounds.deadline import Deadline
    from retrieval.pg.generation import vector_type

    kind = await vector_type(generation, Deadline.after(1000))

    times = []
    for q in qs:
        holder = await psycopg.AsyncConnection.connect(url)
        await holder.execute("LOCK TABLE ingestion_listing_embedding IN ACCESS EXCLUSIVE MODE")
        release = asyncio.get_running_loop().call_later(
            hold_s, asyncio.ensure_future, holder.rollback()
        )
        started = time.perf_counter()
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
            await (
                await conn.execute(
                    "SELECT id FROM ingestion_listing WHERE search_vector @@"
                    " websearch_to_tsquery('english', %s) LIMIT 30",
                    [q],
                )
            ).fetchall()
            await (
                await conn.execute(
                    "SELECT listing_id FROM ingestion_listing_embedding"
                    f" WHERE generation_id = {generation}"
                    f" ORDER BY embedding::{kind}({DIMENSIONS}) <=> %s::{kind}({DIMENSIONS})"
                    " LIMIT 30",
                    [Vector(embeddings[q]).to_text()],
                )
            ).fetchall()
        times.append((time.perf_counter() - started) * 1000)
        release.cancel()
        await holder.close()
    return times


# What the search reads, by relation: the tables with their TOAST, and their indexes.
_SIZES = """
SELECT c.relname, c.relkind, pg_total_relation_size(c.oid) AS total,
       pg_relation_size(c.oid) AS own
FROM pg_class c
WHERE c.relname IN ('ingestion_listing', 'ingestion_listing_embedding', %(hnsw)s)
ORDER BY c.relname
"""


def print_sizes(listings: int, hnsw: str) -> None:
    """The tables' and indexes' sizes, and what they come to a listing: the figures
    docs/capacity.md works from."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(_SIZES, {"hnsw": hnsw})
        rows = cursor.fetchall()
    total = sum(with_indexes for _, kind, with_indexes, _ in rows if kind == "r")
    for name, kind, with_indexes, own in rows:
        size, what = (own, "the index") if kind == "i" else (with_indexes, "with its indexes")
        print(f"size {name:32s} {size / 2**20:9.1f} MB  ({what}; {size / listings:,.0f} B each)")
    print(
        f"size in all                      {total / 2**20:9.1f} MB  ({total / listings:,.0f} B a"
        f" listing: {2**30 / (total / listings):,.0f} listings a GB)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--listings", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument(
        "--data-dir",
        type=Path,
        help="keep the database here and reuse it on later runs (building takes minutes)",
    )
    args = parser.parse_args()
    with running(args.data_dir):
        from django.conf import settings
        from django.db import connection
        from search_data import build, date_listings, record_listings

        from ingestion import generations
        from ingestion.embedding import DIMENSIONS, MODEL_NAME, get_embedder
        from retrieval.hybrid import CANDIDATES_PER_RESULT
        from retrieval.pg.pool import close_pools, conninfo
        from retrieval.warming.warm_up import warm_up

        data_dir = SHARED_DATA if SHARED_DATA.exists() else None
        generation = generations.ensure_active_generation(MODEL_NAME, DIMENSIONS)
        started = time.perf_counter()
        base_records = records(2000, data_dir)
        built = build(args.listings, base_records, generation.pk)
        date_listings()
        record_listings()
        with connection.cursor() as cursor:
            # Huge pages change every figure here (docs/benchmarks.md): say which ran.
            cursor.execute("SHOW huge_pages_status")
            huge_pages = cursor.fetchone()[0]
        print(
            f"{'built' if built else 'reused'} {args.listings} listings in "
            f"{time.perf_counter() - started:.0f} s "
            f"({'Open House London texts' if data_dir else 'generated texts'}); "
            f"Postgres huge pages {huge_pages}"
        )
        if built is not None:
            print(
                f"HNSW index built in {built.seconds:.0f} s after the rows, its memory at most"
                f" {built.peak_mb:.0f} MB (maintenance_work_mem {built.maintenance_work_mem},"
                f" {built.parallel_workers} parallel workers)"
            )
        print_sizes(args.listings, generations.hnsw_index_name(generation))
        # What `manage.py bootstrap` does before a deployment takes traffic: the relations
        # a search reads, read into memory, the HNSW index last. Without it every figure
        # was a cold server's (bench/faults_warming.py measures that): at 1,000,000
        # listings and ef_search 800 the first round's slow reads opened the vector
        # breaker over a tenth of the searches measured.
        prewarmed = warm_up().prewarmed
        print(f"warmed up: {sum(prewarmed.values()):,} blocks of {len(prewarmed)} relations")
        qs = queries(args.queries, base_records)
        embedder = get_embedder()
        embeddings = {q: embedder.embed_query(q) for q in set(qs)}
        connection.close()
        url = conninfo()

        async def run() -> tuple[
            InProcessFigures, UnderLockFigures, list[float], float, list[FilteredFigures]
        ]:
            try:
                a = await in_process(qs, embeddings, generation.pk, api)
                c = await under_lock(qs[:100], embeddings, url)
                seq = await sequential_under_lock(qs[:5], embeddings, url, generation.pk, 1.0)
                recall = await vector_recall(qs[:50], embeddings, generation.pk)
                limit = 10 * CANDIDATES_PER_RESULT  # what a search of 10 results asks for
                filtered = await filtered_vector(qs, embeddings, generation.pk, limit)
                return a, c, seq, recall, filtered
            finally:
                await close_pools()

        with web_server() as api:
            import uvloop  # the web server's loop (searchsite.supervisor.web_argv)

            a, c, seq, recall, filtered = uvloop.run(run())
        b = a["http"]
        ours, single = statistics.median(a["ours"]), statistics.median(a["single"])
        print(f"(a) in-process hybrid     {ms(a['ours'])}   modes {a['modes']}")
        print(f"    single-statement RRF  {ms(a['single'])}")
        print(f"    ratio of p50s         {ours / single:.2f}   (target <= 1.0)")
        print(f"    its SQL work          {ms(a['sql_work'])}  (target p50 <= 4, p99 <= 12 ms)")
        print(f"    lexical stage alone   {ms(a['lexical'])}  (target p99 <= 12 ms)")
        print(f"(b) HTTP                  {ms(b)}")
        print(f"    HTTP p50 overhead     {statistics.median(b) - ours:7.2f} ms (target <= 5 ms)")
        page = statistics.median(a["page"]) - statistics.median(b)
        print(f"    the page              {ms(a['page'])}")
        print(f"    page p50 over the API {page:7.2f} ms (target < 10 ms)")
        print(
            f"(c) locked embeddings     {ms(c['latency'])}  (target p99 <= "
            f"{c['deadline'] + 10:.0f} ms)"
        )
        print(f"    sequential, no budget {ms(seq)}  (each held until the lock went, 1 s)")
        print(
            f"(d) budget expiry -> idle {ms(c['idle']) if c['idle'] else 'none seen'}  "
            f"(target p99 <= 20 ms; {c['unsent']} of {len(c['latency'])} searches sent no "
            "vector statement)"
        )
        print(
            f"vector recall@10         {recall:.3f} against an exact scan, 50 queries, "
            f"ef_search {settings.SEARCH_HNSW_EF_SEARCH}"
        )
        print(f"vector stage, unfiltered  {ms(a['vector'])}")
        for f in filtered:
            print(
                f"vector stage, {f['share']:5.1%} filter {ms(f['latency'])}  recall@10 "
                f"{f['recall']:.3f} against an exact filtered scan (target >= 0.85, p99 <= "
                f"{settings.SEARCH_VECTOR_BUDGET_MS:.0f} ms); {f['missed']} over a second"
            )


if __name__ == "__main__":
    main()
