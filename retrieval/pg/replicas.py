"""Which replica a search reads from, by each replica's health and replay lag.

Each process checks its replicas at most every `SEARCH_REPLICA_CHECK_S`, behind the
searches (stale while revalidating, as the generation lookup does): the primary's flushed
WAL position, then how far each replica has replayed. A replica's replay lag is how long ago
the primary had written WAL that the replica has not replayed yet: the primary's
positions, sampled at each check, say when it passed each one. So an idle primary gives
no lag, however long ago its last transaction (which `pg_last_xact_replay_timestamp`
alone would count), and a replica that stopped replaying (`recovery_min_apply_delay`,
a paused or frozen server) is seen as far behind as it is. A replica whose check did not
answer, or whose lag is unknown yet, is not read.

A search is routed to a replica that is within `SEARCH_REPLICA_MAX_LAG_S`, whose breaker
admits it, and that has replayed the reader's own last change when the reader made one
(`min_lsn`); among several, in turn. Otherwise it reads the primary, and says why.
"""

import asyncio
import itertools
import logging
import math
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

import psycopg
from django.conf import settings
from psycopg_pool import PoolTimeout

from resilience.breaker import BreakerPolicy, BreakerState, admit, policy_from_settings, record
from resilience.single_flight import SingleFlight
from retrieval import metrics
from retrieval.bounds.deadline import Deadline
from retrieval.pg import route
from retrieval.pg.route import PRIMARY, Route, Server
from retrieval.pg.statement import REPLICATION_TAG, fetch_with_local_settings
from retrieval.types import Reason, StageTimeoutError

logger = logging.getLogger(__name__)

# Flushed, not merely written: only flushed WAL is sent to replicas (a read's hint bits can
# leave written WAL unflushed for a wal_writer_delay, which no replica could have replayed).
PRIMARY_POSITION = "SELECT pg_wal_lsn_diff(pg_current_wal_flush_lsn(), '0/0')::bigint"
# NULL on a server that is not a replica: it is then never read as one.
_REPLAYED = (
    "SELECT CASE WHEN pg_is_in_recovery()"
    " THEN pg_wal_lsn_diff(pg_last_wal_replay_lsn(), '0/0')::bigint END"
)


@dataclass
class _Replica:
    server: Server
    breaker: BreakerState = field(default_factory=BreakerState)
    replayed: int | None = None  # bytes of WAL replayed, as of its last check
    lag_s: float | None = None  # None: not known (no answer, or too little history)


class Replicas:
    """The replicas of one process: their lag, as last checked, and their breakers."""

    def __init__(
        self,
        servers: Sequence[Server],
        *,
        max_lag_s: float,
        check_s: float,
        check_timeout_s: float,
        policy: BreakerPolicy,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._replicas = {server: _Replica(server) for server in servers}
        self._max_lag_s = max_lag_s
        self._check_s = check_s
        self._check_timeout_s = check_timeout_s
        self._policy = policy
        self._clock = clock
        self._checked_at = float("-inf")
        # (when, the primary's WAL position then), oldest first: long enough to tell a
        # lag past the bound from one within it.
        self._positions: deque[tuple[float, int]] = deque()
        self._turn = itertools.count()
        self._checks: SingleFlight[None] = SingleFlight()

    def route(self, min_lsn: int | None = None) -> Route:
        """Where a search starting now reads (`min_lsn`: the reader's own last change,
        which the replica must have replayed). Starts a check if the last is stale."""
        self._check_if_stale()
        if not self._replicas:
            return Route(PRIMARY)
        now = self._clock()
        fresh = [
            replica
            for replica in self._replicas.values()
            if replica.lag_s is not None
            and replica.lag_s <= self._max_lag_s
            and (min_lsn is None or (replica.replayed or 0) >= min_lsn)
        ]
        start = next(self._turn)
        for offset in range(len(fresh)):
            replica = fresh[(start + offset) % len(fresh)]
            admitted, replica.breaker = admit(replica.breaker, self._policy, now)
            if admitted:
                return Route(replica.server, outcomes=self)
        # Lagging: some replica answered its check, and none is close enough behind;
        # unavailable: none answered, or the close ones are all cut off by their breakers.
        answering = any(replica.lag_s is not None for replica in self._replicas.values())
        lagging = answering and not fresh
        return Route(
            PRIMARY, reasons=[Reason.REPLICA_LAGGING if lagging else Reason.REPLICA_UNAVAILABLE]
        )

    def answered(self, server: Server) -> None:
        self._record(server, "answered")

    def failed(self, server: Server, how: Literal["late", "error"]) -> None:
        self._record(server, how)

    def _record(self, server: Server, outcome: Literal["answered", "late", "error"]) -> None:
        replica = self._replicas.get(server)
        if replica is not None:
            failed = outcome != "answered"
            replica.breaker = record(replica.breaker, self._policy, self._clock(), failed=failed)
            metrics.REPLICA_STATEMENTS.labels(server=server.name, outcome=outcome).inc()

    def answering(self, server: Server) -> bool:
        """Whether `server` answered its last check (its lag may not be known yet)."""
        return self._replicas[server].replayed is not None

    def _check_if_stale(self) -> None:
        if not self._replicas or self._clock() - self._checked_at < self._check_s:
            return
        self._checks.run(self.check, name="replica-check")

    async def check(self) -> None:
        """Read the primary's WAL position, then every replica's replay, and set their lags."""
        self._checked_at = self._clock()
        deadline = Deadline(self._clock() + self._check_timeout_s, self._clock)
        try:
            position = await _position(PRIMARY, PRIMARY_POSITION, deadline)
        except _CHECK_FAILURES:
            return  # no reference: the lags stay as they were, until the next check
        if position is None:
            return
        sampled_at = self._clock()
        self._positions.append((sampled_at, position))
        while sampled_at - self._positions[0][0] > max(4 * self._max_lag_s, 10.0):
            self._positions.popleft()
        servers = list(self._replicas)
        replayed = await asyncio.gather(
            *(_position(server, _REPLAYED, deadline) for server in servers),
            return_exceptions=True,
        )
        now = self._clock()
        for server, answer in zip(servers, replayed, strict=True):
            replica = self._replicas[server]
            if isinstance(answer, int):
                replica.replayed, replica.lag_s = answer, self._lag(answer, now)
            else:
                if isinstance(answer, BaseException) and not isinstance(answer, _CHECK_FAILURES):
                    logger.warning("replica check (%s) failed: %r", server.name, answer)
                replica.replayed, replica.lag_s = None, None
            lag = math.nan if replica.lag_s is None else replica.lag_s
            metrics.REPLICA_LAG.labels(server=server.name).set(lag)

    async def check_until_known(self, within_s: float) -> None:
        """Check, then check again every `check_s` while a replica that answers has a lag
        not known yet, for at most `within_s`. The primary's flushed WAL can end inside a
        record (its WAL writer flushes whole pages first), which no replica replays until
        the rest is flushed, a WAL writer's round or a few later: until then a replica
        that has replayed all it can is behind the first position sampled, and not known
        to be close."""
        give_up_at = self._clock() + within_s
        await self.check()
        while self._clock() < give_up_at and any(
            replica.replayed is not None and replica.lag_s is None
            for replica in self._replicas.values()
        ):
            await asyncio.sleep(self._check_s)
            await self.check()

    def _lag(self, replayed: int, now: float) -> float | None:
        """How long ago the primary passed the first position `replayed` falls short
        of: 0 when it has replayed the latest; None when even the oldest position kept
        is past it, and that is not yet longer ago than the bound."""
        for number, (sampled_at, position) in enumerate(self._positions):
            if position > replayed:
                lag = now - sampled_at
                return None if number == 0 and lag <= self._max_lag_s else lag
        return 0.0

    def forget(self) -> None:
        """Forget every check (tests, and a changed set of replicas)."""
        self._checked_at = float("-inf")
        self._positions.clear()
        for replica in self._replicas.values():
            replica.replayed, replica.lag_s = None, None


_CHECK_FAILURES = (StageTimeoutError, psycopg.Error, PoolTimeout, OSError)


async def _position(server: Server, statement: str, deadline: Deadline) -> int | None:
    with route.routed(Route(server, fixed=True)):
        rows = await fetch_with_local_settings(REPLICATION_TAG, statement, {}, deadline)
    value = rows[0][0] if rows else None
    return None if value is None else int(value)


_replicas: Replicas | None = None


def replicas() -> Replicas:
    """This process's replicas, as the settings name them."""
    global _replicas
    if _replicas is None:
        _replicas = Replicas(
            route.replicas(),
            max_lag_s=settings.SEARCH_REPLICA_MAX_LAG_S,
            check_s=settings.SEARCH_REPLICA_CHECK_S,
            check_timeout_s=settings.SEARCH_REPLICA_CHECK_TIMEOUT_MS / 1000,
            policy=policy_from_settings("REPLICA_BREAKER"),
        )
    return _replicas


def forget_replicas() -> None:
    """Drop this process's replicas (after a settings change, and between tests)."""
    global _replicas
    _replicas = None
    route.replicas.cache_clear()
