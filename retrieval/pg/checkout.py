"""Taking a connection from psycopg_pool and giving it back, so that a cancellation can
never lose it.

A search cancels its stages when their budgets run out, and under load a stage is often
cancelled just as its statement has ended, while it gives its connection back: the pool's
own `connection()` awaits `putconn` in a `finally`, `putconn` waits for the pool's lock,
and a cancellation landing there leaves the connection counted as checked out forever.
Measured at 100,000 listings with a feed running, the search pool reported all 32
connections checked out while no search held one, every search after that was a 503, and
the pool never recovered (docs/reliability.md). Here the return runs in a task of its own,
shielded: a cancelled caller stops waiting at once, and the return goes on to its end.

The wait for a connection is not shielded: a caller cancelled while it waits leaves the
pool's queue then (a shielded wait left cancelled callers queued ahead of live ones, and
the pool wait of searches at 34-52/s rose from about 1 ms to 7-10 ms).
"""

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool

# Returns under way, referenced until they end (the event loop keeps only weak references
# to tasks).
_returning: "set[asyncio.Task[None]]" = set()


@asynccontextmanager
async def checked_out(
    pool: AsyncConnectionPool, timeout_s: float
) -> AsyncIterator[AsyncConnection]:
    """A connection of `pool` for the body, waiting at most `timeout_s` for one; always
    returned to the pool, however the body ends."""
    conn = await pool.getconn(timeout=timeout_s)
    try:
        yield conn
    finally:
        # The pool resets a connection left in a transaction, or discards a broken one.
        returning = asyncio.ensure_future(pool.putconn(conn))
        _returning.add(returning)
        returning.add_done_callback(_returning.discard)
        await asyncio.shield(returning)
