"""A circuit breaker shared by every process through Redis: the vector stage's
(retrieval/service.py), which every web process must agree on.

Two classes, split where the mode changes. `StateInRedis` (resilience/state_in_redis.py)
is the state as Redis keeps it, one state machine for every process; each of its methods
may raise `redis.RedisError`. `SharedBreaker`, which callers use, asks it while Redis
answers. When Redis fails (any `redis.RedisError`), an `_Outage` begins: this process
carries on with its own breaker, starting from the last state it read, and tries Redis
again every `redis_retry_s`. Nothing in `SharedBreaker` raises because of Redis. The
client must fail fast: see `breaker_redis_client()` in `resilience/redis_clients.py`.
"""

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import redis

from resilience.breaker import BreakerPolicy, BreakerState, State, admit, record_many
from resilience.state_in_redis import StateInRedis

logger = logging.getLogger(__name__)


@dataclass
class _Outage:
    """Redis is failing: this process runs on its own breaker, which started from the last
    state it read, and asks Redis again from `retry_at` on."""

    breaker: BreakerState
    retry_at: float


class SharedBreaker:
    """What callers use: the state in Redis while Redis answers, this process's own breaker
    during an `_Outage`. Nothing here raises because of Redis."""

    def __init__(
        self,
        redis_client: redis.Redis,
        key: str,
        policy: BreakerPolicy,
        clock: Callable[[], float] = time.time,
        *,
        redis_retry_s: float = 1.0,
    ) -> None:
        # `clock` is wall time, not monotonic: opened_at and bucket indices are compared
        # across processes.
        self._in_redis = StateInRedis(redis_client, key, policy, clock)
        self._policy = policy
        self._clock = clock
        self._redis_retry_s = redis_retry_s
        self._lock = threading.Lock()  # taken to begin or end an outage, and to change its breaker
        self._outage: _Outage | None = None  # None while Redis answers

    @property
    def shared(self) -> bool:
        """False while an outage lasts: this process runs on its own breaker."""
        return self._outage is None

    def allow(self, *, reconnect: bool = True) -> bool:
        """Whether the guarded call (the vector stage) may go ahead now. After the
        cool-down, exactly one caller across all processes is let through as the half-open
        probe. With `reconnect` False, a process in an outage answers from its own breaker
        without trying Redis again (an event loop leaves that to a thread: see
        retrieval/bounds/breaker_gate.py)."""
        now = self._clock()
        if self._outage is None:
            known = self._in_redis.known_verdict(now)
            if known is not None:
                return known
        if self._redis_answers(now, reconnect=reconnect):
            try:
                return self._in_redis.allow(now)
            except redis.RedisError as exc:
                self._begin_outage(now, exc)
        return self._allow_on_own(now)

    def record(self, *, failed: bool) -> None:
        """Fold one call's outcome in; the caller records a slow call as failed."""
        self.record_outcomes(1, int(failed))

    def record_outcomes(self, calls: int, failures: int) -> None:
        """Fold in the outcomes of `calls` calls, `failures` of them failed, in one round
        trip however many. A half-open breaker's probe counts as failed if any did."""
        if calls < 1 or not 0 <= failures <= calls:
            raise ValueError(f"{failures} failures of {calls} calls")
        now = self._clock()
        if self._redis_answers(now):
            try:
                self._in_redis.record(now, calls, failures)
                return
            except redis.RedisError as exc:
                self._begin_outage(now, exc)
        self._record_on_own(now, calls, failures)

    def last_seen_state(self) -> State:
        """The state as this process last knew it, without asking Redis."""
        return self._current_breaker().state

    def state(self) -> State:
        now = self._clock()
        if self._redis_answers(now):
            try:
                return self._in_redis.read().state
            except redis.RedisError as exc:
                self._begin_outage(now, exc)
        return self.last_seen_state()

    def window(self) -> tuple[int, int]:
        """Calls and failures in the closed state's current window."""
        now = self._clock()
        if self._redis_answers(now):
            try:
                return self._in_redis.window(now)
            except redis.RedisError as exc:
                self._begin_outage(now, exc)
        window = self._policy.window_s
        recent = [failed for t, failed in self._current_breaker().outcomes if now - t < window]
        return len(recent), sum(recent)

    def _redis_answers(self, now: float, *, reconnect: bool = True) -> bool:
        """True while no outage lasts. During one, False, except once per `redis_retry_s`
        when `reconnect`, when a read decides whether the outage is over."""
        outage = self._outage
        if outage is None:
            return True
        if now < outage.retry_at or not reconnect:
            return False
        try:
            self._in_redis.read()
        except redis.RedisError:
            outage.retry_at = now + self._redis_retry_s
            return False
        with self._lock:
            self._outage = None
        logger.warning("breaker %s: Redis answers again; using the shared state", self._key)
        return True

    def _begin_outage(self, now: float, exc: redis.RedisError) -> None:
        with self._lock:
            if self._outage is not None:
                self._outage.retry_at = now + self._redis_retry_s
                return
            self._outage = _Outage(self._in_redis.last_seen, now + self._redis_retry_s)
        logger.warning("breaker %s: Redis failed (%r); using this process's own", self._key, exc)

    @property
    def _key(self) -> str:
        return self._in_redis.key

    def _current_breaker(self) -> BreakerState:
        """This process's own during an outage, else the shared state as last seen."""
        with self._lock:
            return self._in_redis.last_seen if self._outage is None else self._outage.breaker

    # If Redis came back between the caller's check and taking the lock, the verdict comes
    # from the last shared state and the outcome is dropped: the outage is over.

    def _allow_on_own(self, now: float) -> bool:
        with self._lock:
            outage = self._outage
            if outage is None:
                return admit(self._in_redis.last_seen, self._policy, now)[0]
            allowed, outage.breaker = admit(outage.breaker, self._policy, now)
        return allowed

    def _record_on_own(self, now: float, calls: int, failures: int) -> None:
        with self._lock:
            if self._outage is None:
                return
            # Failures first: a half-open probe among them settles as failed, as shared.
            self._outage.breaker = record_many(
                self._outage.breaker, self._policy, now, calls=calls, failures=failures
            )
