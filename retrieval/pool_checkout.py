"""Taking a connection from psycopg_pool and giving it back, with no cancellation ever
reaching inside the pool.

A search cancels its stages when their budgets run out, and under load many of them are
waiting for a pooled connection at that moment. psycopg_pool 3.3.3 loses connections to
cancellations that land at the wrong instant of `getconn` (upstream psycopg#509, #1275,
#1345 describe such races): measured here at 100,000 listings with a feed running, the
search pool reported all 32 connections checked out while no search held one and no
maintenance task was queued, every search after that was a 503, and the pool never
recovered (docs/reliability.md). So the pool's own wait runs in a task of its own,
shielded: a cancelled caller stops waiting at once, and the connection the pool hands
that task later goes straight back. Giving it back is shielded the same way, so a second
cancellation of the caller cannot interrupt `putconn` halfway either.

The pool's `timeout` still bounds every wait: a shielded `getconn` ends by itself.
"""

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool

# Tasks returning connections, referenced until they end (the event loop keeps only weak
# references to tasks).
_returning: "set[asyncio.Task[None]]" = set()


@asynccontextmanager
async def checked_out(
    pool: AsyncConnectionPool, timeout_s: float
) -> AsyncIterator[AsyncConnection]:
    """A connection of `pool` for the body, waiting at most `timeout_s` for one; always
    returned to the pool, however the body or the wait ends."""
    getting = asyncio.ensure_future(pool.getconn(timeout=timeout_s))
    try:
        conn = await asyncio.shield(getting)
    except asyncio.CancelledError:
        getting.add_done_callback(lambda done: _give_back_when_got(pool, done))
        raise
    try:
        yield conn
    finally:
        await _give_back(pool, conn)


def _give_back_when_got(
    pool: AsyncConnectionPool, getting: "asyncio.Future[AsyncConnection]"
) -> None:
    if not getting.cancelled() and getting.exception() is None:
        task = asyncio.ensure_future(pool.putconn(getting.result()))
        _returning.add(task)
        task.add_done_callback(_returning.discard)


async def _give_back(pool: AsyncConnectionPool, conn: AsyncConnection) -> None:
    """`putconn`, carried through to the end even if the caller is cancelled meanwhile
    (the pool resets a connection left in a transaction, or discards a broken one)."""
    task = asyncio.ensure_future(pool.putconn(conn))
    _returning.add(task)
    task.add_done_callback(_returning.discard)
    await asyncio.shield(task)
