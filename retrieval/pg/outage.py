"""Postgres seen unreachable by a search pool, and searches failing fast until it answers.

While Postgres is unreachable, a search must fail at once rather than wait its whole
deadline for a connection that cannot come; one probe per outage finds out when it is
back (retrieval/pg/pool.py's pools begin and end outages here).
"""

import asyncio
import logging
import weakref

import psycopg
from psycopg_pool import AsyncConnectionPool

logger = logging.getLogger(__name__)

# While Postgres is unreachable, how long the prober waits for a connection per attempt,
# and how long it pauses after an attempt that failed at once.
PROBE_TIMEOUT_S = 1.0
PROBE_PAUSE_S = 0.1


class DatabaseUnavailableError(psycopg.OperationalError):
    """Postgres was unreachable at the last attempt and the pool has no connection: the
    search fails now instead of waiting its deadline out (callers map psycopg errors to
    `database_error` / `lexical_error`, a 503 with Retry-After)."""


class _Outage:
    """Postgres seen unreachable by one pool: a connection broke under a statement. Until
    a probe gets an answer from Postgres, searches that find no idle connection fail at
    once. One probe task per outage, on the pool's event loop; it ends when Postgres
    answers, after discarding the pool's other connections broken meanwhile."""

    def __init__(self, pool: AsyncConnectionPool) -> None:
        self.probe = asyncio.create_task(self._probe(pool), name="postgres-probe")

    @property
    def lasts(self) -> bool:
        return not self.probe.done()

    @staticmethod
    async def _probe(pool: AsyncConnectionPool) -> None:
        logger.warning("search pool: Postgres unreachable; failing searches fast until it answers")
        while True:
            try:
                # Waiting for a connection makes the pool start an attempt to add one.
                async with pool.connection(timeout=PROBE_TIMEOUT_S) as conn:
                    await conn.execute("SELECT 1")
            except psycopg.Error:
                await asyncio.sleep(PROBE_PAUSE_S)  # the pool's attempt or the server failed fast
                continue
            await pool.check()
            logger.warning("search pool: Postgres answers again")
            return


_outages: "weakref.WeakKeyDictionary[AsyncConnectionPool, _Outage]" = weakref.WeakKeyDictionary()


def outage_lasts(pool: AsyncConnectionPool) -> bool:
    outage = _outages.get(pool)
    return outage is not None and outage.lasts


def lost(pool: AsyncConnectionPool) -> None:
    """A connection of `pool` broke: begin an outage, unless one is under way."""
    if not outage_lasts(pool):
        _outages[pool] = _Outage(pool)


def end_outage(pool: AsyncConnectionPool) -> None:
    """Forget `pool`'s outage, its probe stopped (the pool is being closed)."""
    outage = _outages.pop(pool, None)
    if outage is not None:
        outage.probe.cancel()
