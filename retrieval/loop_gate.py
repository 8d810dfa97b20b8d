"""The vector breaker as the event loop calls it.

`SharedBreaker.record()` is a Redis round trip (0.5 ms here, up to the client's timeout
while Redis struggles); made on the event loop, it held up every other search of the
process. Outcomes are therefore handed to one background thread, in order, and the search
goes on. `allow()` stays synchronous: it usually needs no round trip at all (see
`SharedBreaker`), and its verdict is needed before the vector stage starts.

Bounded: at most `max_pending` outcomes wait for the thread. Beyond that (Redis far slower
than the traffic) an outcome is dropped and counted, rather than queued without end.
"""

import logging
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Protocol

from retrieval import metrics
from searchsite.breaker import State

logger = logging.getLogger(__name__)


class Breaker(Protocol):  # retrieval.vector_breaker.SharedBreaker
    def allow(self) -> bool: ...

    def record(self, *, failed: bool) -> None: ...

    def last_seen_state(self) -> State: ...


class LoopGate:
    def __init__(self, breaker: Breaker, *, max_pending: int = 1000) -> None:
        self.breaker = breaker
        self._slots = threading.BoundedSemaphore(max_pending)
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="vector-breaker")

    def allow(self) -> bool:
        allowed = self.breaker.allow()
        metrics.BREAKER_STATE.set(int(self.breaker.last_seen_state() != "closed"))
        return allowed

    def record(self, *, failed: bool) -> None:
        if not self._slots.acquire(blocking=False):
            metrics.BREAKER_OUTCOMES_DROPPED.inc()
            return
        recorded = self._thread.submit(self.breaker.record, failed=failed)
        recorded.add_done_callback(self._recorded)

    def flush(self) -> None:
        """Wait until every outcome handed over so far is recorded."""
        self._thread.submit(lambda: None).result()

    def _recorded(self, recorded: "Future[None]") -> None:
        self._slots.release()
        if recorded.exception() is not None:  # SharedBreaker absorbs Redis errors itself
            logger.error(
                "vector breaker: recording an outcome failed", exc_info=recorded.exception()
            )
