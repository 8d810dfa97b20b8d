"""The shared breaker as the event loop calls it: `BreakerGate`, the vector stage's breaker
that `hybrid_search` asks (`retrieval.protocols.VectorGate`).

Recording an outcome is a Redis round trip (0.5 ms here, up to the client's timeout while
Redis struggles); made on the event loop, it held up every other search of the process.
So `record()` only adds the outcome to two counters, and one background thread hands
what has gathered to the breaker in one call (`SharedBreaker.record_outcomes`): one round
trip at a time, however many searches finish meanwhile. Nothing queues up without bound
and nothing is dropped: while Redis is slow, outcomes just gather into the next call.

The thread lingers `linger_s` after the first outcome before it hands over, so under load
one round trip carries many searches' outcomes, instead of one per search landing in the
middle of the next search (measured: the hand-over, done at once, added 0.5 ms to the
median search in a back-to-back run). The breaker hears of an outcome that much later;
its window is tens of seconds.

`allow()` stays synchronous: it usually needs no round trip at all (see
`SharedBreaker`), and its verdict is needed before the vector stage starts. While Redis
fails it never tries Redis again: a connection attempt to an unreachable server would hold
the loop for the client's whole timeout. The thread's next hand-over tries instead, at
most once per `redis_retry_s`, and finding Redis back switches every later `allow()` to
the shared state.
"""

import logging
import threading
from typing import Protocol

from resilience.breaker import State
from retrieval import metrics

logger = logging.getLogger(__name__)


class BreakerStore(Protocol):  # resilience.shared_breaker.SharedBreaker
    def allow(self, *, reconnect: bool = True) -> bool: ...

    def record_outcomes(self, calls: int, failures: int) -> None: ...

    def last_seen_state(self) -> State: ...


class BreakerGate:
    def __init__(
        self, breaker: BreakerStore, *, linger_s: float = 0.05, reported: bool = True
    ) -> None:
        """`reported`: whether `allow` shows the state in `retrieval_vector_breaker_open`,
        which is the public breaker's (the evaluation API's own gate is not reported)."""
        self.breaker = breaker
        self._linger_s = linger_s
        self._reported = reported
        self._changed = threading.Condition()
        self._calls = self._failures = 0  # gathered, not yet handed over
        self._recording = False
        self._hurry = False  # someone waits in flush(): no lingering
        self._closed = False
        threading.Thread(target=self._hand_over, name="vector-breaker", daemon=True).start()

    def allow(self) -> bool:
        allowed = self.breaker.allow(reconnect=False)
        if self._reported:
            metrics.BREAKER_STATE.set(int(self.breaker.last_seen_state() != "closed"))
        return allowed

    def record(self, *, failed: bool) -> None:
        with self._changed:
            self._calls += 1
            self._failures += int(failed)
            self._changed.notify_all()

    def flush(self) -> None:
        """Wait until every outcome recorded so far is handed to the breaker."""
        with self._changed:
            self._hurry = True
            self._changed.notify_all()
            self._changed.wait_for(lambda: not (self._calls or self._recording))
            self._hurry = False

    def close(self) -> None:
        """Hand over what has gathered, then stop the thread."""
        with self._changed:
            self._closed = True
            self._changed.notify_all()
        self.flush()

    def _hand_over(self) -> None:
        while True:
            with self._changed:
                self._changed.wait_for(lambda: self._calls or self._closed)
                if not self._calls:
                    return
                self._changed.wait_for(lambda: self._hurry or self._closed, self._linger_s)
                calls, failures = self._calls, self._failures
                self._calls = self._failures = 0
                self._recording = True
            try:
                self.breaker.record_outcomes(calls, failures)
            except Exception:  # SharedBreaker absorbs Redis errors; anything else is a bug
                logger.exception("vector breaker: recording %d outcomes failed", calls)
            finally:
                with self._changed:
                    self._recording = False
                    self._changed.notify_all()


class NeverOpen:
    """The gate of a search that keeps no account with the breaker (cache warming, the
    evaluation paths, the benchmarks): always lets the vector stage run, records
    nothing."""

    def allow(self) -> bool:
        return True

    def record(self, *, failed: bool) -> None:
        pass
