"""The shared breaker's state as Redis keeps it (`StateInRedis`), for `SharedBreaker`
(resilience/shared_breaker.py), which asks it while Redis answers.

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

Every method of `StateInRedis` may raise `redis.RedisError`.
"""

import json
import logging
import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TypeVar

import redis

from resilience.breaker import BreakerPolicy, BreakerState, admit, opened, record, trips

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


class StateInRedis:
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


def _sums(counts: list[_Raw], buckets: int) -> tuple[int, int]:
    values = [int(count or 0) for count in counts]
    return sum(values[:buckets]), sum(values[buckets:])
