"""One hot-path statement under a deadline: its wait for a pooled connection and its own
`statement_timeout` both come out of what the deadline has left, and its text is tagged so
that operators can tell a search's statements apart in pg_stat_activity.

The caller waits for the statement by the deadline, never for the server. A server that
is frozen (a paused VM, a swap storm, a stalled disk) enforces no `statement_timeout`
and answers no cancel request, and psycopg's own clean-up of a cancelled statement waits
5 s for each (a search in flight when Postgres froze answered only at the thaw, 6.4 s
later). So the statement runs in a task of its own: past its deadline the caller stops
waiting and goes on, and the task is cancelled behind it. Its clean-up (psycopg's cancel
request, the server's answer, the connection's return) gets `SEARCH_CLEANUP_BOUND_MS`;
past that the task is cancelled again, which makes psycopg close the connection, the
pool open another in its place, and the search pool treat Postgres as unreachable until a
probe gets an answer (retrieval/pg/pool.py).

A search routed to a replica (retrieval/pg/route.py) gives the replica
`SEARCH_REPLICA_PATIENCE_MS` of the statement's time: a replica that errs, cancels the
statement in a conflict with its recovery, or has not answered by then, is given up on
for the rest of the search, and the statement runs on the primary by what is left of the
same deadline. The replica's breaker hears each outcome.
"""

import asyncio
import logging
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import psycopg
from django.conf import settings
from psycopg import AsyncClientCursor
from psycopg.errors import QueryCanceled, SerializationFailure
from psycopg_pool import PoolTimeout

from retrieval import metrics
from retrieval.bounds.deadline import Deadline
from retrieval.pg import route
from retrieval.pg.pool import connection, ensure_prepared, server_stalled
from retrieval.pg.route import PRIMARY, Server
from retrieval.types import Reason, StageTimeoutError

logger = logging.getLogger(__name__)

# How long past its deadline a statement may go unanswered before its caller stops
# waiting: the server's own statement_timeout, set to the same instant, normally ends it
# first, and says so in a message the caller already handles.
SERVER_GRACE_S = 0.005

# Statements abandoned past their deadline whose clean-up is still under way, referenced
# until it ends (the event loop keeps only weak references to tasks).
_abandoned: "set[asyncio.Task[list[tuple[Any, ...]]]]" = set()

# Tags that open a hot-path statement's text (see fetch_with_local_settings).
LEXICAL_TAG = "searchsite:lexical"
VECTOR_TAG = "searchsite:vector"
GENERATION_TAG = "searchsite:generation"
BUDGETS_TAG = "searchsite:budgets"
LISTINGS_TAG = "searchsite:listings"
SUGGEST_TAG = "searchsite:suggest"
FACETS_TAG = "searchsite:facets"
REPLICATION_TAG = "searchsite:replication"  # a replica's check (retrieval/pg/replicas.py)


async def fetch_with_local_settings(
    tag: str,
    statement: str,
    params: dict[str, object],
    deadline: Deadline,
    *,
    local: dict[str, str] | None = None,
    prepared: tuple[str, str] | None = None,
    pool_wait_s: float | None = None,
) -> list[tuple[Any, ...]]:
    """Rows of `statement`, run by `deadline` (its wait for a pooled connection, then its
    own `statement_timeout`: what is left once it has a connection) and with the
    transaction-local settings `local`, in one round trip. The server's timeout, or a
    deadline already past when the statement would be sent, raises StageTimeoutError.

    The settings and the statement travel as one simple-protocol message, which Postgres
    runs as one implicit transaction: the settings hold for the statement and end with it,
    as `SET LOCAL` in an explicit transaction would. Parameters are bound client-side, by
    psycopg's quoting. Measured against BEGIN / set_config / statement / COMMIT pipelined
    on an async connection: the same single round trip for 0.2 ms of client CPU instead
    of 0.45 ms, which two stages per search pay on one event loop.

    The text opens with a `/* tag */` comment: with the values inlined, a query vector
    fills pg_stat_activity's first kilobyte (track_activity_query_size) before the table
    is named, and operators still need to tell a search's statements apart.

    `prepared`, a statement name and an `EXECUTE` text, stands in for `statement` on a
    connection that has that name prepared, or prepares it now (see `prepare_on_connect`
    and `prepare_when_used`). `pool_wait_s` shortens the wait for a connection (work that
    must not queue for one a search needs).

    No answer by the deadline (+ SERVER_GRACE_S) raises StageTimeoutError too, whatever
    the server is doing; a caller cancelled meanwhile stops waiting at once. Either way
    the statement's clean-up goes on behind the caller, bounded (see the module's doc).
    """
    statement_ = _Statement(tag, statement, params, local, prepared, pool_wait_s)
    on = route.current()
    if on is None or on.server == PRIMARY:
        return await _bounded(statement_, PRIMARY, deadline)
    replica = on.server
    if on.fixed:
        return await _bounded(statement_, replica, deadline)
    patience_at = deadline.clock() + settings.SEARCH_REPLICA_PATIENCE_MS / 1000
    patience = Deadline(min(deadline.at, patience_at), deadline.clock)
    try:
        rows = await _bounded(statement_, replica, patience)
    except (StageTimeoutError, SerializationFailure, psycopg.OperationalError, PoolTimeout) as exc:
        if isinstance(exc, StageTimeoutError) and patience.at >= deadline.at:
            raise  # the statement's own time ran out, not the replica's patience
        if on.outcomes is not None:
            on.outcomes.failed(replica, "late" if isinstance(exc, StageTimeoutError) else "error")
        logger.debug("%s: %s %s; reading the primary", replica.name, tag, type(exc).__name__)
        on.fall_back(Reason.REPLICA_UNAVAILABLE)
        return await _bounded(statement_, PRIMARY, deadline)
    if on.outcomes is not None:
        on.outcomes.answered(replica)
    return rows


@dataclass(frozen=True)
class _Statement:
    tag: str
    text: str
    params: dict[str, object]
    local: dict[str, str] | None
    prepared: tuple[str, str] | None
    pool_wait_s: float | None


async def _bounded(
    statement: _Statement, server: Server, deadline: Deadline
) -> list[tuple[Any, ...]]:
    """`statement`'s rows from `server`, waited for by `deadline` and no longer."""
    running = asyncio.ensure_future(_fetch(statement, server, deadline))
    try:
        await asyncio.wait({running}, timeout=deadline.remaining_ms() / 1000 + SERVER_GRACE_S)
    except asyncio.CancelledError:
        _abandon(running, server)
        raise
    if not running.done():
        _abandon(running, server)
        raise StageTimeoutError("Postgres did not answer by the deadline")
    return running.result()


def _abandon(running: "asyncio.Task[list[tuple[Any, ...]]]", server: Server) -> None:
    """Cancel a statement no one waits for, and bound its clean-up."""
    running.cancel()  # psycopg sends the server a cancel request, and waits for its answer
    _abandoned.add(running)
    metrics.STATEMENTS_ABANDONED.inc()
    loop = asyncio.get_running_loop()
    cut_off = loop.call_later(settings.SEARCH_CLEANUP_BOUND_MS / 1000, _cut_off, running, server)

    def ended(_: "asyncio.Task[list[tuple[Any, ...]]]") -> None:
        cut_off.cancel()
        _abandoned.discard(running)
        metrics.STATEMENTS_ABANDONED.dec()
        if not running.cancelled():
            running.exception()  # retrieved: it ended after its caller stopped waiting

    running.add_done_callback(ended)


def _cut_off(running: "asyncio.Task[list[tuple[Any, ...]]]", server: Server) -> None:
    """The clean-up ran out of its bound: the server answers nothing, not even a cancel
    request. Interrupted in its clean-up, psycopg closes the connection (pgconn.finish:
    no round trip), and the pool, given back a closed connection, opens another."""
    if running.done():
        return
    metrics.CLEANUPS_CUT_OFF.inc()
    server_stalled(server)
    running.cancel()
    # Should the task not end even so, it is cut off again after another bound.
    loop = asyncio.get_running_loop()
    again = loop.call_later(settings.SEARCH_CLEANUP_BOUND_MS / 1000, _cut_off, running, server)
    running.add_done_callback(lambda _: again.cancel())


async def _fetch(
    statement: _Statement, server: Server, deadline: Deadline
) -> list[tuple[Any, ...]]:
    wait_s = deadline.remaining_ms() / 1000
    if statement.pool_wait_s is not None:
        wait_s = min(wait_s, statement.pool_wait_s)
    try:
        async with connection(wait_s, server) as conn:
            left_ms = deadline.remaining_ms()
            if left_ms <= 0:
                raise StageTimeoutError("the deadline passed before the statement was sent")
            transaction_local = {
                "statement_timeout": _timeout_setting(left_ms),
                **(statement.local or {}),
            }
            bound = dict(statement.params)
            for number, (name, value) in enumerate(transaction_local.items()):
                bound[f"_local_{number}_name"], bound[f"_local_{number}_value"] = name, value
            text = statement.text
            if statement.prepared is not None and await ensure_prepared(
                conn, statement.prepared[0]
            ):
                text = statement.prepared[1]
            cursor = AsyncClientCursor(conn)
            await cursor.execute(_message(statement.tag, text, len(transaction_local)), bound)
            cursor.nextset()  # past the settings' own row
            return await cursor.fetchall()
    except QueryCanceled as exc:  # statement_timeout: cancellations by us arrive as such
        raise StageTimeoutError(str(exc)) from exc


@lru_cache(maxsize=64)
def _message(tag: str, statement: str, settings: int) -> str:
    """The same few texts every time, so psycopg's parse of their placeholders is cached."""
    if not re.fullmatch(r"[a-z:_-]+", tag):
        raise ValueError(f"not a statement tag: {tag!r}")
    setters = ", ".join(
        f"set_config(%(_local_{n}_name)s, %(_local_{n}_value)s, true)" for n in range(settings)
    )
    return f"/* {tag} */ SELECT {setters}; {statement}"


def _timeout_setting(timeout_ms: float) -> str:
    # statement_timeout takes whole milliseconds; 0 would mean "no limit".
    return f"{max(1, int(timeout_ms))}ms"
