"""Warming a restarted stack before it takes traffic, and knowing whether it has been.

After a restart with cold caches the first vector searches read the HNSW index from disk,
miss their 40 ms budget and open the breaker: measured at 100,000 listings, 124 of the
first 150 searches (6 s at 25/s) were `cache_fallback` with `breaker_open`. `warm_up()`
loads the query model, reads the relations the search uses into memory with pg_prewarm
(the active generation's HNSW index last, so that nothing read after it pushes it out),
then runs a few searches with the warming budget. `warm_up_this_loop()` opens a web process's
whole pool on its own event loop and runs the same searches once more on it, so its first
searches find their connections open and their statements prepared.

Invariants: a warm-up search never tells the vector breaker of its outcome (a cold index
is slow, not broken; see `warming.run.search_unaccounted`); and the record that the stack is
warm (a row in Postgres, retrieval's migration 0006) names the Postgres server it warmed
by its start time, so a server restarted since (its shared buffers empty again) is never
taken for warm.
"""

import asyncio
import logging
import threading
import weakref
from dataclasses import dataclass

from django.db import DatabaseError, connection

from ingestion.embedding import get_embedder
from ingestion.generations import active_generation, hnsw_index_name
from retrieval.pg import route
from retrieval.pg.pool import WARMING_CONNECTIONS, connections_named, fill_pool
from retrieval.pg.replicas import replicas as configured_replicas
from retrieval.pg.route import Route
from retrieval.query.parse import parse_query
from retrieval.service import budgets
from retrieval.types import NoAnswerError
from retrieval.warming.kept_loop import close_loop_clients
from retrieval.warming.run import search_unaccounted

logger = logging.getLogger(__name__)

# Words of every kind of listing: each search walks the HNSW graph from its entry point
# along another path, and reads the lexical indexes' pages of its own terms.
WARM_UP_QUERIES = ("concert tonight", "family workshop", "jazz", "art exhibition", "market")
_MARK = """
INSERT INTO retrieval_warm_up (server_started_at, warmed_at)
VALUES (pg_postmaster_start_time(), now())
ON CONFLICT (one) DO UPDATE
    SET server_started_at = EXCLUDED.server_started_at, warmed_at = EXCLUDED.warmed_at
"""
_WARMED = """
SELECT EXISTS (
    SELECT 1 FROM retrieval_warm_up WHERE server_started_at = pg_postmaster_start_time()
)
"""
# How long a readiness probe waits for its process's pool to be whole (24 connections
# took 0.17-0.19 s here, the test suite running beside); past it the process takes
# traffic with what it has.
FILL_POOL_TIMEOUT_S = 5.0
# How long the warm-up checks a replica again for its lag to be known: the tail of the
# primary's WAL that it waits for is flushed within a WAL writer's round or a few (200 ms
# each, by default); past this the first searches read the primary, and say why.
REPLICA_LAGS_KNOWN_WITHIN_S = 1.0
# Nothing holds a lock on these at start-up but a migration; not worth waiting for.
PREWARM_LOCK_WAIT = "200ms"
# What a search reads: the listings (lexical stage, hydration), their embeddings, and the
# lexical stage's term statistics and spelling vocabulary.
_TABLES = (
    "ingestion_listing",
    "ingestion_listing_embedding",
    "retrieval_term_statistics",
    "retrieval_corpus_statistics",
    "retrieval_vocabulary",
)
# The tables and their indexes, bar every generation's HNSW index (only the active one is
# searched; it is read last). Heaps are read into the OS page cache, not shared buffers:
# a search reads a few of their pages, and the indexes it walks are what must stay.
_RELATIONS = """
SELECT c.oid::regclass::text, CASE WHEN c.relkind = 'i' THEN 'buffer' ELSE 'read' END
FROM pg_class c JOIN pg_am am ON am.oid = c.relam
WHERE (c.oid = ANY(%(tables)s::regclass[])
       OR c.oid IN (SELECT indexrelid FROM pg_index WHERE indrelid = ANY(%(tables)s::regclass[])))
  AND am.amname <> 'hnsw'
ORDER BY c.relkind DESC, c.oid
"""


@dataclass(frozen=True)
class WarmUp:
    prewarmed: dict[str, int]  # relation -> blocks read
    modes: list[str]  # each warm-up search's mode, or "no_answer"


def load_query_model() -> None:
    """Load the query model before the first request: a cold load takes longer than any
    search's deadline, and would turn a process's first searches into 503s."""
    get_embedder().embed_query("warm up")


def warm_up() -> WarmUp:
    load_query_model()  # its session, loaded before anything is timed
    prewarmed = prewarm_relations()
    with connections_named(WARMING_CONNECTIONS):
        modes = asyncio.run(_searches_then_close())
    mark_warmed_up()
    return WarmUp(prewarmed, modes)


_warming_up = threading.Lock()  # held while this process runs a background warm-up


def warm_up_in_background() -> bool:
    """Start `warm_up()` in a thread unless this process is running one already; whether
    it started one. For a process that finds the stack cold while it runs (Postgres
    restarted under it): it warms the stack again rather than stay unready."""
    if not _warming_up.acquire(blocking=False):
        return False

    def run() -> None:
        try:
            warm_up()
        except Exception:
            logger.exception("warm-up failed")
        finally:
            connection.close()  # this thread's own
            _warming_up.release()

    threading.Thread(target=run, name="warm-up", daemon=True).start()
    return True


def warming_up_in_background() -> bool:
    """Whether this process is running a background warm-up now."""
    return _warming_up.locked()


def prewarm_relations() -> dict[str, int]:
    """Blocks pg_prewarm read of each relation the search uses. Nothing where Postgres
    has no pg_prewarm, and nothing of a relation locked for longer than
    `PREWARM_LOCK_WAIT` (a migration): a warm-up without them still loads what its
    searches touch."""
    generation = active_generation()
    read: dict[str, int] = {}
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_extension WHERE extname = 'pg_prewarm'")
        if cursor.fetchone() is None:
            logger.warning("pg_prewarm is not installed: nothing prewarmed")
            return read
        cursor.execute(_RELATIONS, {"tables": list(_TABLES)})
        relations: list[tuple[str, str]] = list(cursor.fetchall())
        if generation is not None:
            relations.append((hnsw_index_name(generation), "buffer"))
        cursor.execute("SET lock_timeout = %s", [PREWARM_LOCK_WAIT])
        try:
            for relation, mode in relations:
                try:
                    cursor.execute("SELECT pg_prewarm(%s::regclass, %s)", [relation, mode])
                except DatabaseError as exc:
                    logger.warning("could not prewarm %s: %s", relation, type(exc).__name__)
                    continue
                row = cursor.fetchone()
                read[relation] = int(row[0]) if row else 0
        finally:
            cursor.execute("RESET lock_timeout")
    return read


async def _searches() -> list[str]:
    modes = []
    for text in WARM_UP_QUERIES:
        try:
            modes.append(str(await search_unaccounted(parse_query(text, None))))
        except NoAnswerError:
            modes.append("no_answer")
    return modes


async def _replicas_searched() -> None:
    """The same searches on every replica that answers a check: each has caches of its
    own. Checked again after them, until every replica's lag is known or
    REPLICA_LAGS_KNOWN_WITHIN_S passes, so that this process's first searches know where
    they may read: a lag is told from two of the primary's positions at least (with one, a
    replica a moment behind it is not known to be close)."""
    replicas = configured_replicas()
    await replicas.check()
    for server in route.replicas():
        if replicas.answering(server):
            with route.routed(Route(server, fixed=True)):
                await _searches()
    await replicas.check_until_known(REPLICA_LAGS_KNOWN_WITHIN_S)


async def _searches_then_close() -> list[str]:
    try:
        return await _searches()
    finally:
        await close_loop_clients()  # the loop asyncio.run made ends with them


# Event loops whose own pool and Redis client the warm-up searches have opened, and
# their statements prepared: a web process's, whose first searches would otherwise pay
# for them out of a 40 ms vector budget.
_warm_loops: "weakref.WeakSet[asyncio.AbstractEventLoop]" = weakref.WeakSet()
_warming_loops: "weakref.WeakSet[asyncio.AbstractEventLoop]" = weakref.WeakSet()


async def warm_up_this_loop() -> bool:
    """Run the warm-up searches on the running event loop, once; whether it is warm
    (False while another caller on it is still warming it)."""
    loop = asyncio.get_running_loop()
    if loop in _warm_loops:
        return True
    if loop in _warming_loops:
        return False
    _warming_loops.add(loop)
    try:
        # Its connections first, all of them, so none is opened under traffic.
        await fill_pool(FILL_POOL_TIMEOUT_S)
        await budgets().refresh()  # a running canary's arm from the first search on
        await _searches()
        await _replicas_searched()
        _warm_loops.add(loop)
    finally:
        _warming_loops.discard(loop)
    return True


def mark_warmed_up() -> None:
    """Record that the Postgres server running now has been warmed."""
    with connection.cursor() as cursor:
        cursor.execute(_MARK)


def warmed_up() -> bool:
    """Whether the Postgres server running now has been warmed. Raises DatabaseError when
    Postgres cannot say."""
    with connection.cursor() as cursor:
        cursor.execute(_WARMED)
        row = cursor.fetchone()
    return bool(row and row[0])
