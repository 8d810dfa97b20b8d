"""Async Postgres connections for the search hot path.

The hot path talks to Postgres through psycopg 3's async connections only: when an
awaiting task is cancelled, psycopg sends a cancel request to the server, so abandoned work
stops in the database (a synchronous query abandoned in a thread ran on for 1.4 s here).
One pool per event loop and server (the primary, and each replica searches may read:
retrieval/pg/route.py), because async connections belong to the loop that made them.

While Postgres is unreachable, a search must fail at once rather than wait its whole
deadline for a connection that cannot come (retrieval/pg/outage.py), and must find the
pool whole again soon after Postgres is back, however long it was away (psycopg_pool's
own reconnection backs off exponentially, to minutes).
"""

import asyncio
import logging
import time
import weakref
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from contextvars import ContextVar

import psycopg
from django.conf import settings
from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from retrieval import metrics
from retrieval.pg import route
from retrieval.pg.checkout import checked_out
from retrieval.pg.outage import (
    PROBE_TIMEOUT_S,
    DatabaseUnavailableError,
    end_outage,
    lost,
    outage_lasts,
)
from retrieval.pg.route import PRIMARY, Server

logger = logging.getLogger(__name__)
_Pools = dict[Server, AsyncConnectionPool]
_pools: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Pools]" = weakref.WeakKeyDictionary()


# Server-side prepared statements every pooled connection gets: name -> PREPARE text.
_to_prepare: dict[str, str] = {}
# Those a connection prepares the first time it is asked to run them: name -> PREPARE text.
_when_used: dict[str, str] = {}
# The names each connection has tried to prepare, and whether it could (a PREPARE can
# fail, e.g. before migrations or behind a migration's lock): it does not try again.
_prepared: "weakref.WeakKeyDictionary[AsyncConnection, dict[str, bool]]" = (
    weakref.WeakKeyDictionary()
)


PREPARE_LOCK_TIMEOUT = "20ms"


def prepare_on_connect(name: str, parameter_types: str, body: str) -> None:
    """Have every pooled connection prepare `body` as `name`: parsing and planning the
    lexical statement was 0.58 ms of its 2.58 ms p50 at 100,000 listings."""
    _to_prepare[name] = f"PREPARE {name}{parameter_types} AS {body}"


def prepare_when_used(name: str, body: str) -> None:
    """Have each pooled connection prepare `body` as `name` the first time it runs it
    (`ensure_prepared`), its parameters' types inferred: for statements too many to
    prepare on every connection, such as the lexical stage's filter shapes."""
    _when_used[name] = f"PREPARE {name} AS {body}"


def numbered(name: str, statement: str, parameters: tuple[str, ...]) -> tuple[str, str]:
    """`statement` with its named parameters numbered, to prepare as `name`, and the
    EXECUTE text that stands in for it."""
    body = statement
    for position, parameter in enumerate(parameters, start=1):
        body = body.replace(f"%({parameter})s", f"${position}")
    return body, f"EXECUTE {name}({', '.join(f'%({p})s' for p in parameters)})"


def has_prepared(conn: AsyncConnection, name: str) -> bool:
    """Whether `conn` has prepared `name` (see `prepare_on_connect`)."""
    return _prepared.get(conn, {}).get(name, False)


async def ensure_prepared(conn: AsyncConnection, name: str) -> bool:
    """Whether `conn` has `name` prepared, preparing it now if it is one to prepare when
    used and not tried yet (one more round trip, once per connection: a failure, such as
    a lock wait past PREPARE_LOCK_TIMEOUT, is not paid again at each search)."""
    tried = _prepared.get(conn, {}).get(name)
    if tried is not None:
        return tried
    text = _when_used.get(name)
    return text is not None and await _prepare(conn, name, text)


async def _prepare(conn: AsyncConnection, name: str, text: str) -> bool:
    try:
        # Preparing takes the table's lock: behind a migration's lock, a connection gives
        # up on it at once and its searches send the statement's full text.
        await conn.execute(f"SET LOCAL lock_timeout = '{PREPARE_LOCK_TIMEOUT}'; {text}")
    except psycopg.Error as exc:
        logger.warning("could not prepare %s: %s", name, exc.sqlstate)
        prepared = False
    else:
        prepared = True
    _prepared.setdefault(conn, {})[name] = prepared
    return prepared


async def _configure(conn: AsyncConnection) -> None:
    # psycopg never prepares on its own: the vector query inlines its generation id so the
    # planner can pick that generation's partial HNSW index, and a generic plan could not.
    conn.prepare_threshold = None
    await conn.set_autocommit(True)
    _prepared[conn] = {}
    for name, text in _to_prepare.items():
        await _prepare(conn, name, text)


# What the hot path's connections call themselves in pg_stat_activity: a web process's
# searches, unless the work is cache warming (retrieval/warming/run.py), which runs the same
# search in a worker.
SEARCH_CONNECTIONS = "searchsite-search"
WARMING_CONNECTIONS = "searchsite-warming"
_application_name: ContextVar[str] = ContextVar("application_name", default=SEARCH_CONNECTIONS)


@contextmanager
def connections_named(name: str) -> Iterator[None]:
    """Pools opened meanwhile (in this context) name their connections `name`."""
    token = _application_name.set(name)
    try:
        yield
    finally:
        _application_name.reset(token)


def conninfo(server: Server = PRIMARY) -> str:
    """How this context's pools reach `server` (the primary by default, as Django sees it,
    so tests reach their test database)."""
    return route.conninfo(server, _application_name.get())


# A pool's attempt to replace a lost connection gives up after this long (psycopg_pool's
# default is 5 minutes, with delays doubling from 1 s to half that); the next search that
# finds no connection starts a new attempt at once. So after an outage of any length the
# pool connects again within about a second of Postgres being back.
RECONNECT_TIMEOUT_S = 2.0


def server_stalled(server: Server) -> None:
    """`server` answered nothing, not even a cancel request, within a clean-up's bound
    (retrieval/pg/statement.py): a frozen server is an outage too, and searches that find
    no idle connection fail at once until the probe gets an answer."""
    pool = _pools.get(asyncio.get_running_loop(), {}).get(server)
    if pool is not None:
        lost(pool)


# How often a pool's size and its event loop's tasks are written to the gauges: they say
# whether a stalled Postgres left anything behind once it answers again.
SAMPLE_S = 0.5
_samplers: "weakref.WeakKeyDictionary[AsyncConnectionPool, asyncio.Task[None]]" = (
    weakref.WeakKeyDictionary()
)


async def _sample(pool: AsyncConnectionPool, connections: str) -> None:
    """Keep the gauges of `connections` holding this pool's share, until it is closed or
    its loop ends (added as differences: a process may have several loops' pools of one
    name, and a pool gone takes its share with it)."""
    gauges = (
        metrics.POOL_CONNECTIONS.labels(connections=connections, state="idle"),
        metrics.POOL_CONNECTIONS.labels(connections=connections, state="in_use"),
        metrics.EVENT_LOOP_TASKS.labels(connections=connections),
    )
    shares = [0, 0, 0]
    try:
        while True:
            stats = pool.get_stats()
            idle = stats.get("pool_available", 0)
            now = [idle, stats.get("pool_size", 0) - idle, len(asyncio.all_tasks())]
            for gauge, share, new in zip(gauges, shares, now, strict=True):
                gauge.inc(new - share)
            shares = now
            await asyncio.sleep(SAMPLE_S)
    finally:
        for gauge, share in zip(gauges, shares, strict=True):
            gauge.dec(share)


# The connections a pool opens before its first search: one for each stage it runs at once.
FIRST_CONNECTIONS = 2


def _new_pool(loop: asyncio.AbstractEventLoop, server: Server) -> AsyncConnectionPool:
    """A new pool of `server`, this loop's from now on, and sampled."""
    pool = _pools.setdefault(loop, {})[server] = AsyncConnectionPool(
        conninfo(server),
        min_size=min(FIRST_CONNECTIONS, settings.SEARCH_POOL_SIZE),
        max_size=settings.SEARCH_POOL_SIZE,
        configure=_configure,
        open=False,
        name=f"search-{server.name}",
        reconnect_timeout=RECONNECT_TIMEOUT_S,
    )
    sampler = _sample(pool, _application_name.get())
    _samplers[pool] = loop.create_task(sampler, name="search-pool-sampler")
    return pool


# psycopg_pool allows one wait() on a pool at a time (a second fails an assertion): the
# first search's open and a readiness probe's fill, in two requests at once, take turns.
_waits: "weakref.WeakKeyDictionary[AsyncConnectionPool, asyncio.Lock]" = weakref.WeakKeyDictionary()


async def _wait(pool: AsyncConnectionPool, timeout_s: float) -> None:
    """`pool.wait`, after any other wait on it has ended."""
    async with _waits.setdefault(pool, asyncio.Lock()):
        await pool.wait(timeout_s)


async def get_pool(server: Server | None = None) -> AsyncConnectionPool:
    """This event loop's pool of `server`, by default the server this context's search is
    routed to (the primary outside a search)."""
    server = server or route.current_server()
    loop = asyncio.get_running_loop()
    pool = _pools.get(loop, {}).get(server)
    if pool is None:
        pool = _new_pool(loop, server)
        # Wait for the first connections, so a search need not pay for connecting (the
        # lexical and vector stages each take one at once); but for a bounded time: with
        # Postgres down, the pool's own wait was 30 s for the first searches of a process
        # started meanwhile. psycopg closes a pool that timed out: one that keeps trying
        # takes its place, the outage known, so the searches after these fail at once.
        try:
            await pool.open(wait=False)
            await _wait(pool, PROBE_TIMEOUT_S)
        except PoolTimeout as exc:
            _samplers.pop(pool).cancel()
            pool = _new_pool(loop, server)
            await pool.open(wait=False)
            lost(pool)
            raise DatabaseUnavailableError(
                f"Postgres ({server.name}) did not answer a first connection"
            ) from exc
    return pool


async def fill_pool(timeout_s: float) -> None:
    """Open this event loop's pool whole, SEARCH_POOL_SIZE connections, and keep them
    (min = max: none is closed for being idle), waiting at most `timeout_s` for them.

    For a web process before it takes traffic (retrieval/warming/warm_up.py). A pool that grows
    with demand and shrinks when idle took Postgres' connections from 6 to 14 during a
    30-minute soak at a steady rate, which ops cannot tell from a leak; and each connection
    it opened under load forked a backend while searches waited.

    The same for each replica searches may read (in parallel), so that one replica not
    answering costs the warm-up `timeout_s` once, not once per server."""
    await asyncio.gather(*(_fill(server, timeout_s) for server in (PRIMARY, *route.replicas())))


async def _fill(server: Server, timeout_s: float) -> None:
    try:
        pool = await get_pool(server)
        await pool.resize(settings.SEARCH_POOL_SIZE)
        await _wait(pool, timeout_s)
    except DatabaseUnavailableError:
        if server == PRIMARY:
            raise
        logger.warning("search pool (%s): unreachable; searches read elsewhere", server.name)
    except PoolTimeout:
        logger.warning(
            "search pool (%s): not whole in %.1f s; it goes on connecting", server.name, timeout_s
        )


@asynccontextmanager
async def connection(
    timeout_s: float, server: Server | None = None
) -> AsyncIterator[AsyncConnection]:
    """A pooled connection to `server` (by default, where this context's search is
    routed), waiting at most `timeout_s` for one; at once DatabaseUnavailableError while
    that server is known unreachable and no idle connection is left to try."""
    pool = await get_pool(server)
    if outage_lasts(pool) and not pool.get_stats().get("pool_available"):
        raise DatabaseUnavailableError("Postgres was unreachable at the last attempt")
    asked = time.perf_counter()
    try:
        async with checked_out(pool, max(timeout_s, 0.001)) as conn:
            if metrics.counted():
                metrics.POOL_WAIT.observe(time.perf_counter() - asked)
            try:
                yield conn
            except psycopg.OperationalError:
                if conn.broken:
                    lost(pool)
                raise
    except PoolTimeout:
        if metrics.counted():
            metrics.POOL_TIMEOUTS.inc()
        raise


async def close_pool() -> None:
    """Close this event loop's pools, if it has any (before the loop itself closes)."""
    for pool in _pools.pop(asyncio.get_running_loop(), {}).values():
        await _close(pool)


async def close_pools() -> None:
    for pools in list(_pools.values()):
        for pool in pools.values():
            await _close(pool)
    _pools.clear()


async def _close(pool: AsyncConnectionPool) -> None:
    sampler = _samplers.pop(pool, None)
    if sampler is not None:
        sampler.cancel()
    end_outage(pool)
    await pool.close()
