"""A circuit breaker shared by every process through Redis: the vector stage's
(retrieval/service.py), which every web process must agree on.

One state machine: every transition is `resilience.breaker`'s `admit()` or `record()`,
applied to the document under `key` inside WATCH/MULTI (an optimistic transaction with a
bounded number of attempts). We chose that over a Lua script because the script would be
a second copy of the state machine, in a second language; WATCH only costs extra round
trips on transitions (open, probe, close), which are rare, and never on the hot path.

The one part kept outside the pure `BreakerState` is the closed state's window. As a tuple of
every outcome it would turn each call into a contended read-modify-write of a document
that grows with traffic. Instead each outcome is an INCR of a per-time-bucket counter
(`INCR` is atomic and commutes, so processes never conflict), and the window is the sum of
the last `BUCKETS` buckets: up to one bucket shorter than `policy.window_s`.

Redis layout (`E` = epoch, `B` = bucket index):
    key                   JSON: a `BreakerState` without outcomes, plus `epoch`
    key:calls:E:B         calls recorded in bucket B while the breaker was closed in epoch E
    key:failures:E:B      ... of which failed (slow calls are recorded failed by the caller)

Invariant: the closed window never counts an outcome recorded before the breaker last
closed, because closing starts a new epoch and counters are keyed by epoch.

Hot path: `record()` while closed is one pipelined round trip (GET, INCR + EXPIRE, MGET of
the window) and no WATCH. `allow()` reads Redis only when what it last saw cannot answer:
- closed, as read within `FRESH_S`: allowed, no read. Another process's opening is seen
  here within `FRESH_S` (and at the next `record()`, which reads the state anyway);
- open and still cooling down: refused, no read. Nothing can change during the cool-down
  (the probe that could close it only starts after it), so this verdict is exact;
- otherwise one GET, and the probe race (WATCH) when the cool-down is over.

Two classes, split where the mode changes. `_StateInRedis` is the state as Redis keeps it;
each of its methods may raise `redis.RedisError`. `SharedBreaker`, which callers use, asks
it while Redis answers. When Redis fails (any `redis.RedisError`), an `_Outage` begins:
this process carries on with its own breaker, starting from the last state it read, and
tries Redis again every `redis_retry_s`. Nothing in `SharedBreaker` raises because of
Redis. The client must fail fast: see `breaker_redis_client()` in
`resilience/redis_clients.py`.
"""

import json
import logging
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TypeVar

import redis

from resilience.breaker import (
    BreakerPolicy,
    BreakerState,
    State,
    admit,
    opened,
    record,
    record_many,
    trips,
)

logger = logging.getLogger(__name__)

T = TypeVar("T")
_Raw = bytes | str | None  # what redis-py returns for GET

BUCKETS = 10  # the closed window, in counters of policy.window_s / BUCKETS each
FRESH_S = 0.1  # a closed state read this recently answers allow() without Redis
MAX_ATTEMPTS = 5  # optimistic transactions tried before leaving a transition to others


@dataclass(frozen=True)
class _Shared:
    breaker: BreakerState  # its outcomes are always empty: the window lives in the counters
    epoch: int = 0


def _load(raw: _Raw) -> _Shared:
    if raw is None:
        return _Shared(BreakerState())
    try:
        data = json.loads(raw)
        return _Shared(BreakerState.from_json({**data, "outcomes": []}), int(data.get("epoch", 0)))
    except (ValueError, TypeError, AttributeError):
        logger.error("unreadable breaker state %r; treating it as closed", raw[:200])
        return _Shared(BreakerState())


def _dump(shared: _Shared) -> str:
    data = shared.breaker.to_json()
    del data["outcomes"]
    return json.dumps({**data, "epoch": shared.epoch})


def _moved_to(shared: _Shared, breaker: BreakerState) -> _Shared:
    """`shared` after a transition of the pure machine; closing starts a new window."""
    reopened_window = breaker.state == "closed" and shared.breaker.state != "closed"
    return _Shared(replace(breaker, outcomes=()), shared.epoch + int(reopened_window))


class _StateInRedis:
    """The breaker's state as Redis keeps it: the document under `key` and the closed
    window's counters. Every method may raise `redis.RedisError`."""

    def __init__(
        self,
        client: redis.Redis,
        key: str,
        policy: BreakerPolicy,
        clock: Callable[[], float],
    ) -> None:
        self.key = key
        self._client = client
        self._policy = policy
        self._clock = clock
        self._bucket_s = policy.window_s / BUCKETS
        # A counter must outlive the time its bucket spends inside the window.
        self._counter_ttl_s = math.ceil(policy.window_s + self._bucket_s) + 1
        # The last document read, its parsed form and when it was read, as one tuple so
        # threads see them together.
        self._seen_cache: tuple[_Raw, _Shared, float] = (None, _Shared(BreakerState()), -math.inf)

    @property
    def last_seen(self) -> BreakerState:
        """The state as last read or written, without asking Redis."""
        return self._seen_cache[1].breaker

    def known_verdict(self, now: float) -> bool | None:
        """`allow()`'s verdict when the last state seen settles it (see the module's
        docstring); None when Redis must be asked."""
        _, shared, seen_at = self._seen_cache
        breaker = shared.breaker
        if breaker.state == "closed":
            return True if now - seen_at < FRESH_S else None
        if breaker.state == "open" and breaker.opened_at is not None:
            return False if now - breaker.opened_at < self._policy.cooldown_s else None
        return None

    def read(self) -> BreakerState:
        return self._read().breaker

    def allow(self, now: float) -> bool:
        current = self._read()
        allowed, _ = admit(current.breaker, self._policy, now)
        if not allowed or current.breaker.state == "closed":
            return allowed  # closed, or open and cooling down: nothing to write
        # The cool-down is over: race the other processes for the probe. Only one
        # EXEC succeeds; the others re-read a fresh probe and are refused.
        return bool(self._update(lambda shared: self._admit(shared, now)))

    def record(self, now: float, calls: int, failures: int) -> None:
        epoch = self._seen_cache[1].epoch  # as of this process's last read, usually allow()'s
        current, in_window, failed_in_window = self._count(now, epoch, calls, failures)
        if current.breaker.state == "closed" and current.epoch != epoch:
            # It closed again since this process last looked: count in the current window.
            epoch = current.epoch
            current, in_window, failed_in_window = self._count(now, epoch, calls, failures)
        if current.breaker.state == "half_open":
            failed = failures > 0
            self._update(lambda shared: self._settle_probe(shared, now, failed=failed))
        elif current.breaker.state == "closed" and trips(in_window, failed_in_window, self._policy):
            self._update(lambda shared: self._trip(shared, epoch, now))
        # Open: a straggler that started before it opened. Its counts land in an epoch that
        # closing leaves behind, so they never count.

    def window(self, now: float) -> tuple[int, int]:
        """Calls and failures in the closed state's current window."""
        epoch = self._read().epoch
        return _sums(self._client.mget(self._window_keys(epoch, self._bucket(now))), BUCKETS)

    def _read(self) -> _Shared:
        return self._seen(self._client.get(self.key))

    def _seen(self, raw: _Raw) -> _Shared:
        cached_raw, cached, _ = self._seen_cache
        shared = cached if raw == cached_raw else _load(raw)
        self._seen_cache = (raw, shared, self._clock())
        return shared

    def _count(self, now: float, epoch: int, calls: int, failures: int) -> tuple[_Shared, int, int]:
        """Add outcomes to their bucket and read the state and window, in one round trip."""
        bucket = self._bucket(now)
        with self._client.pipeline(transaction=False) as pipe:
            pipe.get(self.key)
            calls_key, failures_key = self._counter_keys(epoch, bucket)
            for counter, added in ((calls_key, calls), (failures_key, failures)):
                if added:
                    pipe.incrby(counter, added)
                    pipe.expire(counter, self._counter_ttl_s)
            pipe.mget(self._window_keys(epoch, bucket))
            results = pipe.execute()
        calls, failures = _sums(results[-1], BUCKETS)
        return self._seen(results[0]), calls, failures

    def _update(self, change: Callable[[_Shared], tuple[T, _Shared]]) -> T | None:
        """Apply `change` to the stored state atomically. None if other processes kept
        changing it for `MAX_ATTEMPTS` tries: they are making the same transition."""
        for _ in range(MAX_ATTEMPTS):
            with self._client.pipeline() as pipe:
                try:
                    pipe.watch(self.key)  # type: ignore[no-untyped-call]  # unannotated in redis-py
                    current = self._seen(pipe.get(self.key))
                    result, changed = change(current)
                    if changed == current:
                        return result
                    document = _dump(changed)
                    pipe.multi()
                    pipe.set(self.key, document)
                    pipe.execute()
                except redis.WatchError:
                    continue
            self._seen_cache = (document.encode(), changed, self._clock())
            return result
        return None

    def _admit(self, shared: _Shared, now: float) -> tuple[bool, _Shared]:
        allowed, breaker = admit(shared.breaker, self._policy, now)
        return allowed, _moved_to(shared, breaker)

    def _settle_probe(self, shared: _Shared, now: float, *, failed: bool) -> tuple[None, _Shared]:
        if shared.breaker.state != "half_open":
            return None, shared  # another process settled it first
        return None, _moved_to(shared, record(shared.breaker, self._policy, now, failed=failed))

    def _trip(self, shared: _Shared, epoch: int, now: float) -> tuple[None, _Shared]:
        if shared.breaker.state != "closed" or shared.epoch != epoch:
            return None, shared  # another process tripped it first
        return None, _moved_to(shared, opened(now))

    def _bucket(self, now: float) -> int:
        return math.floor(now / self._bucket_s)

    def _counter_keys(self, epoch: int, bucket: int) -> tuple[str, str]:
        return f"{self.key}:calls:{epoch}:{bucket}", f"{self.key}:failures:{epoch}:{bucket}"

    def _window_keys(self, epoch: int, bucket: int) -> list[str]:
        """Calls keys of the window's buckets, then its failures keys."""
        first = bucket - BUCKETS + 1
        pairs = [self._counter_keys(epoch, b) for b in range(first, bucket + 1)]
        return [calls for calls, _ in pairs] + [failures for _, failures in pairs]


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
        self._in_redis = _StateInRedis(redis_client, key, policy, clock)
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


def _sums(counts: list[_Raw], buckets: int) -> tuple[int, int]:
    values = [int(count or 0) for count in counts]
    return sum(values[:buckets]), sum(values[buckets:])
